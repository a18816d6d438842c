"""Kueue in front of the rendered RayJobs, on the real control plane: kube-apiserver, the KubeRay
operator and Kueue's controller-manager with its Ray integrations (tests/control_plane.py,
tests/kueue_plane.py; binaries from `make cluster-tools`).

The objects are the program's (prod's queues, the stack's RayJob; a flex-start stack for queued
provisioning), applied as rendered; a second job is the rendered RayJob under another name.
Stand-ins (tests/kueue_plane.py STAND_INS, docs/testing.md): a job "finishes" when the test writes
the RayJob status KubeRay would write at its end; GKE's provisioning is the test setting the
ProvisioningRequest's Provisioned condition.

Without the built tools these tests skip with the reason, except under CI=true, where a missing
tool is a failure.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.control_plane import CRD_FILES, ControlPlane, require_tools, tools_missing
from tests.fuzz_stack import write_stack
from tests.kueue_plane import condition, kueue_missing, start_kueue, wait_for, workload_of
from tpuray.config import read_stack_file, stacks_dir
from tpuray.labels import KUEUE_PRIORITY_CLASS, KUEUE_QUEUE_NAME, RAY_CLUSTER
from tpuray.preview.mockrun import run_stack
from tpuray.preview.render import manifests

pytestmark = [pytest.mark.controlplane, pytest.mark.slow]
RAY = "ray.io/v1"


@pytest.fixture(scope="module")
def plane() -> ControlPlane:
    require_tools(tools_missing() + kueue_missing())
    # Kueue's CRDs come from its build, with the conversion patches its manifests apply (kueue_plane).
    plane = ControlPlane().start([p for p in CRD_FILES if p.parent.name != "kueue"])
    try:
        start_kueue(plane)
    except BaseException:
        plane.stop()
        raise
    yield plane
    plane.stop()


@pytest.fixture
def ended(plane: ControlPlane) -> list[dict[str, Any]]:
    """The jobs a test submits: each is ended after the test, passed or failed, so the next test
    finds the whole quota free (a finished Workload holds none)."""
    jobs: list[dict[str, Any]] = []
    yield jobs
    for job in jobs:
        _end(plane, job)


def _submit(plane: ControlPlane, ended: list[dict[str, Any]], job: dict[str, Any]) -> None:
    plane.apply(job)
    ended.append(job)


def _apply(plane: ControlPlane, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Namespaces first (with their default accounts), then the rest as rendered; the RayJobs are returned."""
    for obj in objects:
        if obj["kind"] == "Namespace":
            plane.ensure_namespace(obj["metadata"]["name"])
    for obj in objects:
        if obj["kind"] != "RayJob":
            plane.apply(obj)
    return [o for o in objects if o["kind"] == "RayJob"]


def _renamed(job: dict[str, Any], name: str, **labels: str) -> dict[str, Any]:
    """The rendered RayJob under another name (and labels): a second submission of the same job."""
    out = copy.deepcopy(job)
    out["metadata"]["name"] = name
    out["metadata"]["labels"].update(labels)
    return out


def _job(plane: ControlPlane, job: dict[str, Any]) -> dict[str, Any]:
    return plane.get(RAY, "RayJob", job["metadata"]["name"], job["metadata"]["namespace"])


def _admitted(plane: ControlPlane, job: dict[str, Any]) -> dict[str, Any]:
    """The job once Kueue unsuspended it and KubeRay named its RayCluster (or as it is after the wait)."""
    return wait_for(
        lambda: _job(plane, job), lambda j: not j["spec"].get("suspend") and j.get("status", {}).get("rayClusterName")
    )


def _pods(plane: ControlPlane, namespace: str, cluster: str) -> list[dict[str, Any]]:
    return plane.list("v1", "Pod", namespace, f"{RAY_CLUSTER}={cluster}")


