"""Every pod the stacks render passes Pod Security `restricted`, and the namespace enforces it.

The profile's controls are those of https://kubernetes.io/docs/concepts/security/pod-security-standards/
(tpuray/checks/pss.py). Pods are the rendered templates plus what KubeRay adds to them: the
autoscaler sidecar in the head pod (its securityContext comes from
autoscalerOptions.securityContext) and the RayJob submitter pod (submitterPodTemplate).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import STACKS, mocked

from tpuray import labels
from tpuray.checks.pss import restricted_violations
from tpuray.preview.render import manifests


def rendered_pods(stack: str) -> list[tuple[str, dict[str, Any]]]:
    """(where, pod spec) for every pod KubeRay creates from the stack's Ray objects."""
    pods = []
    for m in manifests(mocked(stack)):
        if m["kind"] not in labels.RAY_KINDS:
            continue
        cluster = labels.ray_cluster_spec(m)
        name = f"{m['kind']}/{m['metadata']['name']}"
        head = copy.deepcopy(cluster["headGroupSpec"]["template"]["spec"])
        if cluster.get("enableInTreeAutoscaling"):
            # KubeRay's autoscaler sidecar (ray-operator/controllers/ray/common/pod.go BuildAutoscalerContainer).
            head["containers"].append(
                {
                    "name": "autoscaler",
                    "image": head["containers"][0]["image"],
                    "securityContext": cluster["autoscalerOptions"]["securityContext"],
                }
            )
        pods.append((f"{name} head", head))
        for group in cluster["workerGroupSpecs"]:
            pods.append((f"{name} {group['groupName']}", group["template"]["spec"]))
        if m["kind"] == "RayJob":
            pods.append((f"{name} submitter", m["spec"]["submitterPodTemplate"]["spec"]))
    return pods


@pytest.mark.parametrize("stack", STACKS)
def test_every_rendered_pod_passes_the_restricted_profile(stack: str) -> None:
    pods = rendered_pods(stack)
    assert len(pods) >= 3
    assert {where: restricted_violations(pod) for where, pod in pods} == {where: [] for where, _ in pods}


def test_prod_renders_head_worker_autoscaler_and_submitter_pods() -> None:
    wheres = [w for w, _ in rendered_pods("prod")]
    assert "RayJob/tpuray-prod-train submitter" in wheres
    assert "RayJob/tpuray-prod-train train-v6e-16" in wheres
    head = dict(rendered_pods("prod"))["RayJob/tpuray-prod-train head"]
    assert [c["name"] for c in head["containers"]] == ["ray-head", "autoscaler"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_namespace_of_the_stack_enforces_restricted(stack: str) -> None:
    # The Ray namespace, and a queue team's own (prod's research, infra/components/queues.py).
    namespaces = [m for m in manifests(mocked(stack)) if m["kind"] == "Namespace"]
    assert [ns["metadata"]["name"] for ns in namespaces] == {"prod": ["ray", "research"]}.get(stack, ["ray"])
    for ns in namespaces:
        assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
        assert ns["metadata"]["labels"]["pod-security.kubernetes.io/warn"] == "restricted"


def test_ray_pods_run_as_the_rayproject_images_own_user() -> None:
    pod = dict(rendered_pods("prod"))["RayJob/tpuray-prod-train train-v6e-16"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 100,
        "fsGroup": 100,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}


# ---------------------------------------------------------------------------- the checker can fail

COMPLIANT: dict[str, Any] = {
    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [
        {
            "name": "ray-worker",
            "image": "rayproject/ray:2.60.0-py312-tpu",
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }
    ],
    "volumes": [{"name": "shared-mem", "emptyDir": {"medium": "Memory"}}],
}


def _pod(**changes: Any) -> dict[str, Any]:
    pod = copy.deepcopy(COMPLIANT)
    for path, value in changes.items():
        *parents, key = path.split("__")
        target = pod
        for p in parents:
            target = target[int(p)] if p.isdigit() else target.setdefault(p, {})
        target[key] = value
    return pod


def test_a_compliant_pod_has_no_violation() -> None:
    assert restricted_violations(COMPLIANT) == []


@pytest.mark.parametrize(
    ("change", "check"),
    [
        ({"hostNetwork": True}, "hostNamespaces"),
        ({"securityContext__windowsOptions": {"hostProcess": True}}, "hostProcess"),
        ({"containers__0__securityContext__windowsOptions": {"hostProcess": True}}, "hostProcess"),
        ({"securityContext__appArmorProfile": {"type": "Unconfined"}}, "appArmorProfile"),
        ({"securityContext__runAsUser": 0}, "runAsUser"),
        ({"containers__0__securityContext__privileged": True}, "privileged"),
        ({"containers__0__securityContext__capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}, "capabilities_"),
        ({"volumes": [{"name": "dev", "hostPath": {"path": "/dev"}}]}, "hostPathVolumes"),
        ({"containers__0__ports": [{"containerPort": 8265, "hostPort": 8265}]}, "hostPorts"),
        ({"containers__0__securityContext__procMount": "Unmasked"}, "procMount"),
        ({"securityContext__seccompProfile": {"type": "Unconfined"}}, "seccompProfile_baseline"),
        ({"securityContext__sysctls": [{"name": "kernel.msgmax", "value": "1"}]}, "sysctls"),
        ({"securityContext__seLinuxOptions": {"type": "spc_t"}}, "seLinuxOptions"),
        ({"volumes": [{"name": "nfs", "nfs": {"server": "x", "path": "/"}}]}, "restrictedVolumes"),
        ({"containers__0__securityContext__allowPrivilegeEscalation": True}, "allowPrivilegeEscalation"),
        ({"securityContext__runAsNonRoot": False}, "runAsNonRoot"),
        ({"containers__0__securityContext__runAsUser": 0}, "runAsUser"),
        ({"containers__0__securityContext__capabilities": {"drop": ["NET_RAW"]}}, "capabilities_restricted"),
    ],
)
def test_each_control_of_the_profile_refuses_its_violation(change: dict[str, Any], check: str) -> None:
    found = restricted_violations(_pod(**change))
    assert any(line.startswith(check) for line in found), found


def test_a_pod_without_seccomp_anywhere_is_refused() -> None:
    pod = copy.deepcopy(COMPLIANT)
    del pod["securityContext"]["seccompProfile"]
    assert restricted_violations(pod) == [
        "seccompProfile_restricted: containers[0] has no RuntimeDefault or Localhost seccomp profile"
    ]


def test_safe_sysctls_and_net_bind_service_are_allowed() -> None:
    pod = _pod(
        securityContext__sysctls=[{"name": "net.ipv4.ip_local_port_range", "value": "32768 60999"}],
        containers__0__securityContext__capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
    )
    assert restricted_violations(pod) == []


def test_a_baseline_capability_is_refused_by_restricted_only() -> None:
    pod = _pod(containers__0__securityContext__capabilities={"drop": ["ALL"], "add": ["CHOWN"]})
    assert restricted_violations(pod) == [
        "capabilities_restricted: containers[0] adds capability CHOWN; only NET_BIND_SERVICE is allowed"
    ]
