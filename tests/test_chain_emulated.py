"""The capacity chain and multi-slice training on emulated slices (docs/capacity.md).

One cluster for the module (in-process: it dies with the test process): two v5p 2x2x2 slices,
one on the spot tier and one on-demand (GKE's two tiers of the shape), and one v4 2x2x2 slice
(the chain's cross-generation step). Two hosts per slice are the fewest that make each slice a
multi-host gang, which is what the chain must keep whole; more hosts would only cost the suite
time. (Not v6e or v5e 2x4 on 4-chip VMs: Ray's SlicePlacementGroup reads those as one VM and
ray_apps.train refuses them, catalog.SliceShape.ray_reads_as_one_host.) The tests run in file order and take hosts away as they go, the way preemptions
and stockouts would:
1. the ray_apps.train driver trains one gang over both v5p slices (4 workers, MEGASCALE_*);
2. a host of the spot slice dies: the chain's first step gets the on-demand slice;
3. a host of the on-demand slice dies too: no whole v5p slice, the driver trains on v4;
4. a chain of shapes none of which has a whole slice fails at its deadline naming each step.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ray_apps import chain, data, slices
from tests import drivers
from tests.drivers import train_argv
from tests.ray_fixtures import connected_emulator
from tpuray import catalog
from tpuray.local.emulator import EmulatedCluster, SliceSpec, plan_for

pytestmark = pytest.mark.slow

V5P = catalog.lookup("v5p", "2x2x2")
V4 = catalog.lookup("v4", "2x2x2")
SPOT, ON_DEMAND, V4_SLICE = "v5p-chain-spot-0", "v5p-chain-on-demand-0", "v4-chain-0"
STEPS, BATCH = 4, 16


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmulatedCluster]:
    specs = [
        SliceSpec(SPOT, "train", V5P, "spot", tier="spot"),
        SliceSpec(ON_DEMAND, "train", V5P, "on-demand", tier="on-demand"),
        SliceSpec(V4_SLICE, "train", V4, "on-demand", tier="on-demand"),
    ]
    with connected_emulator(plan_for(specs), "tpch-", "test-chain") as emu:
        yield emu


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("chain")
    data.write_synthetic(str(root / "data"), rows=2 * V5P.hosts * BATCH * STEPS, fmt="parquet", files=2)
    return root


def run_driver(cluster: EmulatedCluster, workdir: Path, run_name: str, **fields: Any) -> tuple[int, dict, str]:
    argv = train_argv(V5P, workdir, run_name, steps=STEPS, checkpoint_every=2, batch_size=BATCH, **fields)
    return drivers.run_driver(argv, cluster.address)


def kill_and_wait(cluster: EmulatedCluster, slice_name: str, worker: int) -> None:
    """A preemption: the host dies, and Ray's view of the slice loses it."""
    cluster.kill_host(slice_name, worker)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if all(len(v.hosts) < V5P.hosts for v in slices.slice_inventory() if v.name == slice_name):
            return
        time.sleep(0.5)
    pytest.fail(f"Ray still shows every host of {slice_name} 60 s after one died")


def test_two_v5p_slices_train_as_one_gang_with_megascale_env_per_worker(
    cluster: EmulatedCluster, workdir: Path
) -> None:
    code, result, output = run_driver(cluster, workdir, "multislice", slices=2, slice_deadline_s=60)
    assert code == 0, output[-4000:]
    placed = [p for p in result["placements"] if p["attempt"] == 1]
    assert len(placed) == 4
    by_slice = {name: sorted(p["tpu_worker_id"] for p in placed if p["slice"] == name) for name in (SPOT, ON_DEMAND)}
    assert by_slice == {SPOT: ["0", "1"], ON_DEMAND: ["0", "1"]}
    assert {p["jax_processes"] for p in placed} == {4}
    coordinators = {p["megascale"]["MEGASCALE_COORDINATOR_ADDRESS"] for p in placed}
    assert len(coordinators) == 1
    assert {p["megascale"]["MEGASCALE_NUM_SLICES"] for p in placed} == {"2"}
    # One slice id per slice, the same on each of its 2 workers.
    ids = {name: {p["megascale"]["MEGASCALE_SLICE_ID"] for p in placed if p["slice"] == name} for name in by_slice}
    assert sorted(v for s in ids.values() for v in s) == ["0", "1"]
    assert result["capacity"]["slices"] == [ON_DEMAND, SPOT]
    assert result["final_step"] == STEPS


