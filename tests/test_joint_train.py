"""The rendered prod RayJob on the joint substrate (issue 33, "Done when"): the real API server and
KubeRay operator create its cluster, its submitter and its pods; the pod runner runs them; Ray's
own autoscaler v2, with Ray's own KubeRay provider in the head pod's sidecar, adds the slices the
capacity chain's driver demands; training runs on what the emulated GKE nodes hold.
tests/joint_prod.py has the job and its departures from the rendered object.

Stock, in test order: no v6e at all and two on-demand v5e slices (the fall-through); then two
spot v6e slices and one on-demand v6e slice, of which replica 1's slice is preempted mid-run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import mocked

from tests import joint_prod as prod
from tests.control_plane import CRD_FILES, require_tools, tools_missing
from tests.substrate import JointSubstrate, require_namespaces
from tpuray import capacity
from tpuray.local.substrate import nodes

pytestmark = [pytest.mark.controlplane, pytest.mark.slow, pytest.mark.joint_e2e]

STEPS = 6
LONG_STEPS = 16  # the preempted run: 1 s a step at least (--min-step-s), preempted after step 4
V5E_STOCK = nodes.SlicePool(prod.CLASS, prod.V5E, capacity.ON_DEMAND, 2)
V6E_SPOT = nodes.SlicePool(prod.CLASS, prod.V6E, capacity.SPOT, 2)
V6E_ON_DEMAND = nodes.SlicePool(prod.CLASS, prod.V6E, capacity.ON_DEMAND, 1)


@pytest.fixture(scope="module")
def substrate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JointSubstrate]:
    require_tools(tools_missing())
    require_namespaces()
    joint = prod.start(CRD_FILES, tmp_path_factory.mktemp("joint-train"), mocked("prod"))
    try:
        yield joint
    finally:
        joint.stop()


@dataclass(frozen=True)
class Run:
    result: dict[str, Any]
    since: float  # time.time() when its RayJob was created
    deleted_pods: tuple[str, ...] = ()  # the pods the preemption deleted


@pytest.fixture(scope="module")
def fallen_through(substrate: JointSubstrate) -> Run:
    substrate.add_nodes([V5E_STOCK])
    job = prod.submit(substrate, mocked("prod"), "fallen-through", steps=STEPS)
    result = prod.wait_for_result(substrate, job)
    prod.delete(substrate)
    return Run(result, job.created_at)


@pytest.fixture(scope="module")
def preempted(substrate: JointSubstrate, fallen_through: Run) -> Run:
    """v6e in stock; once the checkpoint of step 4 is written, the slice of replica 1 is preempted."""
    substrate.add_nodes([V6E_SPOT, V6E_ON_DEMAND])
    job = prod.submit(substrate, mocked("prod"), "preempted", steps=LONG_STEPS, min_step_s=1.0)
    prod.wait_for_line(substrate, job, "step 4 loss", 900)
    deleted = prod.preempt_replica(substrate, "train-v6e-16-1")
    result = prod.wait_for_result(substrate, job)
    prod.delete(substrate)
    return Run(result, job.created_at, tuple(deleted))


def _first_attempt(run: Run) -> list[dict[str, Any]]:
    return [p for p in run.result["placements"] if p["attempt"] == 1]


def test_with_v6e_out_of_stock_on_every_tier_the_prod_job_falls_through_to_v5e(fallen_through: Run) -> None:
    record = fallen_through.result["capacity"]
    assert (record["step"], record["shape"]) == (2, "TPU-V5LITEPOD:4x4:4:4")
    assert [(t["shape"], t["granted"]) for t in record["tried"]] == [
        ("TPU-V6E:4x4:4:4", False),
        ("TPU-V5LITEPOD:4x4:4:4", True),
    ]
    assert "no slice of this shape came up" in record["tried"][0]["seen"]


def test_ray_s_kuberay_provider_brings_up_two_whole_v5e_slices_and_no_v6e_pod_runs(
    substrate: JointSubstrate, fallen_through: Run
) -> None:
    workers = prod.started_on(substrate, fallen_through.since)
    assert "train-v6e-16" not in workers
    # Every host of both slices ran a pod (a pod whose raylet missed Ray's 30 s registration
    # under this machine's load is replaced by the operator, on the same node: a set, not a list).
    assert sorted(set(workers["train-v5litepod-16"])) == sorted(
        f"gke-{prod.CLASS}-v5litepod-16-on-demand-{s}-{h}" for s in range(2) for h in range(4)
    )


def test_the_fallen_through_job_trains_on_the_two_v5e_slices_and_records_where(fallen_through: Run) -> None:
    result = fallen_through.result
    assert (result["final_step"], result["history_problems"]) == (STEPS, [])
    assert sorted(result["capacity"]["slices"]) == ["train-v5litepod-16-0", "train-v5litepod-16-1"]
    first = _first_attempt(fallen_through)
    assert sorted((p["slice"], p["tpu_worker_id"]) for p in first) == [
        (f"train-v5litepod-16-{s}", str(h)) for s in range(2) for h in range(4)
    ]
    # The tier: a pod cannot read its node's labels, so the run records "unknown" and each
    # host's node (downward API); the nodes name the tier, as `kubectl get nodes` would.
    assert result["capacity"]["tier"] == "unknown"
    assert {prod.node_tier(p["kubernetes_node"]) for p in first} == {"on-demand"}


def test_with_v6e_in_stock_the_prod_job_trains_on_two_v6e_slices_as_one_multi_slice_gang(preempted: Run) -> None:
    record = preempted.result["capacity"]
    assert (record["step"], record["shape"], [t["granted"] for t in record["tried"]]) == (1, "TPU-V6E:4x4:4:4", [True])
    first = _first_attempt(preempted)
    assert sorted((p["slice"], p["tpu_worker_id"]) for p in first) == [
        (f"train-v6e-16-{s}", str(h)) for s in range(2) for h in range(4)
    ]
    # Multi-slice: Ray's JaxTrainer gives every worker MXLA's coordinator, the slice count and
    # its slice's id (one id per slice, the same on its four hosts).
    assert {p["megascale"]["MEGASCALE_NUM_SLICES"] for p in first} == {"2"}
    assert len({p["megascale"]["MEGASCALE_COORDINATOR_ADDRESS"] for p in first}) == 1
    ids = {s: {p["megascale"]["MEGASCALE_SLICE_ID"] for p in first if p["slice"] == s} for s in record["slices"]}
    assert sorted(v for found in ids.values() for v in found) == ["0", "1"]
    assert {prod.node_tier(p["kubernetes_node"]) for p in first} == {"spot"}


def test_a_preempted_slice_is_replaced_through_the_operator_and_rays_provider_and_training_resumes(
    preempted: Run,
) -> None:
    result = preempted.result
    assert len(preempted.deleted_pods) == 4  # the slice's four worker pods went with its nodes
    second = [p for p in result["placements"] if p["attempt"] == 2]
    assert len(second) == 8
    # From the last checkpoint (one every 2 steps) written before the slice went: step 4's or a
    # later one (steps run on while the deletion lands; one run here resumed at 7), never step 1.
    (start,) = {p["start_step"] for p in second}
    assert start >= 5 and (start - 1) % 2 == 0
    # The new replica's pods landed on the on-demand slice; the other spot slice kept its gang.
    assert sorted({p["slice"] for p in second}) == ["train-v6e-16-0", "train-v6e-16-1"]
    on_nodes = sorted(p["kubernetes_node"] for p in second)
    assert [n for n in on_nodes if prod.node_tier(n) == "on-demand"] == [
        f"gke-{prod.CLASS}-v6e-16-on-demand-0-{h}" for h in range(4)
    ]
    assert [prod.node_tier(n) for n in on_nodes].count("spot") == 4
    assert (result["final_step"], result["history_problems"]) == (LONG_STEPS, [])
    (recovery,) = result["goodput"]["recoveries"]
    assert (recovery["resumed_at_step"], recovery["step_reached"] >= start - 1) == (start, True)
    print(f"\npreemption to the next step: {recovery['time_to_recover_s']} s (the run's goodput record)")
