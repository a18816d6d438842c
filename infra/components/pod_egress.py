"""Egress allow-lists for the Ray namespace: what each pod may connect to, and nothing else.

The namespace denies all egress by default (`default-deny-egress`); each KubeRay object then gets
`<obj>-ray-egress` for its pods (the head and every worker group), plus:
- `<obj>-ray-egress-api` on its head when in-tree autoscaling is on: KubeRay's autoscaler sidecar
  patches the RayCluster and lists pods through the API server (identities.py), reached through
  the `kubernetes` Service at the control plane's private endpoint, inside
  `tpuray:cluster.masterCidr` for a private cluster whose control plane is peered
  (https://cloud.google.com/kubernetes-engine/docs/concepts/private-cluster-concept);
- `<obj>-ray-egress-submitter` for a RayJob's submitter pod: its own head's Jobs API (8265, the
  `ray job submit --address http://<head-svc>:8265` KubeRay runs) and DNS, nothing else.

What `<obj>-ray-egress` admits, and why each:
- every port of the pods of the same object (Ray, libtpu, jax.distributed: network.py);
- DNS on 53 (UDP and TCP) to kube-dns in kube-system (`k8s-app: kube-dns`), the cluster's DNS
  provider (no Cloud DNS or NodeLocal DNSCache configured in cluster.py). Dataplane V2 applies
  policies after a Service's virtual IP is translated to its backends ("GKE translates the
  Service virtual IP address (VIP) to backend Pod IP addresses before evaluating network policy
  rules", https://cloud.google.com/kubernetes-engine/docs/how-to/fqdn-network-policies), so
  the rule names the pods, not the kube-dns Service;
- the GKE metadata server, which serves Workload Identity's tokens: 169.254.169.254/32 on 80 (the
  address clients call) and 169.254.169.252/32 on 988 (where GKE serves it on the node). GKE's
  Workload Identity how-to asks an egress policy to allow 169.254.169.252/32 on 988, and
  169.254.169.254/32 on 80 on Dataplane V2
  (https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity, its network policy
  restriction; as remembered, the page could not be re-read from here, so both forms are
  admitted). Not observed on a cluster: a report that Dataplane V2 rewrites the address to the
  node's own IP first (gke-labs/kube-agents PR 676) would show as GCS calls failing for want of
  credentials (docs/security.md says what to check);
- HTTPS (443) to addresses outside the private, shared and link-local ranges: Cloud Storage
  (data, checkpoints, the code bundle, the model mirror of the Hugging Face weights), Secret
  Manager-backed tokens and, with `hfTokenSecret`, the Hugging Face Hub. The subnets use Private
  Google Access with Google's default domains, which resolve to Google's public addresses
  (https://cloud.google.com/vpc/docs/private-google-access: "default domains"; the
  private.googleapis.com range 199.36.153.8/30 would need a DNS zone the foundation does not
  declare), and a NetworkPolicy names addresses, not hostnames; GKE's FQDNNetworkPolicy would
  narrow this to storage.googleapis.com and huggingface.co. Excepting every private range keeps
  the VPC's VMs, other pods and Services, the control plane and the node's metadata endpoints
  out of this rule.
Image pulls (Artifact Registry) need no rule: the node's container runtime pulls them, outside
the pod's network namespace, and the Secret Manager add-on's provider runs on the node as well.
"""

from __future__ import annotations

from typing import Any

from tpuray import labels
from tpuray.config import StackConfig
from tpuray.ray_ports import DASHBOARD_PORT

KUBE_SYSTEM = "kube-system"
KUBE_DNS_LABELS = {"k8s-app": "kube-dns"}
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
DNS_PORT = 53
HTTPS_PORT = 443
METADATA_SERVER = ("169.254.169.254/32", 80)  # what Google's client libraries call
GKE_METADATA_SERVER = ("169.254.169.252/32", 988)  # where GKE serves it with Workload Identity
# RFC 1918 private, RFC 6598 shared (carrier-grade NAT) and RFC 3927 link-local addresses.
NOT_PUBLIC = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16")


def _tcp(port: int) -> dict[str, Any]:
    return {"protocol": "TCP", "port": port}


def _policy(name: str, selector: dict[str, str], rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name},
        "spec": {"podSelector": {"matchLabels": selector}, "policyTypes": ["Egress"], "egress": rules},
    }


def default_deny_egress(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "default-deny-egress", "namespace": namespace},
        "spec": {"podSelector": {}, "policyTypes": ["Egress"]},
    }


def dns_rule() -> dict[str, Any]:
    peer = {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: KUBE_SYSTEM}},
        "podSelector": {"matchLabels": KUBE_DNS_LABELS},
    }
    return {"to": [peer], "ports": [{"protocol": "UDP", "port": DNS_PORT}, _tcp(DNS_PORT)]}


def object_policies(cfg: StackConfig, kind: str, name: str, autoscaling: bool) -> list[dict[str, Any]]:
    """The egress policies of one KubeRay object's pods (and its RayJob submitter)."""
    own = {labels.RAY_OBJECT: name}
    head = {**own, labels.RAY_NODE: "head"}
    public = {"ipBlock": {"cidr": "0.0.0.0/0", "except": list(NOT_PUBLIC)}}
    rules = [
        {"to": [{"podSelector": {"matchLabels": own}}]},
        dns_rule(),
        *(
            {"to": [{"ipBlock": {"cidr": cidr}}], "ports": [_tcp(port)]}
            for cidr, port in (METADATA_SERVER, GKE_METADATA_SERVER)
        ),
        {"to": [public], "ports": [_tcp(HTTPS_PORT)]},
    ]
    policies = [_policy(f"{name}-ray-egress", own, rules)]
    if autoscaling:
        api = {"to": [{"ipBlock": {"cidr": cfg.cluster.master_cidr}}], "ports": [_tcp(HTTPS_PORT)]}
        policies.append(_policy(f"{name}-ray-egress-api", head, [api]))
    if kind == "RayJob":
        jobs_api = {"to": [{"podSelector": {"matchLabels": head}}], "ports": [_tcp(DASHBOARD_PORT)]}
        policies.append(_policy(f"{name}-ray-egress-submitter", {labels.SUBMITTER_OF: name}, [jobs_api, dns_rule()]))
    return policies
