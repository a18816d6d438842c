"""How CI and people reach the control plane: GKE's DNS-based endpoint, authorised by IAM.

The deploy workflow runs on GitHub-hosted runners, outside every VPC. The cluster's IP
endpoint stays private (`private_cluster_config.enable_private_endpoint`, plus the
authorized networks for VPC clients); the DNS-based endpoint
(`gke-<id>.<region>.gke.goog`) is reachable from anywhere that reaches Google APIs and lets
a request through only with an IAM identity holding `container.clusters.connect`
(roles/container.developer or a custom role), then Kubernetes RBAC as usual.
https://cloud.google.com/kubernetes-engine/docs/concepts/network-isolation (DNS-based endpoint)
https://cloud.google.com/blog/products/containers-kubernetes/new-dns-based-endpoint-for-the-gke-control-plane

The Kubernetes provider's kubeconfig points at that endpoint. It carries no CA data (the
DNS endpoint presents a publicly trusted certificate) and no credentials: gke-gcloud-auth-plugin
mints short-lived tokens from the runner's Workload Identity Federation login.
"""

from __future__ import annotations


def control_plane_endpoints() -> dict:
    """Cluster.control_plane_endpoints_config: the DNS endpoint open to IAM-authorised callers."""
    return {"dns_endpoint_config": {"allow_external_traffic": True}}


def kubeconfig(name: str, server: str, ca_certificate: str | None = None) -> str:
    """A kubeconfig for one control-plane endpoint, authenticated by gke-gcloud-auth-plugin: the
    DNS-based endpoint (no CA data: a Google-trusted certificate), or with `ca_certificate` the
    private IP endpoint, whose certificate the cluster's own CA signs (control_plane.py)."""
    ca = f"\n    certificate-authority-data: {ca_certificate}" if ca_certificate is not None else ""
    return f"""apiVersion: v1
kind: Config
clusters:
- name: {name}
  cluster:
    server: https://{server}{ca}
contexts:
- name: {name}
  context: {{cluster: {name}, user: {name}}}
current-context: {name}
users:
- name: {name}
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: gke-gcloud-auth-plugin
      provideClusterInfo: true
      installHint: Install gke-gcloud-auth-plugin (gcloud components install gke-gcloud-auth-plugin)
"""
