"""How the deploy reaches the control plane, per environment: `tpuray:cluster.dnsEndpoint`.

- `public-iam`: GKE's DNS-based endpoint (`gke-<id>.<region>.gke.goog`) takes user traffic from
  anywhere that reaches Google APIs; Google lets a request through only for an IAM identity
  holding `container.clusters.connect` on the cluster (roles/container.viewer, developer, admin
  hold it), then Kubernetes RBAC applies (IAM grants such as container.admin authorise on their
  own). GitHub-hosted runners deploy this way. The kubeconfig is infra/components/access.py's.
- `off`: `allowExternalTraffic: false`, "whether user traffic is allowed over this endpoint"
  (GKE API v1 ControlPlaneEndpointsConfig.DNSEndpointConfig; "GCP-managed services may still use
  the endpoint"); clients then use the private IP endpoint (privateClusterConfig.privateEndpoint,
  reachable from the VPC and networks joined to it, filtered by masterAuthorizedNetworks), so the
  deploy runs on a runner inside the VPC (docs/ci.md). The kubeconfig names that address and the
  cluster's CA, and authenticates with gke-gcloud-auth-plugin as the DNS one does.
https://cloud.google.com/kubernetes-engine/docs/concepts/network-isolation
"""

from __future__ import annotations

from tpuray.config import ClusterConfig

PUBLIC_IAM = "public-iam"
OFF = "off"


def endpoints_config(cfg: ClusterConfig) -> dict:
    """Cluster.control_plane_endpoints_config for the stack's dnsEndpoint."""
    return {"dns_endpoint_config": {"allow_external_traffic": cfg.dns_endpoint == PUBLIC_IAM}}
