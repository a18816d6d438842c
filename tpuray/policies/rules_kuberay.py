"""What the KubeRay operator itself refuses, for the fields tpuray renders and TPU manifests use.

Each rule mirrors functions of ray-operator/controllers/ray/utils/validation.go at KubeRay
v1.7.0 (the CRD version in tpuray/data/schemas/kuberay), called by the operator's webhook
and at reconcile time; the upstream test that pins each branch is named beside it.
docs/policies.md maps every upstream rule to ours and lists those deliberately not mirrored
(feature-gated fields, status checks, what the CRD schema already enforces).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml

from tpuray.labels import RAY_CLUSTER, RAY_INITIALIZING_TIMEOUT
from tpuray.policies.core import GKE, MANDATORY, Resource, Rule
from tpuray.policies.kube import RAY_TYPES, as_dict, as_int, as_list, cluster_spec, get, groups, show

# validation.go ValidateRay{Cluster,Job,Service}Metadata, constant.go MaxRay*NameLength.
MAX_NAME = {"RayCluster": 53, "RayJob": 47, "RayService": 47}
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# k8s.io/apimachinery validation.IsQualifiedName / IsValidLabelValue.
_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QUALIFIED_NAME = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}$")
LABEL_VALUE = re.compile(rf"^({_NAME})?$")
RESOURCE_PARAMS = ("num-cpus", "num-gpus", "memory", "resources")
AUTOSCALER_V2_ENV = "RAY_enable_autoscaler_v2"
GO_DURATION = re.compile(r"^([0-9]*(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+$")


def _version(raw: Any) -> tuple[int, ...] | None:
    """k8s.io/apimachinery version.ParseGeneric: dotted numbers, optional leading v."""
    match = re.fullmatch(r"v?(\d+(?:\.\d+)+)", raw.strip()) if isinstance(raw, str) else None
    return tuple(int(p) for p in match.group(1).split(".")) if match else None


def _true(value: Any) -> bool:
    return value is True


def _env(container: dict[str, Any], name: str) -> Any:
    return next((e.get("value") for e in as_list(container.get("env")) if as_dict(e).get("name") == name), None)


def _head_container(cluster: dict[str, Any]) -> dict[str, Any]:
    return as_dict(get(cluster, "headGroupSpec", "template", "spec", "containers", 0))


# ---------------------------------------------------------------------------- metadata


def _object_name(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    """ValidateRayClusterMetadata / ValidateRayJobMetadata / ValidateRayServiceMetadata."""
    name, limit = as_dict(res.props.get("metadata")).get("name"), MAX_NAME.get(res.kind)
    if not isinstance(name, str) or limit is None:
        return
    if len(name) > limit:
        yield (
            f"{res.label}: metadata.name is {len(name)} characters; KubeRay refuses a {res.kind} name over {limit} "
            "(it derives pod and service names from it): shorten it"
        )
    elif not DNS1035.match(name):
        yield (
            f"{res.label}: metadata.name {name!r} is not a DNS-1035 label (lower-case letters, digits and '-', "
            "starting with a letter); KubeRay refuses it: rename it"
        )


# ---------------------------------------------------------------------------- groups


def _group_containers(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    """ValidateRayClusterSpec: headGroupSpec / workerGroupSpec should have at least one container."""
    cluster = cluster_spec(res.props)
    for g in groups(cluster) if cluster else []:
        if not g.containers:
            yield f"{res.label}: {g.where}.template.spec.containers is empty; KubeRay needs the Ray container: add it"


def _worker_replicas(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    """ValidateRayClusterSpec: negative minReplicas/maxReplicas, minReplicas greater than maxReplicas."""
    cluster = cluster_spec(res.props)
    for g in groups(cluster) if cluster else []:
        if g.is_head:
            continue
        low, high = as_int(g.spec.get("minReplicas")), as_int(g.spec.get("maxReplicas"))
        for field, value in (("minReplicas", low), ("maxReplicas", high)):
            if value is not None and value < 0:
                yield f"{res.label}: {g.where}.{field} is {value}; KubeRay refuses a negative count: use 0 or more"
        if low is not None and high is not None and 0 <= high < low:
            yield (
                f"{res.label}: {g.where}.minReplicas {low} is greater than maxReplicas {high}; "
                "KubeRay refuses the group: make minReplicas <= maxReplicas"
            )


def _group_resources_and_labels(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    """validateRayGroupResources and validateRayGroupLabels."""
    cluster = cluster_spec(res.props)
    for g in groups(cluster) if cluster else []:
        params = as_dict(g.spec.get("rayStartParams"))
        in_params = [k for k in RESOURCE_PARAMS if params.get(k)]
        if in_params and as_dict(g.spec.get("resources")):
            yield (
                f"{res.label}: {g.where} sets resources in both rayStartParams ({', '.join(in_params)}) and "
                "resources; KubeRay refuses the pair: use only one"
            )
        if "labels" in params:
            yield (
                f"{res.label}: {g.where}.rayStartParams.labels is set; KubeRay refuses it: move the labels to the "
                f"group's top-level labels field"
            )
        for key, value in as_dict(g.spec.get("labels")).items():
            if not QUALIFIED_NAME.match(key) or len(key.rpartition("/")[2]) > 63:
                yield f"{res.label}: {g.where}.labels key {key!r} is not a valid Kubernetes label key; KubeRay refuses it"
            elif not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.match(value):
                yield (
                    f"{res.label}: {g.where}.labels[{key!r}] is {show(value)}, not a valid Kubernetes label value "
                    "(63 characters of letters, digits, '-', '_', '.'); KubeRay refuses it"
                )


# ---------------------------------------------------------------------------- auth and autoscaling


def _token_auth_version(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    """ValidateRayClusterSpec (IsAuthEnabled, IsK8sAuthEnabled), ValidateRayJobSpec, ValidateRayServiceSpec."""
    cluster = cluster_spec(res.props)
    if cluster is None:
        return
    auth, raw = as_dict(cluster.spec.get("authOptions")), cluster.spec.get("rayVersion")
    k8s_auth, where = _true(auth.get("enableK8sTokenAuth")), f"{cluster.path}.authOptions"
    if auth.get("mode") == "token":
        version = _version(raw)
        if version is None or version < (2, 52):
            yield (
                f"{res.label}: {where}.mode is 'token' but {cluster.path}.rayVersion is {show(raw)}; KubeRay needs "
                "rayVersion 2.52.0 or later for token auth: set rayVersion to the image's Ray version"
            )
        elif k8s_auth and version < (2, 55):
            yield f"{res.label}: {where}.enableK8sTokenAuth needs rayVersion 2.55.0 or later, got {show(raw)}"
    elif k8s_auth:
        yield f"{res.label}: {where}.enableK8sTokenAuth is true but mode is not 'token'; KubeRay refuses it: set mode: token"
    if k8s_auth and auth.get("secretName"):
        yield f"{res.label}: {where} sets enableK8sTokenAuth and secretName; KubeRay refuses the pair: keep one"
    if k8s_auth and res.kind in ("RayJob", "RayService"):
        yield f"{res.label}: {where}.enableK8sTokenAuth is not supported for a {res.kind} by KubeRay: remove it"


def _autoscaler(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    """ValidateRayClusterSpec autoscaler branches and validateWorkerGroupIdleTimeout."""
    cluster = cluster_spec(res.props)
    if cluster is None:
        return
    spec, path = cluster.spec, cluster.path
    enabled = _true(spec.get("enableInTreeAutoscaling"))
    env_v2 = _env(_head_container(spec), AUTOSCALER_V2_ENV) in ("1", "true")
    v2 = get(spec, "autoscalerOptions", "version") == "v2" or env_v2
    if env_v2 and not enabled:
        yield (
            f"{res.label}: the head sets {AUTOSCALER_V2_ENV}=true but {path}.enableInTreeAutoscaling is not true; "
            "KubeRay refuses it: set enableInTreeAutoscaling: true or drop the variable"
        )
    for g in groups(cluster):
        if g.is_head:
            continue
        if enabled and _true(g.spec.get("suspend")):
            yield f"{res.label}: {g.where}.suspend is true with the autoscaler on; KubeRay refuses it: unset suspend"
        if "idleTimeoutSeconds" in g.spec and not v2:
            yield (
                f"{res.label}: {g.where}.idleTimeoutSeconds is set but autoscaler v2 is off; KubeRay refuses it: "
                f"set {path}.autoscalerOptions.version: v2"
            )
    if enabled and v2:
        for g in groups(cluster):
            policy = g.pod_spec.get("restartPolicy")
            if policy not in (None, "", "Never"):
                yield (
                    f"{res.label}: {g.where}.template.spec.restartPolicy is {show(policy)}; with autoscaler v2 "
                    "KubeRay requires Never or unset"
                )


# ---------------------------------------------------------------------------- RayJob and RayService


def _rayjob_lifecycle(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    """ValidateRayJobSpec and validateDeletionConfiguration (RayJobDeletionPolicy is on by default in v1.7.0)."""
    spec = as_dict(res.props.get("spec"))
    shutdown, suspend = _true(spec.get("shutdownAfterJobFinishes")), _true(spec.get("suspend"))
    selector, mode = as_dict(spec.get("clusterSelector")), spec.get("submissionMode")
    backoff, ttl = as_int(spec.get("backoffLimit")), as_int(spec.get("ttlSecondsAfterFinished"))
    rules = as_list(get(spec, "deletionStrategy", "deletionRules"))
    if suspend and not shutdown:
        yield f"{res.label}: spec.suspend is true with shutdownAfterJobFinishes false; KubeRay refuses it: set shutdownAfterJobFinishes: true"
    if ttl is not None and ttl < 0:
        yield f"{res.label}: spec.ttlSecondsAfterFinished is {ttl}; KubeRay needs 0 or more"
    elif ttl and not shutdown:
        yield f"{res.label}: spec.ttlSecondsAfterFinished is {ttl} with shutdownAfterJobFinishes false; KubeRay refuses it"
    if not selector and not isinstance(spec.get("rayClusterSpec"), dict):
        yield f"{res.label}: spec sets neither rayClusterSpec nor clusterSelector; KubeRay needs one"
    if selector and (suspend or (backoff or 0) > 0 or mode == "SidecarMode" or not selector.get(RAY_CLUSTER)):
        yield (
            f"{res.label}: spec.clusterSelector needs a non-empty 'ray.io/cluster' and no suspend, backoffLimit > 0 "
            "or SidecarMode; KubeRay refuses the combination"
        )
    if mode == "InteractiveMode" and (backoff or 0) > 0:
        yield f"{res.label}: spec.backoffLimit is {backoff} in InteractiveMode; KubeRay refuses it: set 0"
    active = as_int(spec.get("activeDeadlineSeconds"))
    if active is not None and active <= 0:
        yield f"{res.label}: spec.activeDeadlineSeconds is {active}; KubeRay needs a positive number of seconds"
    if backoff is not None and backoff < 0:
        yield f"{res.label}: spec.backoffLimit is {backoff}; KubeRay needs 0 or more"
    if rules and shutdown:
        yield (
            f"{res.label}: spec.deletionStrategy.deletionRules and shutdownAfterJobFinishes: true are mutually "
            "exclusive in KubeRay: keep one"
        )
    runtime_env = spec.get("runtimeEnvYAML")
    if isinstance(runtime_env, str):
        try:
            parsed = yaml.safe_load(runtime_env)
        except yaml.YAMLError:
            parsed = []
        if parsed is not None and not isinstance(parsed, dict):
            yield f"{res.label}: spec.runtimeEnvYAML is not a YAML mapping; KubeRay cannot read the runtime env"


def _rayservice_spec(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    """ValidateRayServiceMetadata (initializing timeout), ValidateRayServiceSpec, ValidateClusterUpgradeOptions."""
    spec = as_dict(res.props.get("spec"))
    timeout = as_dict(get(res.props, "metadata", "annotations")).get(RAY_INITIALIZING_TIMEOUT)
    if isinstance(timeout, str) and timeout:
        valid = (timeout.isdigit() and int(timeout) > 0) or (
            GO_DURATION.match(timeout) is not None and any(c in "123456789" for c in timeout)
        )
        if not valid:
            yield (
                f"{res.label}: annotation {RAY_INITIALIZING_TIMEOUT} is {timeout!r}; KubeRay needs a positive Go duration "
                "('30m', '1h') or whole seconds"
            )
    if get(spec, "rayClusterConfig", "headGroupSpec", "headService", "metadata", "name"):
        yield f"{res.label}: spec.rayClusterConfig.headGroupSpec.headService.metadata.name is set; KubeRay refuses it"
    strategy = as_dict(spec.get("upgradeStrategy"))
    kind = strategy.get("type")
    if kind is not None and kind not in ("NewClusterWithIncrementalUpgrade", "NewCluster", "None"):
        yield f"{res.label}: spec.upgradeStrategy.type is {show(kind)}; KubeRay allows NewClusterWithIncrementalUpgrade, NewCluster or None"
    if kind == "NewClusterWithIncrementalUpgrade":
        options = as_dict(strategy.get("clusterUpgradeOptions"))
        if not _true(get(spec, "rayClusterConfig", "enableInTreeAutoscaling")) or not options.get("gatewayClassName"):
            yield (
                f"{res.label}: NewClusterWithIncrementalUpgrade needs enableInTreeAutoscaling: true and "
                "upgradeStrategy.clusterUpgradeOptions (with gatewayClassName); KubeRay refuses it without"
            )


def _rule(name: str, description: str, check: Any, kinds: tuple[str, ...] = ()) -> Rule:
    """A rule of what the operator refuses: every one breaks on GKE (the GKE profile)."""
    types = tuple(t for t in RAY_TYPES if not kinds or t.rsplit(":", 1)[1] in kinds)
    return Rule(name, description, MANDATORY, types, check, kubernetes=True, profile=GKE)


RULES = (
    _rule("kuberay-object-name", "Ray object names are DNS-1035 labels within KubeRay's length limit.", _object_name),
    _rule("kuberay-group-containers", "Every Ray head and worker group template has a container.", _group_containers),
    _rule(
        "kuberay-worker-replicas",
        "Worker group minReplicas and maxReplicas are not negative and minReplicas <= maxReplicas.",
        _worker_replicas,
    ),
    _rule(
        "kuberay-group-params",
        "Ray groups set resources in rayStartParams or resources, not both, and valid top-level labels only.",
        _group_resources_and_labels,
    ),
    _rule(
        "kuberay-token-auth-version",
        "Token auth has rayVersion >= 2.52.0; Kubernetes token auth needs mode token, 2.55.0 and a RayCluster.",
        _token_auth_version,
    ),
    _rule(
        "kuberay-autoscaler",
        "Autoscaler settings agree: v2 env with in-tree autoscaling, idle timeouts with v2, no suspended groups.",
        _autoscaler,
    ),
    _rule(
        "rayjob-lifecycle",
        "RayJob suspend, TTL, cluster selector, submission mode, deadlines and deletion rules are a combination KubeRay accepts.",
        _rayjob_lifecycle,
        ("RayJob",),
    ),
    _rule(
        "rayservice-spec",
        "RayService annotations, head service and upgrade strategy are values KubeRay accepts.",
        _rayservice_spec,
        ("RayService",),
    ),
)
