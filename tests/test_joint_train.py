"""The rendered prod RayJob on the joint substrate (issue 33, "Done when"): the real API server and
KubeRay operator create its cluster, its submitter and its pods; the pod runner runs them; Ray's
own autoscaler v2, with Ray's own KubeRay provider in the head pod's sidecar, adds the slices the
capacity chain's driver demands; training runs on what the emulated GKE nodes hold.

Prod's chain: v6e 4x4 (its ComputeClass walks reservation, spot, on-demand), then v5e 4x4 on
demand, two slices of four hosts. The RayJob is prod's as rendered, with the departures
tests/substrate.py `rayjob_for_substrate` names (JAX on CPU, fewer steps, a shorter chain
deadline, no Kueue).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import mocked

from ray_apps import contracts
from tests.control_plane import require_tools, tools_missing
from tests.substrate import (
    JointSubstrate,
    apply_stack,
    container_log,
    custom,
    rayjob_for_substrate,
    require_namespaces,
)
from tests.test_control_plane import CRD_FILES
from tpuray import capacity, catalog
from tpuray.local.substrate import nodes, scheduler
from tpuray.preview.render import manifests

pytestmark = [pytest.mark.controlplane, pytest.mark.slow]

NS = "ray"
JOB = "tpuray-prod-train"
CLASS = "v6e-train"  # prod's training pool's ComputeClass (both shapes)
V6E = catalog.lookup("v6e", "4x4")
V5E = catalog.lookup("v5e", "4x4")
STEPS = 6
LONG_STEPS = 16  # the preempted run: 1 s a step at least (--min-step-s), preempted after step 4
SUBMITTER = "ray-job-submitter"
DEADLINE_S = 150  # each chain step's wait for whole free slices (--slice-deadline-s): 8 hosts start in 60-120 s here


@pytest.fixture(scope="module")
def substrate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JointSubstrate]:
    require_tools(tools_missing())
    require_namespaces()
    joint = JointSubstrate.start(CRD_FILES, tmp_path_factory.mktemp("joint-train"), storage=True)
    try:
        joint.add_nodes([], system=True)
        apply_stack(joint, manifests(mocked("prod")), NS)
        joint.start_loop()
        yield joint
    finally:
        joint.stop()


def _prod_rayjob() -> dict[str, Any]:
    return next(o for o in manifests(mocked("prod")) if o["kind"] == "RayJob")


def run_prod_job(joint: JointSubstrate, timeout_s: float = 900, **train_changes: Any) -> tuple[dict[str, Any], str]:
    """Apply prod's RayJob, wait for its end, and return the driver's result and its log (the
    submitter's `ray job submit` follows the driver's output)."""
    job = rayjob_for_substrate(joint, _prod_rayjob(), steps=STEPS, checkpoint_every=2, slice_deadline_s=DEADLINE_S,
                               batch_size=8, **train_changes)  # fmt: skip
    joint.plane.apply(job)
    return wait_for_job(joint, timeout_s)


def wait_for_job(joint: JointSubstrate, timeout_s: float) -> tuple[dict[str, Any], str]:
    status = joint.wait(
        "the RayJob's end",
        lambda: (
            (s := custom(joint, "rayjobs", NS, JOB).get("status", {})).get("jobStatus")
            in ("SUCCEEDED", "FAILED", "STOPPED")
            and s
        ),
        timeout_s,
    )
    log = container_log(joint, NS, JOB, SUBMITTER)
    assert status["jobStatus"] == "SUCCEEDED", log[-4000:]
    return contracts.last_result(log) or {}, log


def delete_job(joint: JointSubstrate) -> None:
    url = f"{joint.plane.url}/apis/ray.io/v1/namespaces/{NS}/rayjobs/{JOB}"
    joint.kube.session.delete(url, timeout=10)
    joint.wait("the job's pods gone", lambda: not joint.pods(NS) and not joint.runner.pods, 180)


def _bound(joint: JointSubstrate, since: float) -> dict[str, list[str]]:
    """The nodes each worker group's pods ran on, of the pods started since `since`."""
    out: dict[str, list[str]] = {}
    for pod in joint.runner.started:
        if pod["at"] >= since and pod["group"] not in ("", "headgroup"):
            out.setdefault(pod["group"], []).append(pod["node"])
    return {k: sorted(v) for k, v in out.items()}


def _node_tier(node: str) -> str:
    """The tier of an emulated node, by its name (nodes.SlicePool.pool_name: <class>-<pod type>-<tier>-<slice>-<host>);
    the nodes of a preempted slice are gone from the API server."""
    return next(t.key for t in capacity.tiers() if f"-{t.key}-" in node)


