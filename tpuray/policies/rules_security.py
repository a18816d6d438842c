"""Security: Ray's unauthenticated ports stay private, token auth is on, and the GKE cluster is hardened.

Generic pod security (privileged, host namespaces...) is checkov's: rules_podsecurity.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tpuray.policies.core import MANDATORY, PROJECT, UNKNOWN, Resource, Rule
from tpuray.policies.kube import (
    CLUSTER_TYPE,
    INGRESS_TYPES,
    NODE_POOL_TYPE,
    RAY_TYPES,
    SERVICE_TYPE,
    as_dict,
    as_int,
    as_list,
    cluster_spec,
    get,
    show,
)

# Ray's head ports: dashboard/jobs API, client, GCS, Serve HTTP. None is safe on the internet.
RAY_PORTS = {8265: "dashboard", 10001: "client", 6379: "GCS", 8000: "serve"}
RAY_PORT_NAMES = {"dashboard", "client", "gcs", "gcs-server", "serve", "redis"}
PUBLIC_SERVICE_TYPES = ("LoadBalancer", "NodePort")
INTERNAL_LB_ANNOTATIONS = {
    "networking.gke.io/load-balancer-type": "internal",
    "cloud.google.com/load-balancer-type": "internal",
}


def _internal_lb(annotations: dict[str, Any]) -> bool:
    return any(str(annotations.get(k, "")).lower() == v for k, v in INTERNAL_LB_ANNOTATIONS.items())


def _ray_port(port: Any) -> str | None:
    number = as_int(port)
    if number in RAY_PORTS:
        return f"{number} ({RAY_PORTS[number]})"
    if isinstance(port, str) and port in RAY_PORT_NAMES:
        return repr(port)
    return None


def _service_exposure(label: str, where: str, service: dict[str, Any], ports_known: bool) -> Iterator[str]:
    kind = as_dict(service.get("spec")).get("type")
    if kind not in PUBLIC_SERVICE_TYPES:
        return
    if kind == "LoadBalancer" and _internal_lb(as_dict(get(service, "metadata", "annotations"))):
        return
    exposed = []
    for p in as_list(as_dict(service.get("spec")).get("ports")):
        p = as_dict(p)
        exposed += [
            x for x in (_ray_port(p.get("port")), _ray_port(p.get("targetPort")), _ray_port(p.get("name"))) if x
        ]
    if exposed or not ports_known:
        what = ", ".join(dict.fromkeys(exposed)) if exposed else "the Ray head ports (8265, 10001, 6379, 8000)"
        yield (
            f"{label}: {where}type is {show(kind)} and exposes {what}; Ray's head ports run code for anyone who "
            "reaches them: use ClusterIP (kubectl port-forward / IAP) or an internal LoadBalancer "
            "(networking.gke.io/load-balancer-type: Internal)"
        )


def _ports_not_public(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    if res.type == SERVICE_TYPE:
        yield from _service_exposure(res.label, "spec.", res.props, True)
        return
    if res.type in INGRESS_TYPES:
        annotations = as_dict(get(res.props, "metadata", "annotations"))
        spec = as_dict(res.props.get("spec"))
        if "internal" in str(spec.get("ingressClassName", annotations.get("kubernetes.io/ingress.class", ""))):
            return
        backends = [("spec.defaultBackend", spec.get("defaultBackend"))]
        for i, rule in enumerate(as_list(spec.get("rules"))):
            for j, path in enumerate(as_list(get(rule, "http", "paths"))):
                backends.append((f"spec.rules[{i}].http.paths[{j}].backend", as_dict(path).get("backend")))
        for where, backend in backends:
            port = as_dict(get(backend, "service", "port"))
            hit = _ray_port(port.get("number")) or _ray_port(port.get("name"))
            if hit:
                yield (
                    f"{res.label}: {where}.service.port is {hit}, a Ray head port, behind a public Ingress: "
                    "route only the Serve application through an authenticating proxy, or use an internal Ingress class"
                )
        return
    cluster = cluster_spec(res.props)
    if cluster is None:
        return
    head = as_dict(cluster.spec.get("headGroupSpec"))
    where = f"{cluster.path}.headGroupSpec"
    if head.get("serviceType") in PUBLIC_SERVICE_TYPES:
        yield (
            f"{res.label}: {where}.serviceType is {show(head['serviceType'])}; it publishes the Ray head ports "
            "(8265, 10001, 6379, 8000): use ClusterIP"
        )
    if head.get("enableIngress") is True:
        yield f"{res.label}: {where}.enableIngress is true; it publishes the Ray dashboard: remove it"
    if isinstance(head.get("headService"), dict):
        yield from _service_exposure(res.label, f"{where}.headService.spec.", head["headService"], False)
    serve = as_dict(res.props.get("spec")).get("serveService")
    if res.props.get("kind") == "RayService" and isinstance(serve, dict):
        yield from _service_exposure(res.label, "spec.serveService.spec.", serve, False)


def _token_auth(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    cluster = cluster_spec(res.props)
    if cluster is None:
        return
    mode = get(cluster.spec, "authOptions", "mode")
    if mode != "token":
        yield (
            f"{res.label}: {cluster.path}.authOptions.mode is {show(mode)}; without Ray token authentication any "
            "pod that reaches the head can submit jobs: set authOptions: {mode: token}"
        )


# ---------------------------------------------------------------------------- GKE


def _cluster(check: Any) -> Any:
    def run(res: Resource, config: dict[str, Any]) -> Iterator[str]:
        if res.type == CLUSTER_TYPE:
            yield from check(res, res.props)

    return run


@_cluster
def _private_nodes(res: Resource, p: dict[str, Any]) -> Iterator[str]:
    value = get(p, "privateClusterConfig", "enablePrivateNodes")
    if value is not True and get(p, "networkConfig", "defaultEnablePrivateNodes") is not True and value is not UNKNOWN:
        yield (
            f"{res.label}: privateClusterConfig.enablePrivateNodes is {show(value)}; nodes would get public IPs: "
            "set private_cluster_config.enable_private_nodes = True"
        )


@_cluster
def _workload_identity(res: Resource, p: dict[str, Any]) -> Iterator[str]:
    pool = get(p, "workloadIdentityConfig", "workloadPool")
    if not pool:
        yield (
            f"{res.label}: workloadIdentityConfig.workloadPool is {show(pool)}; without Workload Identity pods use "
            "the node's credentials: set workload_identity_config.workload_pool = '<project>.svc.id.goog'"
        )


@_cluster
def _shielded_nodes(res: Resource, p: dict[str, Any]) -> Iterator[str]:
    # Absent means GKE's default, which is on; only an explicit false turns it off.
    if p.get("enableShieldedNodes") is False:
        yield f"{res.label}: enableShieldedNodes is false; set enable_shielded_nodes = True"


@_cluster
def _no_legacy_abac(res: Resource, p: dict[str, Any]) -> Iterator[str]:
    if p.get("enableLegacyAbac") is True:
        yield f"{res.label}: enableLegacyAbac is true; legacy ABAC bypasses RBAC: set enable_legacy_abac = False"


@_cluster
def _control_plane_access(res: Resource, p: dict[str, Any]) -> Iterator[str]:
    if get(p, "privateClusterConfig", "enablePrivateEndpoint") in (True, UNKNOWN):
        return
    blocks = as_list(get(p, "masterAuthorizedNetworksConfig", "cidrBlocks"))
    cidrs = [as_dict(b).get("cidrBlock") for b in blocks]
    if not cidrs:
        yield (
            f"{res.label}: privateClusterConfig.enablePrivateEndpoint is "
            f"{show(get(p, 'privateClusterConfig', 'enablePrivateEndpoint'))} and masterAuthorizedNetworksConfig lists "
            "no network; the control plane is open to the internet: set enable_private_endpoint or list authorized CIDRs"
        )
    for cidr in cidrs:
        if cidr == "0.0.0.0/0":
            yield f"{res.label}: masterAuthorizedNetworksConfig.cidrBlocks has '0.0.0.0/0', which authorizes everyone: list your networks"


DEFAULT_SA_SUFFIX = "-compute@developer.gserviceaccount.com"


def is_default_service_account(value: Any) -> bool:
    if value is UNKNOWN:
        return False  # an output of a resource we declare: never the default account
    return not value or value == "default" or (isinstance(value, str) and value.endswith(DEFAULT_SA_SUFFIX))


def _node_service_account(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    if res.type == CLUSTER_TYPE and not isinstance(res.props.get("nodeConfig"), dict):
        return  # no default pool config here: node pools are checked one by one
    account = get(res.props, "nodeConfig", "serviceAccount")
    if is_default_service_account(account):
        yield (
            f"{res.label}: nodeConfig.serviceAccount is {show(account)}, i.e. the Compute Engine default service "
            "account (Editor on the project): set node_config.service_account to a least-privilege account"
        )


RULES = (
    Rule(
        "ray-ports-not-public",
        "No Ray head port (8265, 10001, 6379, 8000) behind a public LoadBalancer, NodePort or Ingress.",
        MANDATORY,
        (*RAY_TYPES, SERVICE_TYPE, *INGRESS_TYPES),
        _ports_not_public,
        kubernetes=True,
        profile=PROJECT,
    ),
    Rule(
        "ray-token-auth",
        "Ray clusters enable token authentication (authOptions.mode: token).",
        MANDATORY,
        RAY_TYPES,
        _token_auth,
        kubernetes=True,
        profile=PROJECT,
    ),
    Rule(
        "gke-private-nodes",
        "GKE nodes have private IPs only.",
        MANDATORY,
        (CLUSTER_TYPE,),
        _private_nodes,
        profile=PROJECT,
    ),
    Rule(
        "gke-workload-identity",
        "GKE clusters enable Workload Identity.",
        MANDATORY,
        (CLUSTER_TYPE,),
        _workload_identity,
        profile=PROJECT,
    ),
    Rule(
        "gke-shielded-nodes",
        "GKE clusters keep shielded nodes on.",
        MANDATORY,
        (CLUSTER_TYPE,),
        _shielded_nodes,
        profile=PROJECT,
    ),
    Rule(
        "gke-no-legacy-abac",
        "GKE clusters keep legacy ABAC off.",
        MANDATORY,
        (CLUSTER_TYPE,),
        _no_legacy_abac,
        profile=PROJECT,
    ),
    Rule(
        "gke-control-plane-access",
        "The GKE control plane has a private endpoint or master authorized networks.",
        MANDATORY,
        (CLUSTER_TYPE,),
        _control_plane_access,
        profile=PROJECT,
    ),
    Rule(
        "gke-node-service-account",
        "GKE nodes run as a dedicated service account, not the Compute Engine default.",
        MANDATORY,
        (CLUSTER_TYPE, NODE_POOL_TYPE),
        _node_service_account,
        profile=PROJECT,
    ),
)