def _finish(plane: ControlPlane, job: dict[str, Any]) -> None:
    """Stand-in for the job ending: the status KubeRay writes when a RayJob succeeded."""
    meta = job["metadata"]
    status = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "message": "finished by the test"}
    response = plane.session.patch(
        plane.path(RAY, "RayJob", meta["name"], meta["namespace"]) + "/status",
        data=json.dumps({"status": status}),
        headers={"Content-Type": "application/merge-patch+json"},
        timeout=10,
    )
    response.raise_for_status()


def _end(plane: ControlPlane, job: dict[str, Any]) -> None:
    """Marks the job finished (a no-op for one that is) and waits until Kueue released its quota."""
    _finish(plane, job)
    wait_for(
        lambda: workload_of(plane, job["metadata"]["namespace"], job["metadata"]["name"]),
        lambda wl: wl is None or condition(wl, "Finished") == "True",
    )


def _suspended_and_podless(plane: ControlPlane, job: dict[str, Any]) -> tuple[bool, int, int]:
    got = _job(plane, job)
    owned = [
        c
        for c in plane.list(RAY, "RayCluster", job["metadata"]["namespace"])
        if any(ref.get("name") == job["metadata"]["name"] for ref in c["metadata"].get("ownerReferences", []))
    ]
    pods = sum(len(_pods(plane, job["metadata"]["namespace"], c["metadata"]["name"])) for c in owned)
    return got["spec"].get("suspend") is True, len(owned), pods


def _prod_one_shape(tmp: Path) -> Path:
    """prod with its training pool's chain cut to its first shape: a RayJob whose v6e group starts
    with its two slices, which Kueue counts at admission. (A chain's groups start empty, so that
    KubeRay's Ready gate never holds its driver; Kueue then counts its head alone:
    docs/capacity.md, "Queues and the capacity chain".)"""
    raw = read_stack_file(stacks_dir() / "Pulumi.prod.yaml")
    for pool in raw["slicePools"]:
        pool.pop("fallback", None)
    path = write_stack(tmp, "prod-one-shape", raw)
    return path


def test_a_second_job_wanting_the_whole_quota_stays_suspended_without_pods_until_the_first_finishes(
    plane: ControlPlane, ended: list[dict[str, Any]], tmp_path: Path
) -> None:
    (job,) = _apply(plane, manifests(run_stack(str(_prod_one_shape(tmp_path)))))
    first, second = _renamed(job, "whole-quota-first"), _renamed(job, "whole-quota-second")
    _submit(plane, ended, first)
    got = _admitted(plane, first)
    assert got["spec"].get("suspend", False) is False  # Kueue unsuspended it (false is left out)
    cluster = got["status"]["rayClusterName"]
    # prod: training holds 16 chips of v6e-train and borrows research's 16, so 2 slices x 4 hosts.
    pods = wait_for(lambda: _pods(plane, "ray", cluster), lambda p: len(p) >= 9)
    workers = [p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "worker"]
    assert len(workers) == 8
    # Kueue put the flavor's node labels into the pods it admitted.
    assert workers[0]["spec"]["nodeSelector"]["cloud.google.com/compute-class"] == "v6e-train"

    _submit(plane, ended, second)
    wl = wait_for(lambda: workload_of(plane, "ray", "whole-quota-second"), lambda w: w is not None and w.get("status"))
    assert condition(wl, "QuotaReserved") == "False"
    time.sleep(5)  # time for a wrong admission to show
    assert _suspended_and_podless(plane, second) == (True, 0, 0)

    _finish(plane, first)
    got = _admitted(plane, second)
    assert got["spec"].get("suspend", False) is False and got["status"]["rayClusterName"]


