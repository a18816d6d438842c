"""Defence in depth (docs/security.md): Dataplane V2, KMS secrets, maintenance, Binary Authorization,
Pod Security on the Ray namespace, NetworkPolicies, and a TLS-only Serve Gateway."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tpuray.labels import IMAGE_PENDING
from tpuray.policies.core import GKE, MANDATORY, PROJECT, UNKNOWN, Finding, Resource, Rule
from tpuray.policies.kube import (
    CLUSTER_TYPE,
    RAY_TYPES,
    as_dict,
    as_int,
    as_list,
    cluster_spec,
    get,
    groups,
    show,
)

NAMESPACE_TYPE = "kubernetes:core/v1:Namespace"
NETWORK_POLICY_TYPE = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
BINAUTHZ_POLICY_TYPE = "gcp:binaryauthorization/policy:Policy"
GATEWAY_TYPES = (
    "kubernetes:gateway.networking.k8s.io/v1:Gateway",
    "kubernetes:gateway.networking.k8s.io/v1beta1:Gateway",
)
ROUTE_TYPES = (
    "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute",
    "kubernetes:gateway.networking.k8s.io/v1beta1:HTTPRoute",
)
ENFORCE_MODE = "PROJECT_SINGLETON_POLICY_ENFORCE"
PSS_ENFORCE = "pod-security.kubernetes.io/enforce"
PSS_OK = ("restricted", "baseline")
# Ray ports that run code or hold cluster state: never open to everyone, never behind a Gateway.
RAY_CONTROL_PORTS = {6379: "GCS", 8265: "dashboard / Jobs API", 10001: "Ray Client", 52365: "dashboard agent"}
EVERYONE = ("0.0.0.0/0", "::/0")
CERT_OPTION_PREFIX = "networking.gke.io/"


def _of(resources: list[Resource], *types: str) -> list[Resource]:
    return [r for r in resources if r.type in types]


# ---------------------------------------------------------------------------- cluster settings


def _dataplane_v2(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    provider = res.props.get("datapathProvider")
    if provider in ("ADVANCED_DATAPATH", UNKNOWN) or get(res.props, "networkPolicy", "enabled") is True:
        return
    yield (
        f"{res.label}: datapathProvider is {show(provider)} and networkPolicy is not enabled, so NetworkPolicies are "
        "not enforced and every pod reaches the Ray head ports: set datapath_provider = 'ADVANCED_DATAPATH'"
    )


def _secrets_encryption(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    encryption = as_dict(res.props.get("databaseEncryption"))
    if encryption.get("state") == "ENCRYPTED" and encryption.get("keyName"):
        return
    yield (
        f"{res.label}: databaseEncryption.state is {show(encryption.get('state'))}; Kubernetes Secrets (the Ray auth "
        "token) are not encrypted with your Cloud KMS key: set tpuray:cluster.secretsKmsKey"
    )


def _maintenance_window(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    policy = as_dict(res.props.get("maintenancePolicy"))
    if any(policy.get(k) for k in ("recurringWindow", "dailyMaintenanceWindow")) or policy is UNKNOWN:
        return
    yield (
        f"{res.label}: maintenancePolicy has no window; auto-upgrades may recreate TPU slice node pools at any time "
        "and kill a training run: set tpuray:cluster.maintenance.window (and exclusions around long runs)"
    )


# ---------------------------------------------------------------------------- stack rules


def _images(res: Resource) -> Iterator[tuple[str, Any, bool]]:
    """(where, image, pending) of every container: pending when the pod template marks the group as a
    preview's stand-in for an image not built yet (labels.IMAGE_PENDING)."""
    cluster = cluster_spec(res.props)
    if cluster is None:
        return
    for g in groups(cluster):
        pending = bool(g.annotations.get(IMAGE_PENDING))
        for i, c in enumerate(as_list(g.pod_spec.get("containers"))):
            yield f"{g.where}.template.spec.containers[{i}].image", as_dict(c).get("image"), pending


def _admitted(image: str, pattern: Any) -> bool:
    """Binary Authorization's namePattern: exact, a trailing * (the rest of one path segment) or ** (anything)."""
    if not isinstance(pattern, str):
        return False
    if pattern.endswith("**"):
        return image.startswith(pattern[:-2])
    if pattern.endswith("*"):
        return image.startswith(pattern[:-1]) and "/" not in image[len(pattern) - 1 :]
    return image == pattern


