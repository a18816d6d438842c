"""NetworkPolicies for the Ray namespace and the GKE Gateway in front of Ray Serve.

The cluster runs Dataplane V2 (cluster.py), which enforces NetworkPolicy. The namespace
denies all ingress by default; each KubeRay object then gets one policy per access class
of tpuray/ray_ports.py:
- `<obj>-ray-cluster`: every port, only from pods of the same object, as KubeRay's own
  NetworkPolicy controller admits between the pods of one RayCluster (its base ingress rule has
  no ports: ray-project/kuberay v1.7.0 ray-operator/controllers/ray/networkpolicy_controller.go,
  buildBaseIngressRules). Not a list of Ray's ports: libtpu's hosts of one slice dial each other
  on 8471 (the GKE TPU webhook's tpuProcessPortBase, ai-on-gke/kuberay-tpu-webhook main.go; on
  v7x one port per TPU container from there), multi-slice coordination uses 8081
  (MEGASCALE_PORT), jax.distributed's coordinator binds a port the kernel picks, and a list would
  block whatever the next libtpu, JAX or Ray opens. The pods of one object run the same code
  with the same service account, so a port between them is no boundary worth a list
  (tests/test_network_peers.py, tests/test_network_ports_emulated.py);
- `<obj>-ray-admin-head`: dashboard / Jobs API and Ray Client, from the object's own RayJob
  submitter (labelled tpuray.dev/submitter-of=<obj>; no other pod of the namespace), the control
  plane (the GKE-managed KubeRay operator) and the admin CIDRs. `kubectl port-forward` needs no
  rule: its connection starts inside the pod's own network namespace;
- `<obj>-ray-metrics` (+ `-head`): metrics ports, from Managed Prometheus collectors (gmp-system);
- `<obj>-ray-ingress` (RayService with a gateway): Serve's HTTP port, from the Gateway's
  proxies and Google's health checkers only. Without a gateway nothing reaches it.
A port that only the head opens is admitted on the head only.

Sources: Kubernetes NetworkPolicy (`endPort` is GA since 1.25,
https://kubernetes.io/docs/concepts/services-networking/network-policies/); GKE Gateway
(https://cloud.google.com/kubernetes-engine/docs/concepts/gateway-api,
https://cloud.google.com/kubernetes-engine/docs/how-to/secure-gateway): regional Gateways
need a proxy-only subnet, and their Envoy proxies connect from it; Google health checks and
Google Front Ends connect from 35.191.0.0/16 and 130.211.0.0/22
(https://cloud.google.com/load-balancing/docs/health-check-concepts#ip-ranges).
"""

from __future__ import annotations

from typing import Any

from infra.components import pod_egress
from tpuray import labels
from tpuray.config import StackConfig
from tpuray.config.security import INTERNAL_GATEWAY, ServeGateway
from tpuray.ray_ports import SERVE_PORT, Access, RayPort, by_access

GOOGLE_FRONT_ENDS = ("35.191.0.0/16", "130.211.0.0/22")  # health checks and global LB proxies
METRICS_NAMESPACE = "gmp-system"  # Google Cloud Managed Service for Prometheus collectors
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace
# Ray Serve's own proxy health endpoint (ray.serve._private.proxy_request_response).
SERVE_HEALTH_PATH = "/-/healthz"
CERT_MANAGER_OPTION = "networking.gke.io/cert-manager-certs"


def default_deny(namespace: str) -> list[dict[str, Any]]:
    """No ingress and no egress for any pod of the namespace but what a policy admits (pod_egress.py)."""
    ingress = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "default-deny-ingress", "namespace": namespace},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }
    return [ingress, pod_egress.default_deny_egress(namespace)]


def _ports(ports: list[RayPort]) -> list[dict[str, Any]]:
    out = []
    for p in ports:
        entry: dict[str, Any] = {"protocol": "TCP", "port": p.port}
        if p.end_port is not None:
            entry["endPort"] = p.end_port
        out.append(entry)
    return out


def _policy(
    name: str, selector: dict[str, str], peers: list[dict[str, Any]], ports: list[RayPort] | None
) -> dict[str, Any]:
    """One ingress rule from `peers`; on `ports`, or on every port when ports is None."""
    rule: dict[str, Any] = {"from": peers}
    if ports is not None:
        rule["ports"] = _ports(ports)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name},
        "spec": {
            "podSelector": {"matchLabels": selector},
            "policyTypes": ["Ingress"],
            "ingress": [rule],
        },
    }


def serve_sources(gateway: ServeGateway) -> list[str]:
    """Where Serve traffic comes from: the regional proxies, or Google's front ends."""
    if gateway.class_name == INTERNAL_GATEWAY:
        assert gateway.proxy_only_subnet_cidr is not None  # config validation requires it
        return [gateway.proxy_only_subnet_cidr, *GOOGLE_FRONT_ENDS]
    return list(GOOGLE_FRONT_ENDS)