def test_a_higher_priority_job_preempts_a_lower_one_in_the_same_queue(
    plane: ControlPlane, ended: list[dict[str, Any]], tmp_path: Path
) -> None:
    (job,) = _apply(plane, manifests(run_stack(str(_prod_one_shape(tmp_path)))))
    low = _renamed(job, "priority-low", **{KUEUE_PRIORITY_CLASS: "research"})
    high = _renamed(job, "priority-high")
    assert high["metadata"]["labels"][KUEUE_PRIORITY_CLASS] == "production"
    _submit(plane, ended, low)
    assert _admitted(plane, low)["spec"].get("suspend", False) is False

    _submit(plane, ended, high)
    assert _admitted(plane, high)["spec"].get("suspend", False) is False
    evicted = wait_for(lambda: workload_of(plane, "ray", "priority-low"), lambda w: condition(w, "Evicted") == "True")
    reasons = [c.get("reason") for c in evicted["status"]["conditions"] if c["type"] == "Evicted"]
    assert reasons == ["Preempted"]
    assert wait_for(lambda: _job(plane, low), lambda j: j["spec"].get("suspend") is True)["spec"]["suspend"] is True


def _flex_stack(tmp: Path) -> Path:
    """dev with a flex-start pool filled only through queued provisioning, training on it."""
    raw = read_stack_file(stacks_dir() / "Pulumi.dev.yaml")
    raw["slicePools"].append(
        {"name": "v6e-flex", "generation": "v6e", "topology": "4x4", "slices": 1, "capacity": [{"flexStart": True}]}
    )
    raw["workloads"]["train"]["pool"] = "v6e-flex"
    raw["queues"] = {
        "teams": [{"name": "dev", "quotas": [{"pool": "v6e-flex", "chips": 16}]}],
        "queuedProvisioning": {"pools": ["v6e-flex"], "maxRunDurationSeconds": 86400},
    }
    path = write_stack(tmp, "flex", raw)
    return path


def test_a_flex_start_job_waits_on_its_provisioning_request_and_starts_once_it_is_provisioned(
    plane: ControlPlane, ended: list[dict[str, Any]], tmp_path: Path
) -> None:
    (job,) = _apply(plane, manifests(run_stack(str(_flex_stack(tmp_path)))))
    job = _renamed(job, "flex-job")
    assert job["metadata"]["labels"][KUEUE_QUEUE_NAME] == "dev"
    _submit(plane, ended, job)

    requests = wait_for(lambda: plane.list("autoscaling.x-k8s.io/v1", "ProvisioningRequest", "ray"), bool)
    (request,) = requests
    assert request["spec"]["provisioningClassName"] == "queued-provisioning.gke.io"
    assert request["spec"]["parameters"] == {"maxRunDurationSeconds": "86400"}
    # Only the TPU hosts go through DWS: one pod set of the slice's 4 hosts.
    assert [p["count"] for p in request["spec"]["podSets"]] == [4]
    time.sleep(5)  # time for a wrong admission to show
    assert _suspended_and_podless(plane, job) == (True, 0, 0)

    # Stand-in for GKE: the whole slice is provisioned.
    now = "2026-01-01T00:00:00Z"
    status = {
        "conditions": [
            {"type": t, "status": "True", "reason": t, "message": "stand-in", "lastTransitionTime": now}
            for t in ("Accepted", "Provisioned")
        ]
    }
    meta = request["metadata"]
    plane.session.patch(
        plane.path("autoscaling.x-k8s.io/v1", "ProvisioningRequest", meta["name"], "ray") + "/status",
        data=json.dumps({"status": status}),
        headers={"Content-Type": "application/merge-patch+json"},
        timeout=10,
    ).raise_for_status()

    got = _admitted(plane, job)
    assert got["spec"].get("suspend", False) is False
    pods = wait_for(lambda: _pods(plane, "ray", got["status"]["rayClusterName"]), lambda p: len(p) >= 5)
    workers = [p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "worker"]
    assert len(workers) == 4
    annotations = workers[0]["metadata"].get("annotations", {})
    assert annotations.get("autoscaling.x-k8s.io/consume-provisioning-request") == meta["name"]