def _binary_authorization(resources: list[Resource], config: dict[str, Any]) -> Iterator[Finding]:
    if not any(
        get(c.props, "binaryAuthorization", "evaluationMode") == ENFORCE_MODE for c in _of(resources, CLUSTER_TYPE)
    ):
        return
    policies = _of(resources, BINAUTHZ_POLICY_TYPE)
    allowed = [
        as_dict(p).get("namePattern") for pol in policies for p in as_list(pol.props.get("admissionWhitelistPatterns"))
    ]
    for res in _of(resources, *RAY_TYPES):
        for where, image, pending in _images(res):
            # A preview's stand-in for an image not built yet: `pulumi up` refuses to deploy it at all.
            if not isinstance(image, str) or (pending and config.get("pendingBuildsRefusedAtUp")):
                continue
            if "@sha256:" not in image:
                yield Finding(
                    f"{res.label}: {where} is {image!r}, a tag; the cluster enforces Binary Authorization, which admits "
                    "the project's images by digest: pin it as <image>@sha256:<digest>",
                    res.urn,
                )
            elif policies and not any(_admitted(image, p) for p in allowed):
                yield Finding(
                    f"{res.label}: {where} is {image!r}, which the stack's Binary Authorization policy does not "
                    "allow; the pods would be refused: add it to tpuray:cluster.binaryAuthorization.allowedImages",
                    res.urn,
                )


def _ray_namespaces(resources: list[Resource]) -> dict[str, Resource]:
    found: dict[str, Resource] = {}
    for res in _of(resources, *RAY_TYPES):
        ns = get(res.props, "metadata", "namespace")
        if isinstance(ns, str):
            found.setdefault(ns, res)
    return found


def _namespace_pod_security(resources: list[Resource], config: dict[str, Any]) -> Iterator[Finding]:
    namespaces = {get(n.props, "metadata", "name"): n for n in _of(resources, NAMESPACE_TYPE)}
    for ns in _ray_namespaces(resources):
        res = namespaces.get(ns)
        if res is None:
            continue  # not declared by this stack: its labels are someone else's
        level = get(res.props, "metadata", "labels", PSS_ENFORCE)
        if level not in PSS_OK:
            yield Finding(
                f"{res.label}: metadata.labels[{PSS_ENFORCE!r}] is {show(level)}; the API server admits any pod, "
                "privileged ones included, into the Ray namespace: label it restricted",
                res.urn,
            )


def _is_default_deny(policy: Resource) -> bool:
    spec = as_dict(policy.props.get("spec"))
    return (
        spec.get("podSelector") in ({}, {"matchLabels": {}})
        and "Ingress" in as_list(spec.get("policyTypes"))
        and not as_list(spec.get("ingress"))
    )


def _rule_ports(rule: dict[str, Any]) -> list[tuple[int, int]] | None:
    """(first, last) port ranges a rule admits; None: every port."""
    ports = as_list(rule.get("ports"))
    if not ports:
        return None
    out = []
    for p in ports:
        first = as_int(as_dict(p).get("port"))
        if first is None:
            return None  # a named port or no port: assume the worst
        out.append((first, as_int(as_dict(p).get("endPort")) or first))
    return out


def _open_to_everyone(rule: dict[str, Any]) -> bool:
    peers = as_list(rule.get("from"))
    return not peers or any(get(p, "ipBlock", "cidr") in EVERYONE for p in peers)


def _network_policies(resources: list[Resource], config: dict[str, Any]) -> Iterator[Finding]:
    policies = _of(resources, NETWORK_POLICY_TYPE)
    for ns, ray in _ray_namespaces(resources).items():
        in_ns = [p for p in policies if get(p.props, "metadata", "namespace") == ns]
        if not any(_is_default_deny(p) for p in in_ns):
            yield Finding(
                f"{ray.label}: namespace {ns!r} has no default-deny ingress NetworkPolicy; any pod of the cluster "
                "reaches the Ray head's GCS, dashboard and client ports: declare one (podSelector {}, policyTypes [Ingress])",
                ray.urn,
            )
        for policy in in_ns:
            for i, rule in enumerate(as_list(get(policy.props, "spec", "ingress"))):
                if not _open_to_everyone(as_dict(rule)):
                    continue
                ranges = _rule_ports(as_dict(rule))
                hit = [
                    f"{port} ({what})"
                    for port, what in RAY_CONTROL_PORTS.items()
                    if ranges is None or any(a <= port <= b for a, b in ranges)
                ]
                if hit:
                    yield Finding(
                        f"{policy.label}: spec.ingress[{i}] admits {', '.join(hit)} from everywhere; these Ray ports "
                        "run code for whoever reaches them: name the pods, namespaces or CIDRs that may connect",
                        policy.urn,
                    )


