"""Every stack's rendered objects applied to a real kube-apiserver and reconciled by the real
KubeRay operator (tests/control_plane.py; binaries from `make cluster-tools`).

Without the built tools these tests skip with the reason, except under CI=true, where a
missing tool is a failure.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import STACKS, mocked

from tests.control_plane import STAND_INS, ApplyRejected, ControlPlane, dropped_fields, tools_missing
from tpuray.render import manifests
from tpuray.shared import shared_path

# Slow too: starting the control plane takes tens of seconds, so `make test-fast` leaves it out.
pytestmark = [pytest.mark.controlplane, pytest.mark.slow]

CRD_FILES = [
    *sorted(shared_path("schemas", "kuberay").glob("*.yaml")),
    *sorted(shared_path("schemas", "gke").glob("*.yaml")),
]


@pytest.fixture(scope="session")
def control_plane() -> ControlPlane:
    missing = tools_missing()
    if missing:
        reason = f"control-plane tools not built ({', '.join(missing)}): run `make cluster-tools` (needs Go)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    plane = ControlPlane().start(CRD_FILES)
    print(f"\ncontrol plane up: {plane.startup_seconds}; stand-ins: {sorted(STAND_INS)}")
    yield plane
    plane.stop()


def _apply_stack(plane: ControlPlane, stack: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(sent, stored) for every rendered object of the stack, namespaces first."""
    objects = manifests(mocked(stack))
    for obj in objects:
        if obj["kind"] == "Namespace":
            plane.ensure_namespace(obj["metadata"]["name"])
    return [(obj, plane.apply(obj)) for obj in objects]


@pytest.mark.parametrize("stack", STACKS)
def test_every_rendered_object_is_accepted_by_the_api_server_with_no_field_dropped(
    control_plane: ControlPlane, stack: str
) -> None:
    rejected, dropped = [], []
    objects = manifests(mocked(stack))
    for obj in objects:
        if obj["kind"] == "Namespace":
            control_plane.ensure_namespace(obj["metadata"]["name"])
    for obj in objects:
        try:
            stored = control_plane.apply(obj)
        except ApplyRejected as err:
            rejected.append(str(err))
            continue
        lost = dropped_fields(obj, stored)
        if lost:
            dropped.append(f"{obj['kind']} {obj['metadata']['name']}: {lost}")
    assert rejected == []
    assert dropped == []
    assert len(objects) >= 4


def test_a_misspelled_field_is_refused_by_the_api_server_not_silently_pruned(control_plane: ControlPlane) -> None:
    obj = next(o for o in manifests(mocked("dev")) if o["kind"] == "RayJob")
    obj = yaml.safe_load(yaml.safe_dump(obj))
    obj["metadata"]["name"] = "misspelled"
    obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["numOfHost"] = 4
    control_plane.ensure_namespace(obj["metadata"]["namespace"])
    with pytest.raises(ApplyRejected, match=r"\.spec\.rayClusterSpec\.workerGroupSpecs\[0\]\.numOfHost: field not declared in schema"):
        control_plane.apply(obj, dry_run=True)


def test_a_pod_breaking_the_namespace_pod_security_level_is_refused_by_admission(
    control_plane: ControlPlane,
) -> None:
    control_plane.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "pss-restricted", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}},
        }
    )
    control_plane.ensure_namespace("pss-restricted")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "privileged", "namespace": "pss-restricted"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": True}}]},
    }
    with pytest.raises(ApplyRejected, match="violates PodSecurity"):
        control_plane.apply(pod, dry_run=True)


def _wait_for(fetch, done, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    value = fetch()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.5)
        value = fetch()
    return value


def _owned_cluster_name(plane: ControlPlane, obj: dict[str, Any]) -> str:
    """The RayCluster the operator made for a RayJob or RayService (or the RayCluster itself)."""
    kind, meta = obj["kind"], obj["metadata"]
    if kind == "RayCluster":
        return meta["name"]
    field = "rayClusterName" if kind == "RayJob" else "activeServiceStatus"

    def status() -> dict[str, Any]:
        return plane.get(obj["apiVersion"], kind, meta["name"], meta["namespace"]).get("status", {})

    def name(s: dict[str, Any]) -> str:
        if kind == "RayJob":
            return s.get(field, "")
        pending = s.get("pendingServiceStatus", {}).get("rayClusterName", "")
        return s.get(field, {}).get("rayClusterName", "") or pending

    got = _wait_for(status, name)
    assert name(got), f"the operator made no RayCluster for {kind} {meta['name']}; status {got}"
    return name(got)


def _warning_events(plane: ControlPlane, namespace: str, name: str) -> list[str]:
    events = plane.list("v1", "Event", namespace)
    return [
        f"{e['reason']}: {e['message']}"
        for e in events
        if e.get("type") == "Warning" and e["involvedObject"].get("name", "").startswith(name)
    ]


@pytest.mark.parametrize("stack", STACKS)
def test_the_operator_creates_every_worker_group_pod_with_the_stack_labels_and_selectors(
    control_plane: ControlPlane, stack: str
) -> None:
    applied = _apply_stack(control_plane, stack)
    ray_objects = [sent for sent, _ in applied if sent["apiVersion"] == "ray.io/v1"]
    assert ray_objects
    for obj in ray_objects:
        namespace = obj["metadata"]["namespace"]
        cluster = _owned_cluster_name(control_plane, obj)
        spec = {"RayCluster": obj["spec"], "RayJob": obj["spec"].get("rayClusterSpec")}.get(
            obj["kind"], obj["spec"].get("rayClusterConfig")
        )
        for group in spec["workerGroupSpecs"]:
            expected = group.get("replicas", 0) * group.get("numOfHosts", 1)
            selector = f"ray.io/cluster={cluster},ray.io/group={group['groupName']}"
            pods = _wait_for(
                lambda s=selector: control_plane.list("v1", "Pod", namespace, s), lambda p, n=expected: len(p) >= n
            )
            assert len(pods) == expected, f"{obj['kind']} {cluster} group {group['groupName']}"
            template = group["template"]["spec"]
            for pod in pods:
                assert pod["spec"].get("nodeSelector") == template.get("nodeSelector")
                container = pod["spec"]["containers"][0]
                sent = template["containers"][0]
                assert container["resources"]["limits"] == sent["resources"]["limits"]
                assert container["image"] == sent["image"]
            if expected:
                worker_ids = sorted(
                    e["value"] for p in pods for e in p["spec"]["containers"][0].get("env", []) if e["name"] == "TPU_WORKER_ID"
                )
                assert worker_ids in ([], sorted(str(i) for i in range(group.get("numOfHosts", 1))) * group["replicas"])
        assert _warning_events(control_plane, namespace, cluster) == []
