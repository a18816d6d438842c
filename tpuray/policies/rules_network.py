"""The network a GKE cluster joins: never the project's `default` VPC (issue 36, item 5).

A project's `default` network is an auto-mode VPC: one subnet per region taken from 10.128.0.0/9
(https://cloud.google.com/vpc/docs/subnets, "Auto mode IPv4 ranges") and, as created, the
firewall rules default-allow-internal (every protocol and port between its instances),
default-allow-ssh and default-allow-rdp (from 0.0.0.0/0) and default-allow-icmp
(https://cloud.google.com/vpc/docs/firewalls, "Prepopulated rules in the default network").
Every VM anyone starts in the project lands there and reaches the nodes, the pods and, through
the internal Gateway, Serve; an operator range like 10.128.0.0/16 then lies inside the VPC's
own space. A cluster that names no network gets that one too (GKE's Cluster.network: "If left
unspecified, the default network will be used": https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters).
The stacks join the Terraform foundation's VPC instead (terraform/modules/network: custom
subnets, a logged deny-all ingress rule).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tpuray.policies.core import MANDATORY, PROJECT, UNKNOWN, Finding, Resource, Rule
from tpuray.policies.kube import CLUSTER_TYPE, show

DEFAULT = "default"


def _names_default(value: Any) -> bool:
    """`default`, unset, or a self link ending in /default (projects/P/global/networks/default)."""
    if value is None or value == "":
        return True
    return isinstance(value, str) and value.rstrip("/").rsplit("/", 1)[-1] == DEFAULT


def _not_default_network(resources: list[Resource], config: dict[str, Any]) -> Iterator[Finding]:
    for cluster in (r for r in resources if r.type == CLUSTER_TYPE):
        for field in ("network", "subnetwork"):
            value = cluster.props.get(field)
            # An unset subnetwork of a network of its own is that network's business, not the default VPC.
            if value is UNKNOWN or not _names_default(value) or (field == "subnetwork" and value in (None, "")):
                continue
            said = "is not set, so GKE uses" if value in (None, "") else f"is {show(value)},"
            yield Finding(
                f"{cluster.label}: {field} {said} the project's default VPC, whose prepopulated firewall rules "
                "admit all internal traffic and SSH/RDP from anywhere, so every VM of the project reaches the nodes "
                f"and pods: set tpuray:cluster.network and subnetwork to the foundation's VPC (terraform/modules/network)",
                cluster.urn,
            )


RULES = (
    Rule(
        "gke-no-default-network",
        "GKE clusters join a VPC of their own, never the project's default network.",
        MANDATORY,
        stack_check=_not_default_network,
        profile=PROJECT,
    ),
)