# ---------------------------------------------------------------------------- Serve Gateway


def _serve_gateway(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    if res.type in ROUTE_TYPES:
        for i, rule in enumerate(as_list(get(res.props, "spec", "rules"))):
            for j, ref in enumerate(as_list(as_dict(rule).get("backendRefs"))):
                port = as_int(as_dict(ref).get("port"))
                if port in RAY_CONTROL_PORTS:
                    yield (
                        f"{res.label}: spec.rules[{i}].backendRefs[{j}].port is {port} ({RAY_CONTROL_PORTS[port]}); "
                        "a Gateway must route only to Ray Serve (port 8000), never to a port that runs code"
                    )
        return
    for i, listener in enumerate(as_list(get(res.props, "spec", "listeners"))):
        listener = as_dict(listener)
        where = f"spec.listeners[{i}]"
        if listener.get("protocol") != "HTTPS":
            yield (
                f"{res.label}: {where}.protocol is {show(listener.get('protocol'))}; Serve requests and their answers "
                "would cross the network in clear text: use HTTPS with a certificate"
            )
            continue
        tls = as_dict(listener.get("tls"))
        options = as_dict(tls.get("options"))
        if not as_list(tls.get("certificateRefs")) and not any(str(k).startswith(CERT_OPTION_PREFIX) for k in options):
            yield (
                f"{res.label}: {where}.tls names no certificate; set certificateRefs (a kubernetes.io/tls Secret) or "
                "options networking.gke.io/cert-manager-certs (Certificate Manager)"
            )


RULES = (
    Rule(
        "gke-dataplane-v2",
        "GKE clusters enforce NetworkPolicy (Dataplane V2).",
        MANDATORY,
        (CLUSTER_TYPE,),
        _dataplane_v2,
        profile=PROJECT,
    ),
    Rule(
        "gke-secrets-encryption",
        "GKE clusters encrypt Kubernetes Secrets with a Cloud KMS key.",
        MANDATORY,
        (CLUSTER_TYPE,),
        _secrets_encryption,
        profile=PROJECT,
    ),
    Rule(
        "gke-maintenance-window",
        "GKE clusters have a maintenance window, so upgrades do not recreate TPU pools at random times.",
        MANDATORY,
        (CLUSTER_TYPE,),
        _maintenance_window,
        profile=PROJECT,
    ),
    Rule(
        "gke-binary-authorization",
        "Where Binary Authorization is enforced, every Ray image is pinned by digest and allowed by the policy.",
        MANDATORY,
        stack_check=_binary_authorization,
        # true in policies/policy-config.<env>.json: a stack's preview may show the base standing in
        # for an image not built yet (labels.IMAGE_PENDING), which `pulumi up` refuses to deploy.
        config={"pendingBuildsRefusedAtUp": {"type": "boolean", "default": False}},
        profile=GKE,
    ),
    Rule(
        "ray-namespace-pod-security",
        "The Ray namespace enforces the restricted (or baseline) Pod Security Standard.",
        MANDATORY,
        stack_check=_namespace_pod_security,
        profile=PROJECT,
    ),
    Rule(
        "ray-network-policies",
        "The Ray namespace denies ingress by default and opens no Ray control port to everyone.",
        MANDATORY,
        stack_check=_network_policies,
        profile=PROJECT,
    ),
    Rule(
        "serve-gateway-tls",
        "Gateways listen on HTTPS with a certificate and route only to Ray Serve.",
        MANDATORY,
        (*GATEWAY_TYPES, *ROUTE_TYPES),
        _serve_gateway,
        kubernetes=True,
        profile=PROJECT,
    ),
)
