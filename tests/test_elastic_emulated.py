"""Elastic training across a preemption with a notice and a slice's return, on emulated slices.

One cluster of two v5p 2x2x2 slices (2 hosts each: the fewest that make each slice a multi-host
gang and the pair a multi-slice run with MEGASCALE_*), one run of ray_apps.train with
`--slices 2 --min-slices 1` (Ray Train's elastic ScalingConfig), driven as the RayJob's
entrypoint. After its first checkpoint, the slice holding rank 0 (the JAX and MEGASCALE
coordinator) is preempted the way GKE and the worker group's preStop hook do it: its Ray nodes
are drained with a deadline (the notice), then killed (tpuray/local/emulator/preemption.py). Once the
run has checkpointed on the one slice left, the slice comes back. The tests read the run's
summary, its persisted history and every rank's recorded placement.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from statistics import mean
from typing import Any

import pytest

from ray_apps import checkpoints, data, goodput, model, train
from tests.drivers import REPO, driver_env, result_of, train_argv, wait_for
from tests.ray_fixtures import connected_emulator
from tpuray import catalog
from tpuray.local.emulator import EmulatedCluster, SliceSpec, plan_for, preemption

pytestmark = pytest.mark.slow

V5P = catalog.lookup("v5p", "2x2x2")
SLICES = ["v5p-el-0", "v5p-el-1"]
STEPS, CHECKPOINT_EVERY, BATCH = 120, 10, 16
NOTICE_S = 8.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmulatedCluster]:
    specs = [SliceSpec(name, "v5p-spot", V5P, "spot") for name in SLICES]
    with connected_emulator(plan_for(specs), "tpel-", "test-elastic") as emu:
        yield emu


def _placed(run_uri: str, attempt: int, ranks: int) -> list[dict[str, Any]] | None:
    placed = [p for p in train.read_placements(run_uri) if p["attempt"] == attempt]
    return placed if len(placed) == ranks else None


def _checkpointed_on_one_slice(run_uri: str) -> bool:
    latest = checkpoints.find_latest(run_uri)
    if latest is None:
        return False
    last = model.read_meta(checkpoints.fetch(latest[0]))["attempts"][-1]
    return last.get("slices") == 1 and latest[1] >= last["start_step"] + CHECKPOINT_EVERY


@pytest.fixture(scope="module")
def elastic_run(cluster: EmulatedCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("elastic")
    # One epoch covers the run on two slices (a new pass over a shard costs ~30 s here).
    data.write_synthetic(str(workdir / "data"), rows=2 * V5P.hosts * BATCH * STEPS, fmt="parquet", files=4)
    run_uri = str(workdir / "runs" / "elastic")
    argv = train_argv(
        V5P,
        workdir,
        "elastic",
        slices=2,
        min_slices=1,
        resize_interval_s=5,
        steps=STEPS,
        checkpoint_every=CHECKPOINT_EVERY,
        batch_size=BATCH,
        min_step_s=0.5,
        slice_deadline_s=60,
    )
    log = open(workdir / "train.log", "w+")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(argv, env=driver_env(cluster.address), cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    try:
        first = wait_for("attempt 1 on both slices", lambda: _placed(run_uri, 1, 4), proc, timeout_s=240)
        wait_for(
            "the first checkpoint",
            lambda: (latest := checkpoints.find_latest(run_uri)) and latest[1] >= CHECKPOINT_EVERY,
            proc,
        )
        live = goodput.live_reports()  # what `tpuray local status` shows while the run trains
        coordinator_slice = next(p["slice"] for p in first if p["rank"] == 0)
        times = preemption.preempt_slice(cluster, coordinator_slice, NOTICE_S)
        wait_for("a checkpoint on one slice", lambda: _checkpointed_on_one_slice(run_uri), proc, timeout_s=300)
        returned = preemption.return_slice(cluster, coordinator_slice)
        proc.wait(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.seek(0)
        output = log.read()
        log.close()
    summary = result_of(output)
    return {
        "summary": summary,
        "output": output,
        "returncode": proc.returncode,
        "preempted": coordinator_slice,
        "times": times,
        "returned": returned,
        "live": live,
        "final": model.load_checkpoint(checkpoints.fetch(summary["checkpoint"])),
    }


def _attempts(run: dict[str, Any]) -> list[dict[str, Any]]:
    return run["final"].attempts


def test_the_run_trains_on_two_then_one_then_two_slices_and_finishes(elastic_run: dict[str, Any]) -> None:
    summary = elastic_run["summary"]
    assert elastic_run["returncode"] == 0, elastic_run["output"][-4000:]
    assert summary["error"] is None and summary["final_step"] == STEPS
    assert summary["history_problems"] == []
    assert [a["slices"] for a in _attempts(elastic_run)] == [2, 1, 2]
    # The summary's slice count over time: every worker group, checkpointed or not.
    over_time = [s["slices"] for s in summary["slices_over_time"]]
    assert over_time[0] == 2 and over_time[-1] == 2 and 1 in over_time
    assert summary["elastic"] == {"min_slices": 1, "max_slices": 2}


def test_loss_keeps_going_down_across_the_shrink_and_the_growth(elastic_run: dict[str, Any]) -> None:
    history = elastic_run["final"].history
    starts = [a["start_step"] for a in _attempts(elastic_run)]
    phases = [
        [h["loss"] for h in history if lo <= h["step"] < hi]
        for lo, hi in zip(starts, [*starts[1:], STEPS + 1], strict=True)
    ]
    tails = [mean(p[-5:]) for p in phases]
    assert tails[0] > tails[1] > tails[2], tails
    # No phase starts over: its first steps are below where the run began.
    for phase in phases[1:]:
        assert mean(phase[:5]) < mean(phases[0][:5])


def test_the_notice_saves_a_checkpoint_inside_the_window(elastic_run: dict[str, Any]) -> None:
    notice = _attempts(elastic_run)[0]["notice"]
    times = elastic_run["times"]
    assert times["noticed"] <= notice["detected_at"] <= times["deadline"]
    summary_notice = elastic_run["summary"]["goodput"]["notices"][0]
    assert summary_notice["within_window"] is True
    assert summary_notice["saved_at"] <= times["deadline"]
    assert summary_notice["step"] == notice["step"]


def test_the_resumed_run_repeats_at_most_the_steps_since_the_notice(elastic_run: dict[str, Any]) -> None:
    first, second = _attempts(elastic_run)[:2]
    assert second["resumed_from"] >= first["notice"]["step"]
    assert second["start_step"] == second["resumed_from"] + 1


def test_megascale_and_jax_distributed_re_form_from_each_new_group(elastic_run: dict[str, Any]) -> None:
    """The lost slice held rank 0, the coordinator: the one-slice group forms its own, without
    MEGASCALE_*, and the regrown group a new two-slice one; neither waits on the old coordinator."""
    placements = elastic_run["summary"]["placements"]
    by_attempt: dict[int, list[dict[str, Any]]] = {}
    for p in placements:
        by_attempt.setdefault(p["attempt"], []).append(p)
    survivor = (set(SLICES) - {elastic_run["preempted"]}).pop()
    one = by_attempt[2]
    assert {p["slice"] for p in one} == {survivor}
    assert [p["jax_processes"] for p in one] == [2, 2]
    assert all("MEGASCALE_NUM_SLICES" not in p["megascale"] for p in one)
    regrown = by_attempt[3]
    assert {p["slice"] for p in regrown} == set(SLICES)
    assert {p["jax_processes"] for p in regrown} == {4}
    assert {p["megascale"]["MEGASCALE_NUM_SLICES"] for p in regrown} == {"2"}
    assert sorted(p["megascale"]["MEGASCALE_SLICE_ID"] for p in regrown) == ["0", "0", "1", "1"]
    old_pids = {p["pid"] for p in by_attempt[1]}
    assert not old_pids & {p["pid"] for p in one + regrown}  # new worker processes, new JAX clients


def test_goodput_accounts_for_every_slice_second_and_names_the_loss(elastic_run: dict[str, Any]) -> None:
    report = elastic_run["summary"]["goodput"]
    total = report["productive_slice_s"] + sum(report["badput_slice_s"].values())
    assert total == pytest.approx(report["allocated_slice_s"], abs=0.1)
    assert 0 < report["goodput"] < 1
    assert report["badput_slice_s"]["checkpoint"] > 0
    (recovery,) = report["recoveries"]
    assert recovery["time_to_recover_s"] > 0
    assert recovery["loss_at"] >= elastic_run["times"]["killed"] - 1


def test_the_returned_slice_was_taken_back(elastic_run: dict[str, Any], cluster: EmulatedCluster) -> None:
    assert preemption.slice_node_ids(cluster, elastic_run["preempted"]) != []
    capacity = [n for _, n in elastic_run["summary"]["goodput"]["capacity"]]
    assert capacity[0] == 2 and 1 in capacity and capacity[-1] == 2


def test_a_running_run_s_goodput_is_found_on_the_cluster_as_status_shows_it(elastic_run: dict[str, Any]) -> None:
    report = elastic_run["live"]["elastic"]
    assert 0 <= report["goodput"] <= 1
    assert report["capacity"][0][1] == 2  # both slices up when the run started
