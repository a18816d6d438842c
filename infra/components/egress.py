"""ClusterEgress: a Cloud Router and Cloud NAT so that private nodes reach the internet.

The nodes of every stack are private (no external IPs), so without NAT an image pull from
Docker Hub (rayproject/ray) or a pip install in a runtime_env fails. With
`tpuray:cluster.egress: cloudNat` (the default) the program declares a Cloud Router and a
Cloud NAT for the cluster's region and network, with automatically allocated addresses.
With `provided`, the network already gives its subnets NAT (e.g. the Terraform
foundation) and nothing is declared here: a second NAT for all subnet ranges of the same
network and region would be refused.
https://cloud.google.com/kubernetes-engine/docs/how-to/private-clusters (private nodes need
Cloud NAT for outbound internet access) and https://cloud.google.com/nat/docs/gke-example
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from tpuray.config import ClusterConfig


def cluster_egress(
    name: str, cluster: ClusterConfig, project: str, region: str, opts: pulumi.ResourceOptions
) -> gcp.compute.RouterNat | None:
    """The Router and NAT of `cluster.egress: cloudNat`; None when the network provides egress."""
    if cluster.egress == "provided":
        return None
    router = gcp.compute.Router(
        f"{name}-router",
        name=f"{cluster.name}-nat-router",
        project=project,
        region=region,
        network=cluster.network,
        opts=opts,
    )
    return gcp.compute.RouterNat(
        f"{name}-nat",
        name=f"{cluster.name}-nat",
        project=project,
        region=region,
        router=router.name,
        nat_ip_allocate_option="AUTO_ONLY",
        source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
        log_config={"enable": True, "filter": "ERRORS_ONLY"},
        opts=opts,
    )
