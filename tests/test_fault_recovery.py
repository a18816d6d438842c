"""Fault recovery on an emulated cluster of two v5p 2x2x2 slices (4 hosts + head; two hosts per
slice are the fewest that make a multi-host gang, whose dead host is the trap below).

One cluster for the module (in-process: it dies with the test process):
1. Train (ray_apps.train, device emulated, JaxTrainer + FailureConfig) runs as its own
   driver process, the RayJob entrypoint. Once a checkpoint exists, TPU worker 1 of the
   slice it runs on is killed, as a preemption would. Slice A keeps its TPU-v5p-16-head
   resource on worker 0, the trap in which Ray's SlicePlacementGroup waits for ever for the
   dead host; ray_apps.train_slices fences it, so the gang restarts on slice B from the
   latest checkpoint and finishes. Checked from the persisted history and placements.
2. A Serve replica pinned to TPU hosts by label: its host is killed, Serve replaces it on
   another host and requests succeed again.
3. With no fully free slice, the start fails with SliceUnavailableError before a deadline.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from ray_apps import checkpoints, data, model, serve, slices, train
from tests.drivers import REPO, driver_env, result_of, train_argv, wait_for
from tests.ray_fixtures import connected_emulator
from tpuray import catalog
from tpuray.local.emulator import EmulatedCluster, SliceSpec, plan_for

pytestmark = pytest.mark.slow

V5P = catalog.lookup("v5p", "2x2x2")
SLICES = ["v5p-fr-0", "v5p-fr-1"]
STEPS = 20
CHECKPOINT_EVERY = 5
KILL_AFTER_CHECKPOINT = 5  # kill once this checkpoint is on storage
BATCH = 32
# One epoch covers the run: each new pass over a Ray Data shard costs ~30 s here (2 cores).
ROWS = V5P.hosts * BATCH * STEPS


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmulatedCluster]:
    specs = [SliceSpec(name, "v5p-spot", V5P, "spot") for name in SLICES]
    with connected_emulator(plan_for(specs), "tpfr-", "test-fault-recovery") as emu:
        yield emu


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("recovery")
    data.write_synthetic(str(root / "data"), rows=ROWS, fmt="parquet", files=4)
    return root


@pytest.fixture(scope="module")
def recovered_run(cluster: EmulatedCluster, workdir: Path) -> dict[str, Any]:
    """Train, kill TPU worker 1 of the training slice after checkpoint 10, let it finish."""
    run_uri = str(workdir / "runs" / "recovery")
    log = open(workdir / "train.log", "w+")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        train_argv(
            V5P,
            workdir,
            "recovery",
            steps=STEPS,
            checkpoint_every=CHECKPOINT_EVERY,
            batch_size=BATCH,
            max_failures=2,
            slice_deadline_s=90,
        ),
        env=driver_env(cluster.address),
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # Each rank records its own placement as it starts: wait for the whole gang's, or rank 0's
        # record may not be there yet (seen in a CI run).
        first = wait_for(
            "attempt 1 placed on every host",
            lambda: (
                (placed := [p for p in train.read_placements(run_uri) if p["attempt"] == 1])
                and len(placed) == V5P.hosts
                and placed
            ),
            proc,
        )
        wait_for(
            f"checkpoint {KILL_AFTER_CHECKPOINT}",
            lambda: (latest := checkpoints.find_latest(run_uri)) and latest[1] >= KILL_AFTER_CHECKPOINT,
            proc,
        )
        latest_before_kill = checkpoints.find_latest(run_uri)
        assert latest_before_kill is not None
        slice_a = next(p["slice"] for p in first if p["rank"] == 0)
        killed_at = time.time()
        cluster.kill_host(slice_a, 1)
        proc.wait(timeout=150)
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
        "slice_a": slice_a,
        "killed_at": killed_at,
        "checkpoint_at_kill": latest_before_kill[1],
        "run_uri": run_uri,
    }


def test_training_restarts_after_a_host_dies_and_reaches_the_final_step(recovered_run: dict[str, Any]) -> None:
    summary = recovered_run["summary"]
    assert recovered_run["returncode"] == 0, recovered_run["output"][-4000:]
    assert summary["error"] is None and summary["final_step"] == STEPS
    assert len(summary["attempts"]) == 2


def test_restart_resumes_from_the_last_checkpoint_without_gaps_or_duplicate_steps(
    recovered_run: dict[str, Any],
) -> None:
    summary = recovered_run["summary"]
    final = model.load_checkpoint(summary["checkpoint"])
    assert model.step_history_problems(final.history) == []
    assert model.attempt_problems(final.attempts) == []
    assert [h["step"] for h in final.history] == list(range(1, STEPS + 1))
    second = final.attempts[1]
    # Work lost to the failure is at most one checkpoint interval: the restart resumed from
    # the checkpoint that was on storage when the host died, or a later one.
    assert second["resumed_from"] >= recovered_run["checkpoint_at_kill"]
    assert second["start_step"] == second["resumed_from"] + 1
    assert {h["attempt"] for h in final.history if h["step"] > second["resumed_from"]} == {2}


def test_restarted_gang_runs_whole_on_the_other_slice(recovered_run: dict[str, Any]) -> None:
    placements = recovered_run["summary"]["placements"]
    by_attempt: dict[int, list[dict[str, Any]]] = {}
    for p in placements:
        by_attempt.setdefault(p["attempt"], []).append(p)
    slice_a = recovered_run["slice_a"]
    assert {p["slice"] for p in by_attempt[1]} == {slice_a}
    second = by_attempt[2]
    assert len(second) == V5P.hosts
    assert {p["slice"] for p in second} == set(SLICES) - {slice_a}
    # One Train worker per TPU host of the slice.
    assert sorted(p["tpu_worker_id"] for p in second) == [str(i) for i in range(V5P.hosts)]
    assert recovered_run["summary"]["attempts"][1]["slice"] == (set(SLICES) - {slice_a}).pop()


def test_no_free_slice_fails_loudly_before_the_deadline(
    recovered_run: dict[str, Any], cluster: EmulatedCluster, workdir: Path
) -> None:
    """Slice A has lost a host, slice B is held: the start names the slices and fails."""
    import ray

    slice_b = (set(SLICES) - {recovered_run["slice_a"]}).pop()
    with slices.reserve_slice(
        V5P.topology,
        hosts=V5P.hosts,
        chips_per_host=V5P.chips_per_host,
        selectors=[slices.tpu_host_selector(V5P.ray_accelerator_type, slice_name=slice_b)],
        deadline_s=30,
    ):
        with pytest.raises(slices.SliceUnavailableError, match="no free TPU slice") as err:
            slices.fence_all_but_free_slices(
                V5P.topology,
                hosts=V5P.hosts,
                chips_per_host=V5P.chips_per_host,
                accelerator_type=V5P.ray_accelerator_type,
                deadline_s=3,
            )
    assert recovered_run["slice_a"] in str(err.value) and slice_b in str(err.value)
    fences = [pg for pg in ray.util.placement_group_table().values() if "fence" in (pg.get("name") or "")]
    assert fences and {pg["state"] for pg in fences} == {"REMOVED"}  # the Train guard took its fence down


# ---------------------------------------------------------------------------- Serve


def _replica_nodes() -> list[str]:
    from ray._private import state

    return [
        a["Address"]["NodeID"]
        for a in state.actors().values()
        if a.get("State") == "ALIVE" and (a.get("ActorClassName") or "").startswith("ServeReplica:tpuray:")
    ]


def _host_of(node_id: str) -> tuple[str, int]:
    import ray

    labels = next(n["Labels"] for n in ray.nodes() if n["NodeID"] == node_id)
    return labels.get(slices.SLICE_NAME, ""), int(labels.get(slices.WORKER_ID, -1))


def test_serve_replica_moves_to_another_tpu_host_when_its_host_dies(
    recovered_run: dict[str, Any], cluster: EmulatedCluster
) -> None:
    from ray import serve as ray_serve

    port = _free_port()
    ray_serve.start(http_options={"host": "127.0.0.1", "port": port, "location": "HeadOnly"})
    app = serve.build_app(
        {
            "backend": "checkpoint",
            "checkpoint_uri": recovered_run["run_uri"],
            "num_cpus": 0.5,
            "label_selector": slices.tpu_host_selector(V5P.ray_accelerator_type),
        }
    )
    ray_serve.run(app, name="tpuray", route_prefix="/")
    url = f"http://127.0.0.1:{port}/predict"
    body = {"instances": [[1100.0, 3, 25.0, 4.0, 65.0]]}
    assert requests.post(url, json=body, timeout=30).status_code == 200
    (node,) = _replica_nodes()
    slice_name, worker = _host_of(node)
    assert slice_name in SLICES  # the selector put it on a TPU host, not the head
    cluster.kill_host(slice_name, worker)

    def served_elsewhere() -> bool:
        nodes = _replica_nodes()
        if not nodes or node in nodes:
            return False
        try:
            return requests.post(url, json=body, timeout=5).status_code == 200
        except requests.RequestException:
            return False

    wait_for("a replacement replica answering", served_elsewhere, timeout_s=90)
    (new_node,) = _replica_nodes()
    assert _host_of(new_node)[0] in SLICES and new_node != node
    resp = requests.post(url, json=body, timeout=30).json()
    assert resp["model_step"] == STEPS and len(resp["predictions"]) == 1


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