def test_a_preempted_spot_slice_leaves_the_chain_on_the_on_demand_tier_of_the_shape(cluster: EmulatedCluster) -> None:
    kill_and_wait(cluster, SPOT, 1)
    choice = chain.walk(
        [V5P.shape_step, V4.shape_step],
        num_slices=1,
        deadline_s=10,
        inventory=slices.slice_inventory,
        demand=chain.WholeSliceDemand(),
    )
    assert (choice.index, choice.slices, choice.tier) == (0, (ON_DEMAND,), "on-demand")


def test_without_a_whole_v5p_slice_the_job_trains_on_the_v4_fallback_shape(
    cluster: EmulatedCluster, workdir: Path
) -> None:
    kill_and_wait(cluster, ON_DEMAND, 1)
    code, result, output = run_driver(
        cluster, workdir, "fallback", slice_deadline_s=5, fallback_shapes=V4.shape_step.to_flag()
    )
    assert code == 0, output[-4000:]
    capacity = result["capacity"]
    assert (capacity["step"], capacity["shape"], capacity["slices"], capacity["tier"]) == (
        2,
        "TPU-V4:2x2x2:2:4",
        [V4_SLICE],
        "on-demand",
    )
    assert [t["granted"] for t in capacity["tried"]] == [False, True]
    assert {(p["slice"], p["pod_type"]) for p in result["placements"]} == {(V4_SLICE, "v4-16")}
    assert result["final_step"] == STEPS and result["history_problems"] == []


def test_a_chain_with_no_whole_slice_fails_at_its_deadline_naming_every_step(
    cluster: EmulatedCluster, workdir: Path
) -> None:
    v4 = catalog.lookup("v4", "2x2x4")
    started = time.monotonic()
    code, result, _ = run_driver(
        cluster, workdir, "nothing", slice_deadline_s=3, fallback_shapes=v4.shape_step.to_flag()
    )
    assert code == 1
    assert time.monotonic() - started < 120
    error = result["error"]
    assert error.startswith("ChainExhaustedError: no step of the capacity chain gave 1 whole free slice(s) within 3 s")
    assert "step 1: TPU-V5P 2x2x2 (2 hosts x 4 chips): no whole free slice" in error
    assert f"{SPOT} (TPU-V5P, 2x2x2, spot, 1 host)" in error
    assert (
        "step 2: TPU-V4 2x2x4 (4 hosts x 4 chips): no whole free slice within 3.0 s; no slice of this shape came up"
        in (error)
    )


def test_a_serve_replica_without_room_on_the_primary_shape_runs_on_the_fallback_shape_and_says_so(
    cluster: EmulatedCluster, workdir: Path
) -> None:
    """Serve's step of the chain (docs/capacity.md): the checkpoint replica selects the pool's
    first shape and carries the later shapes as Ray's fallback_strategy. Every live v5p host is
    full (one actor holds all its CPUs), so Ray places the replica on the v4 slice; /healthz and
    `tpuray local status` both say where it runs."""
    import ray
    from ray import serve
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from ray_apps import serve as serve_app
    from tests.ray_fixtures import free_port
    from tpuray.local.emulator import status_data

    @ray.remote
    class Filler:
        def ready(self) -> bool:
            return True

    v5p_hosts = [n for n in ray.nodes() if n["Alive"] and (n.get("Labels") or {}).get(slices.GENERATION) == "v5p"]
    assert len(v5p_hosts) == 2  # two v5p slices, one host of each preempted by the tests above
    fillers = [
        Filler.options(
            num_cpus=host["Resources"]["CPU"],
            scheduling_strategy=NodeAffinitySchedulingStrategy(host["NodeID"], soft=False),
        ).remote()
        for host in v5p_hosts
    ]
    ray.get([f.ready.remote() for f in fillers], timeout=60)
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    app = serve_app.build_app(
        {
            "checkpoint_uri": str(workdir / "runs" / "fallback"),
            "checkpoint_wait_s": 0,
            "label_selector": {slices.SLICE_POOL: "train", slices.GENERATION: "v5p"},
            "fallback_label_selectors": [{slices.SLICE_POOL: "train", slices.GENERATION: "v4"}],
        }
    )
    serve.run(app, name="chain", route_prefix="/", blocking=False)
    deadline = time.monotonic() + 120
    health: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
                health = json.loads(resp.read())
                break
        except OSError:
            time.sleep(1)
    assert health.get("placement") == {"slice": V4_SLICE, "generation": "v4", "tier": "on-demand", "fallback": True}
    ray.shutdown()  # Serve's controller and replica are detached: they keep running
    status = status_data(cluster)
    holders = {(s["slice"], h["worker_id"]): h["holders"] for s in status["slices"] for h in s["hosts"] if h["holders"]}
    replicas = [where for where, names in holders.items() if "ServeReplica:chain:checkpoint-model" in names]
    assert [name for name, _ in replicas] == [V4_SLICE]