def object_policies(cfg: StackConfig, kind: str, name: str) -> list[dict[str, Any]]:
    """The NetworkPolicies of one KubeRay object (pods labelled tpuray.dev/ray-object=<name>)."""
    own = {labels.RAY_OBJECT: name}
    head = {**own, labels.RAY_NODE: "head"}
    # The object's own submitter (a RayJob's), never the rest of the namespace; the control plane; admins.
    admin_peers: list[dict[str, Any]] = (
        [{"podSelector": {"matchLabels": {labels.SUBMITTER_OF: name}}}] if kind == "RayJob" else []
    )
    admin_peers += [{"ipBlock": {"cidr": cidr}} for cidr in (cfg.cluster.master_cidr, *cfg.workloads.admin_cidrs)]
    peers = {
        Access.CLUSTER: [{"podSelector": {"matchLabels": own}}],
        Access.ADMIN: admin_peers,
        Access.METRICS: [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: METRICS_NAMESPACE}}}],
    }
    serve = cfg.workloads.serve
    if kind == "RayService" and serve is not None and serve.gateway is not None:
        peers[Access.INGRESS] = [{"ipBlock": {"cidr": cidr}} for cidr in serve_sources(serve.gateway)]
    # Pods of the same object: every port (KubeRay's intra-cluster rule; see the module docstring).
    policies = [_policy(f"{name}-ray-{Access.CLUSTER.value}", own, peers.pop(Access.CLUSTER), None)]
    for access, sources in peers.items():
        everywhere = by_access(access, head=False)
        head_only = [p for p in by_access(access, head=True) if p.head_only]
        if everywhere:
            policies.append(_policy(f"{name}-ray-{access.value}", own, sources, everywhere))
        if head_only:
            policies.append(_policy(f"{name}-ray-{access.value}-head", head, sources, head_only))
    return policies


def serve_service_name(rayservice: str) -> str:
    """The Service KubeRay creates for a RayService's Serve proxies."""
    return f"{rayservice}-serve-svc"


def gateway_objects(cfg: StackConfig, rayservice: str) -> list[dict[str, Any]]:
    """Gateway + HTTPRoute (+ GKE HealthCheckPolicy, + GCPBackendPolicy with IAP) for Serve."""
    serve = cfg.workloads.serve
    if serve is None or serve.gateway is None:
        return []
    gw = serve.gateway
    gateway_name = f"{rayservice}-gateway"
    tls: dict[str, Any] = {"mode": "Terminate"}
    if gw.tls.secret_name:
        tls["certificateRefs"] = [{"kind": "Secret", "group": "", "name": gw.tls.secret_name}]
    else:
        tls["options"] = {CERT_MANAGER_OPTION: ",".join(gw.tls.certificate_manager)}
    service = serve_service_name(rayservice)
    target = {"group": "", "kind": "Service", "name": service}
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": gateway_name},
            "spec": {
                "gatewayClassName": gw.class_name,
                "listeners": [
                    {
                        "name": "https",
                        "protocol": "HTTPS",
                        "port": 443,
                        "hostname": gw.hostname,
                        "tls": tls,
                        "allowedRoutes": {"namespaces": {"from": "Same"}},
                    }
                ],
            },
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": f"{rayservice}-route"},
            "spec": {
                "parentRefs": [{"name": gateway_name, "sectionName": "https"}],
                "hostnames": [gw.hostname],
                "rules": [
                    {
                        "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                        "backendRefs": [{"name": service, "port": SERVE_PORT}],
                    }
                ],
            },
        },
        {
            # The load balancer's default health check asks GET / of the app; Serve's proxy answers here.
            "apiVersion": "networking.gke.io/v1",
            "kind": "HealthCheckPolicy",
            "metadata": {"name": f"{rayservice}-health"},
            "spec": {
                "default": {
                    "config": {
                        "type": "HTTP",
                        # The Service's serving port is Serve's 8000; the CRD's CEL forbids naming it too.
                        "httpHealthCheck": {"portSpecification": "USE_SERVING_PORT", "requestPath": SERVE_HEALTH_PATH},
                    }
                },
                "targetRef": target,
            },
        },
    ]
    if gw.iap is not None:
        objects.append(
            {
                "apiVersion": "networking.gke.io/v1",
                "kind": "GCPBackendPolicy",
                "metadata": {"name": f"{rayservice}-iap"},
                "spec": {
                    "default": {
                        "iap": {
                            "enabled": True,
                            "clientID": gw.iap.client_id,
                            "oauth2ClientSecret": {"name": gw.iap.oauth_secret_name},
                        }
                    },
                    "targetRef": target,
                },
            }
        )
    return objects
