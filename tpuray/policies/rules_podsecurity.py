"""Generic pod security on the Ray pods, judged by checkov's own Kubernetes checks (not a copy).

Each head and worker group template of a RayCluster, RayJob or RayService is expanded into
the Pod KubeRay creates from it, and checkov 3.1.47's checks (pinned in requirements.lock)
are run on that Pod in process: the check objects are imported one by one (about 0.1 s),
not through checkov's runner (2.2 s of CPU to import), so `tpuray check` stays fast.
Only the checks that every pod tpuray renders passes are enforced (CHECKS); the others and
why are in docs/policies.md. Ray- and TPU-specific rules stay in rules_security.py.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from functools import cache
from typing import Any

from tpuray.policies.core import MANDATORY, PROJECT, UNKNOWN, Resource, Rule
from tpuray.policies.kube import RAY_TYPES, cluster_spec, get, groups

# checkov.kubernetes.checks.resource.k8s.<module>: the generic pod rules enforced on Ray pods.
CHECKS = (
    "PrivilegedContainers",  # CKV_K8S_16
    "ShareHostPID",  # CKV_K8S_17
    "ShareHostIPC",  # CKV_K8S_18
    "SharedHostNetworkNamespace",  # CKV_K8S_19
    "HostPort",  # CKV_K8S_26
    "DockerSocketVolume",  # CKV_K8S_27
    "AllowedCapabilitiesSysAdmin",  # CKV_K8S_39
)


@cache
def checks() -> tuple[Any, ...]:
    return tuple(importlib.import_module(f"checkov.kubernetes.checks.resource.k8s.{m}").check for m in CHECKS)


def _known(value: Any) -> Any:
    """The value with anything unknown during preview left out (it cannot be judged yet)."""
    if isinstance(value, dict):
        return {k: _known(v) for k, v in value.items() if v is not UNKNOWN}
    if isinstance(value, list):
        return [_known(v) for v in value if v is not UNKNOWN]
    return value


def expanded_pods(res: Resource) -> list[tuple[str, dict[str, Any]]]:
    """(where, Pod) for every group template: the Pod KubeRay creates from it."""
    cluster = cluster_spec(res.props)
    name = get(res.props, "metadata", "name")
    pods = []
    for g in groups(cluster) if cluster else []:
        template = _known(g.spec.get("template"))
        if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
            continue
        meta = dict(template.get("metadata") or {})
        meta["name"] = f"{name if isinstance(name, str) else res.name}-{g.name}"
        pods.append(
            (f"{g.where}.template", {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]})
        )
    submitter = _known(get(res.props, "spec", "submitterPodTemplate"))
    if isinstance(submitter, dict) and isinstance(submitter.get("spec"), dict):
        meta = {**(submitter.get("metadata") or {}), "name": f"{name if isinstance(name, str) else res.name}-submitter"}
        pods.append(
            (
                "spec.submitterPodTemplate",
                {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": submitter["spec"]},
            )
        )
    return pods


def _pod_security(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    for where, pod in expanded_pods(res):
        for check in checks():
            if str(check.scan_entity_conf(pod, "Pod")) == "CheckResult.FAILED":
                yield f"{res.label}: {where}: checkov {check.id} fails: {check.name}; fix the pod template"


RULES = (
    Rule(
        "ray-pods-unprivileged",
        "Ray pods pass checkov's generic pod checks: not privileged, no host PID/IPC/network, hostPort, docker socket or CAP_SYS_ADMIN.",
        MANDATORY,
        RAY_TYPES,
        _pod_security,
        kubernetes=True,
        profile=PROJECT,
    ),
)
