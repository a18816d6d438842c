"""Scale-from-zero and capacity faults with Ray's own autoscaler (docs/capacity.md, section 4).

One autoscaled emulated cluster for the module: a head whose monitor runs Ray's autoscaler
against tpuray's slice provider (tpuray/local/emulator/autoscale.py), and two TPU worker groups that
start with no replica, as the rendered groups of a stack with a cross-generation fallback:
- train-v5p-16: v5p 2x2x2 (2 hosts x 4 chips), ComputeClass tiers spot then on-demand;
- train-v4-16: v4 2x2x2 (2 hosts x 4 chips), on-demand: the chain's fallback shape.
Small shapes keep the hosts few (at most 2 running at a time). Not v6e or v5e 2x4 on 4-chip
VMs: Ray's SlicePlacementGroup reads those as one VM, so ray_apps.train refuses them
(catalog.SliceShape.ray_reads_as_one_host). Every test starts with no slice:
every group is scaled back to zero after each test.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ray_apps import checkpoints, data, model, slices, train
from tests.drivers import REPO, driver_env, result_of, run_driver, train_argv, wait_for
from tests.ray_fixtures import connected_emulator
from tpuray import capacity, catalog
from tpuray.local.emulator import EmulatedCluster, TpuGroup
from tpuray.local.emulator.autoscale import Autoscale, ProviderRecord, request_scale_to_zero
from tpuray.local.emulator.plan import Plan

pytestmark = pytest.mark.slow

V5P = catalog.lookup("v5p", "2x2x2")
V4 = catalog.lookup("v4", "2x2x2")
V5P_GROUP, V4_GROUP = "train-v5p-16", "train-v4-16"
GROUPS = (
    TpuGroup(V5P_GROUP, "train", V5P, max_slices=1, tiers=(capacity.SPOT, capacity.ON_DEMAND), start_slices=0),
    TpuGroup(V4_GROUP, "train", V4, max_slices=1, tiers=(capacity.ON_DEMAND,), start_slices=0),
)
# Ray's autoscaler v1 (the default); TPURAY_AUTOSCALER_VERSION=2 runs the module under v2.
VERSION = int(os.environ.get("TPURAY_AUTOSCALER_VERSION", "1"))
STEPS, BATCH = 4, 16
LONG_STEPS = 12  # the preemption test's run: still training when its slice is taken away


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmulatedCluster]:
    autoscale = Autoscale(GROUPS, version=VERSION)
    with connected_emulator(Plan((), 0), "tpas-", "test-autoscale", autoscale=autoscale) as emu:
        yield emu


@pytest.fixture(autouse=True)
def from_zero(cluster: EmulatedCluster) -> Iterator[None]:
    """Each test starts with every group at zero replicas and every tier available."""
    assert slices.slice_inventory() == []
    yield
    cluster.set_unavailable([])
    request_scale_to_zero(cluster.state_dir)  # every replica deleted, none recreated
    deadline = time.monotonic() + 60
    while ProviderRecord.load(cluster.state_dir).slices or slices.slice_inventory():
        assert time.monotonic() < deadline, "slices still up 60 s after the groups were scaled to zero"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("autoscale")
    data.write_synthetic(str(root / "data"), rows=V5P.hosts * BATCH * LONG_STEPS, fmt="parquet", files=2)
    return root


def driver_argv(workdir: Path, run_name: str, steps: int = STEPS, **fields: Any) -> list[str]:
    fallback = V4.shape_step.to_flag()
    return train_argv(
        V5P, workdir, run_name, steps=steps, checkpoint_every=2, batch_size=BATCH, fallback_shapes=fallback, **fields
    )


def test_with_spot_out_of_capacity_the_autoscaler_scales_a_v5p_slice_on_demand_and_the_job_trains_there(
    cluster: EmulatedCluster, workdir: Path
) -> None:
    cluster.set_unavailable([("v5p-16", "spot")])
    code, result, output = run_driver(driver_argv(workdir, "spot-out", slice_deadline_s=90), cluster.address)
    assert code == 0, output[-4000:]
    got = result["capacity"]
    assert (got["step"], got["shape"], got["slices"], got["tier"]) == (
        1,
        "TPU-V5P:2x2x2:2:4",
        [f"{V5P_GROUP}-0"],
        "on-demand",
    )
    assert {(p["slice"], p["tpu_worker_id"], p["pod_type"]) for p in result["placements"]} == {
        (f"{V5P_GROUP}-0", "0", "v5p-16"),
        (f"{V5P_GROUP}-0", "1", "v5p-16"),
    }
    assert result["final_step"] == STEPS
    started = ProviderRecord.load(cluster.state_dir)
    assert [(s.name, s.tier, s.market_type) for s in started.slices] == [(f"{V5P_GROUP}-0", "on-demand", "on-demand")]


def test_with_no_v5p_capacity_the_job_trains_on_the_v4_slice_the_autoscaler_scaled_from_zero(
    cluster: EmulatedCluster, workdir: Path
) -> None:
    cluster.set_unavailable([("v5p-16", "*")])
    code, result, output = run_driver(driver_argv(workdir, "generation-out", slice_deadline_s=15), cluster.address)
    assert code == 0, output[-4000:]
    got = result["capacity"]
    assert (got["step"], got["shape"], got["slices"], got["tier"]) == (
        2,
        "TPU-V4:2x2x2:2:4",
        [f"{V4_GROUP}-0"],
        "on-demand",
    )
    assert [(t["granted"], t["seen"]) for t in got["tried"]][0] == (False, "no slice of this shape came up")
    assert {(p["slice"], p["pod_type"]) for p in result["placements"]} == {(f"{V4_GROUP}-0", "v4-16")}
    assert result["final_step"] == STEPS
    record = ProviderRecord.load(cluster.state_dir)
    assert {r["group"] for r in record.refused} >= {V5P_GROUP}
    assert [s.name for s in record.slices] == [f"{V4_GROUP}-0"]


def test_with_no_capacity_anywhere_the_job_fails_at_its_deadline_naming_every_step(
    cluster: EmulatedCluster, workdir: Path
) -> None:
    cluster.set_unavailable([("v5p-16", "*"), ("v4-16", "*")])
    started = time.monotonic()
    code, result, _ = run_driver(driver_argv(workdir, "nothing", slice_deadline_s=5), cluster.address)
    assert code == 1
    assert time.monotonic() - started < 120
    error = result["error"]
    assert error.startswith("ChainExhaustedError: no step of the capacity chain gave 1 whole free slice(s) within 5 s")
    assert (
        "step 1: TPU-V5P 2x2x2 (2 hosts x 4 chips): no whole free slice within 5.0 s; no slice of this shape came up"
        in (error)
    )
    assert (
        "step 2: TPU-V4 2x2x2 (2 hosts x 4 chips): no whole free slice within 5.0 s; "
        "no slice of this shape came up" in error
    )
    record = ProviderRecord.load(cluster.state_dir)
    assert {r["group"] for r in record.refused} == {V5P_GROUP, V4_GROUP}
    assert record.slices == []


def test_a_spot_slice_preempted_mid_run_is_recreated_on_demand_and_the_job_resumes_there_without_a_duplicate_step(
    cluster: EmulatedCluster, workdir: Path
) -> None:
    run_uri = str(workdir / "runs" / "preempted")
    log = open(workdir / "preempted.log", "w+")  # noqa: SIM115 - closed below
    argv = driver_argv(workdir, "preempted", LONG_STEPS, max_failures=2, slice_deadline_s=90)
    proc = subprocess.Popen(
        argv, env=driver_env(cluster.address), cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True
    )
    try:
        first = wait_for(
            "attempt 1 on both hosts",
            lambda: (
                len(placed := [p for p in train.read_placements(run_uri) if p["attempt"] == 1]) == V5P.hosts and placed
            ),
            proc,
        )
        wait_for("checkpoint 2", lambda: (latest := checkpoints.find_latest(run_uri)) and latest[1] >= 2, proc)
        at_kill = checkpoints.find_latest(run_uri)
        assert at_kill is not None
        spot = first[0]["slice"]
        cluster.set_unavailable([("v5p-16", "spot")])  # the preemption takes Spot's capacity with it
        cluster.kill_host(spot, 1)
        proc.wait(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.seek(0)
        output = log.read()
        log.close()
    assert proc.returncode == 0, output[-4000:]
    summary = result_of(output)
    assert spot == f"{V5P_GROUP}-1"  # the group's second replica ever (the first test's was -0)
    assert {p["slice"] for p in first} == {spot}
    second = [p for p in summary["placements"] if p["attempt"] == 2]
    assert sorted((p["slice"], p["tpu_worker_id"]) for p in second) == [
        (f"{V5P_GROUP}-2", "0"),
        (f"{V5P_GROUP}-2", "1"),
    ]
    assert [(s.name, s.tier) for s in ProviderRecord.load(cluster.state_dir).slices] == [
        (f"{V5P_GROUP}-2", "on-demand")
    ]
    final = model.load_checkpoint(summary["checkpoint"])
    assert [h["step"] for h in final.history] == list(range(1, LONG_STEPS + 1))
    assert model.step_history_problems(final.history) == []
    assert final.attempts[1]["resumed_from"] >= at_kill[1]