def test_with_v6e_out_of_stock_on_every_tier_the_prod_job_trains_on_two_v5e_slices(
    substrate: JointSubstrate,
) -> None:
    substrate.add_nodes([nodes.SlicePool(CLASS, V5E, capacity.ON_DEMAND, 2)])
    t0, since = time.monotonic(), time.time()
    result, log = run_prod_job(substrate)
    print(f"\nprod RayJob, v6e out of stock: {time.monotonic() - t0:.0f} s from created to finished")
    record = result["capacity"]
    assert (record["step"], record["shape"]) == (2, "TPU-V5LITEPOD:4x4:4:4")
    assert [(t["shape"], t["granted"]) for t in record["tried"]] == [
        ("TPU-V6E:4x4:4:4", False),
        ("TPU-V5LITEPOD:4x4:4:4", True),
    ]
    assert sorted(record["slices"]) == ["train-v5litepod-16-0", "train-v5litepod-16-1"]
    assert result["final_step"] == STEPS
    placed = [p for p in result["placements"] if p["attempt"] == 1]
    assert sorted((p["slice"], p["tpu_worker_id"]) for p in placed) == [
        (f"train-v5litepod-16-{s}", str(h)) for s in range(2) for h in range(4)
    ]
    # The tier: a pod cannot read its node's labels, so the run records its nodes (downward API)
    # and the tier is read from them, as `kubectl get nodes` would.
    assert record["tier"] == "unknown"
    recorded = sorted(p["kubernetes_node"] for p in placed)
    assert recorded == sorted(f"gke-{CLASS}-v5litepod-16-on-demand-{s}-{h}" for s in range(2) for h in range(4))
    assert {_node_tier(n) for n in recorded} == {"on-demand"}
    # Ray's KubeRay provider patched the fallback group; no v6e pod ever ran.
    workers = _bound(substrate, since)
    assert workers.get("train-v6e-16", []) == []
    assert workers["train-v5litepod-16"] == sorted(
        f"gke-{CLASS}-v5litepod-16-on-demand-{s}-{h}" for s in range(2) for h in range(4)
    )
    delete_job(substrate)


@dataclass(frozen=True)
class PreemptedRun:
    result: dict[str, Any]
    preempted_at: float  # time.time() of the preemption
    deleted_pods: list[str]
    since: float


@pytest.fixture(scope="module")
def preempted_run(substrate: JointSubstrate) -> PreemptedRun:
    """v6e in stock (two spot slices, one on-demand), prod's job on two v6e slices; once its
    checkpoint of step 4 is written, spot slice 0 is preempted: GKE deletes its nodes and pods."""
    substrate.add_nodes(
        [nodes.SlicePool(CLASS, V6E, capacity.SPOT, 2), nodes.SlicePool(CLASS, V6E, capacity.ON_DEMAND, 1)]
    )
    since = time.time()
    job = rayjob_for_substrate(substrate, _prod_rayjob(), steps=LONG_STEPS, checkpoint_every=2, slice_deadline_s=DEADLINE_S,
                               batch_size=8, min_step_s=1.0)  # fmt: skip
    substrate.plane.apply(job)
    substrate.wait(
        "the checkpoint of step 4", lambda: "step 4 loss" in container_log(substrate, NS, JOB, SUBMITTER), 600
    )
    preempted_at = time.time()
    deleted = scheduler.preempt(substrate.kube, nodes.SlicePool(CLASS, V6E, capacity.SPOT, 2).pool_name(0), grace_s=5)
    result, _ = wait_for_job(substrate, 900)
    delete_job(substrate)
    return PreemptedRun(result, preempted_at, deleted, since)


def test_with_v6e_in_stock_the_prod_job_trains_on_two_v6e_slices_as_one_multi_slice_gang(
    preempted_run: PreemptedRun,
) -> None:
    result = preempted_run.result
    record = result["capacity"]
    assert (record["step"], record["shape"], [t["granted"] for t in record["tried"]]) == (1, "TPU-V6E:4x4:4:4", [True])
    first = [p for p in result["placements"] if p["attempt"] == 1]
    assert sorted((p["slice"], p["tpu_worker_id"]) for p in first) == [
        (f"train-v6e-16-{s}", str(h)) for s in range(2) for h in range(4)
    ]
    # Multi-slice: Ray's JaxTrainer gives every worker MXLA's coordinator, the slice count and
    # its slice's id (one id per slice, the same on its four hosts).
    assert {p["megascale"]["MEGASCALE_NUM_SLICES"] for p in first} == {"2"}
    assert len({p["megascale"]["MEGASCALE_COORDINATOR_ADDRESS"] for p in first}) == 1
    ids = {s: {p["megascale"]["MEGASCALE_SLICE_ID"] for p in first if p["slice"] == s} for s in record["slices"]}
    assert sorted(v for found in ids.values() for v in found) == ["0", "1"]
    assert {_node_tier(p["kubernetes_node"]) for p in first} == {"spot"}


def test_a_preempted_slice_is_replaced_through_the_operator_and_rays_provider_and_training_resumes(
    preempted_run: PreemptedRun, substrate: JointSubstrate
) -> None:
    result = preempted_run.result
    assert len(preempted_run.deleted_pods) == 4  # the slice's four worker pods went with its nodes
    second = [p for p in result["placements"] if p["attempt"] == 2]
    assert len(second) == 8
    # The run resumed from its last checkpoint before the preemption, not from step 1.
    assert {p["start_step"] for p in second} == {5}
    # The replacement slice: new pods of the group on the on-demand slice, and the spot slice
    # that was not preempted.
    nodes_now = {p["kubernetes_node"] for p in second}
    assert {_node_tier(n) for n in nodes_now} == {"spot", "on-demand"}
    assert sorted(n for n in nodes_now if "on-demand" in n) == [f"gke-{CLASS}-v6e-16-on-demand-0-{h}" for h in range(4)]
    assert (result["final_step"], result["history_problems"]) == (LONG_STEPS, [])
    (recovery,) = result["goodput"]["recoveries"]
    assert recovery["step_reached"] >= 4
    print(f"\npreemption to the next step: {recovery['time_to_recover_s']} s (the run's goodput record)")
