"""The local TPU-slice emulator: planning (fast) and `tpuray local up/status/down` end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.conftest import mocked
from tpuray import catalog
from tpuray.local import emulator

REPO = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------- plan


def test_plan_emulates_each_shape_group_on_every_tier_gke_may_walk_for_it() -> None:
    plan = emulator.plan_slices(mocked("dev"), max_hosts=100)
    assert plan.notes == ()
    # dev: one group per shape; its ComputeClass walks spot, then on-demand: a replica on each.
    assert [(s.name, s.shape.topology, s.shape.hosts, s.market_type, s.tier, s.reduced_from) for s in plan.slices] == [
        ("train-v6e-16-0", "4x4", 4, "spot", "spot", None),
        ("train-v6e-16-1", "4x4", 4, "on-demand", "on-demand", None),
        ("serve-v6e-4-0", "2x2", 1, "spot", "spot", None),
        ("serve-v6e-4-1", "2x2", 1, "on-demand", "on-demand", None),
    ]


def test_plan_reads_the_tiers_of_a_groups_shape_from_its_compute_class() -> None:
    # prod's training class: v6e 4x4 reservation, spot, on-demand, then v5e 4x4 on-demand.
    groups = {g.name: [t.key for t in g.tiers] for g in emulator.emulated_groups(mocked("prod"))}
    assert groups["train-v6e-16"] == ["reservation", "spot", "on-demand"]
    assert groups["train-v5litepod-16"] == ["on-demand"]


def test_host_env_is_what_the_webhook_injects() -> None:
    spec = emulator.SliceSpec("v6e-dev-0", "v6e-dev", catalog.lookup("v6e", "4x4"), "spot")
    env = spec.host_env(2)
    assert env["TPU_NAME"] == "v6e-dev-0"
    assert env["TPU_WORKER_ID"] == "2"
    assert env["TPU_ACCELERATOR_TYPE"] == "v6e-16"
    assert env["TPU_TOPOLOGY"] == "4x4"
    assert env["TPU_WORKER_HOSTNAMES"].split(",") == [f"v6e-dev-0-{w}" for w in range(4)]
    # As KubeRay sets them: the node type from the pod's ray.io/group, and no market type.
    assert env["RAY_NODE_TYPE_NAME"] == "v6e-dev"
    assert "RAY_NODE_MARKET_TYPE" not in env
    single = emulator.SliceSpec("s-0", "s", catalog.lookup("v6e", "2x2"), "on-demand")
    assert "TPU_WORKER_HOSTNAMES" not in single.host_env(0)


def test_a_reduced_v6e_4x4_slice_becomes_the_one_vm_2x4_not_the_2_host_2x4_ray_reads_as_one_vm() -> None:
    tiny = emulator.plan_slices(mocked("dev"), max_hosts=4)
    reduced = {
        (s.reduced_from, s.shape.topology, s.shape.machine_type, s.shape.hosts) for s in tiny.slices if s.reduced_from
    }
    assert reduced == {("4x4", "2x4", "ct6e-standard-8t", 1)}


def test_plan_reduces_slices_then_topology() -> None:
    prod = mocked("prod")
    full = emulator.plan_slices(prod, max_hosts=100)
    plan = emulator.plan_slices(prod, max_hosts=full.hosts - 1)
    assert plan.hosts <= full.hosts - 1
    assert plan.notes and all("to fit --max-hosts" in n for n in plan.notes)
    # Fewer slices first: every pool keeps its full topology while slices can still go.
    assert {s.shape.topology for s in plan.slices} == {s.shape.topology for s in full.slices}

    tiny = emulator.plan_slices(mocked("dev"), max_hosts=4)
    assert tiny.hosts <= 4
    reduced = [s for s in tiny.slices if s.reduced_from]
    assert reduced
    for spec in reduced:
        # A smaller shape of the same generation, straight from the catalog.
        assert spec.shape in catalog.all_shapes()
        assert catalog.lookup(spec.shape.generation, spec.reduced_from).hosts > spec.shape.hosts


def test_plan_too_small_is_a_clear_error() -> None:
    with pytest.raises(emulator.EmulatorError, match="too small: the stack has 2 TPU worker groups"):
        emulator.plan_slices(mocked("dev"), max_hosts=1)


def test_plan_without_fallbacks_emulates_only_the_slices_each_group_starts_with() -> None:
    plan = emulator.plan_slices(mocked("dev"), max_hosts=100, start_only=True)
    # dev: train on v6e 4x4 and serve on v6e 2x2, one replica each, on the first tier (spot).
    assert [(s.name, s.shape.topology, s.shape.hosts, s.market_type) for s in plan.slices] == [
        ("train-v6e-16-0", "4x4", 4, "spot"),
        ("serve-v6e-4-0", "2x2", 1, "spot"),
    ]
    assert plan.hosts == 5 and plan.notes == ()


def test_emulated_hosts_unpack_runtime_envs_in_folders_of_their_own() -> None:
    # One folder per host, as one disk per GKE pod: a shared folder let one host's re-unpack
    # of a working_dir delete it under another host's starting worker.
    assert emulator.RUNTIME_ENV_DIR == "runtime_resources"
    assert emulator.runtime_env_dir_name(None) == "runtime_resources/head"
    spec = emulator.SliceSpec("train-v6e-16-0", "v6e-dev", catalog.lookup("v6e", "4x4"), "spot")
    assert [emulator.runtime_env_dir_name(spec, w) for w in range(2)] == [
        "runtime_resources/train-v6e-16-0-0",
        "runtime_resources/train-v6e-16-0-1",
    ]


def test_default_max_hosts_is_positive() -> None:
    assert emulator.default_max_hosts() >= 1


# ---------------------------------------------------------------------------- CLI end to end


def _tpuray(*args: str, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    # The console script; `python -m tpuray.cli` would make UserError a different class.
    cmd = [sys.executable, "-c", "import sys; from tpuray.cli import main; sys.exit(main())", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=timeout)


@pytest.fixture
def local_env() -> Iterator[dict[str, str]]:
    root = tempfile.mkdtemp(prefix="tpre-", dir="/tmp")
    env = {**os.environ, emulator.LOCAL_DIR_ENV: root, "COLUMNS": "200"}
    yield env
    # Finalizer: whatever a failing test left running in this root is killed by PID.
    for state in Path(root).glob(f"*/{emulator.STATE_FILE}"):
        emulator.EmulatedCluster.attach(state.parent).stop()
    assert not any(root in " ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"]))
    subprocess.run(["rm", "-rf", root], check=False)


@pytest.mark.slow
def test_local_up_status_down_leaves_no_process(local_env: dict[str, str]) -> None:
    up = _tpuray("local", "up", "dev", "--max-hosts", "4", env=local_env)
    assert up.returncode == 0, up.stderr + up.stdout
    assert "reduced:" in up.stdout and "ready" in up.stdout
    state_dir = Path(local_env[emulator.LOCAL_DIR_ENV]) / "dev"
    cluster = emulator.EmulatedCluster.attach(state_dir)
    assert cluster.address.startswith("127.0.0.1:")
    pids = cluster.pids()
    assert pids and all(psutil.pid_exists(p) for p in pids)
    assert not psutil.pid_exists(cluster.state.launcher_pid)  # the launcher exits; the nodes outlive it

    again = _tpuray("local", "up", "dev", "--max-hosts", "4", env=local_env)
    assert again.returncode == 2 and "already running" in again.stderr

    status = _tpuray("local", "status", "dev", "--json", env=local_env)
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert [s["slice"] for s in data["slices"]] == [s.name for s in cluster.slices]
    assert all(h["alive"] and h["tpu_free"] == h["tpu_total"] for s in data["slices"] for h in s["hosts"])
    table = _tpuray("local", "status", env=local_env)
    assert table.returncode == 0 and "train-v6e-16-0" in table.stdout

    # A preempted host: its processes go, the rest of the cluster stays.
    first = cluster.slices[0]
    killed = cluster.kill_host(first.name, first.shape.hosts - 1)
    assert killed and not any(psutil.pid_exists(p) for p in killed)
    assert cluster.is_alive()

    down = _tpuray("local", "down", "dev", env=local_env)
    assert down.returncode == 0, down.stderr
    assert not [p for p in pids if psutil.pid_exists(p)]
    assert not state_dir.exists()
    gone = _tpuray("local", "status", env=local_env)
    assert gone.returncode == 2 and "no emulated cluster" in gone.stderr


@pytest.mark.slow
def test_stopping_the_cluster_this_process_drives_disconnects_the_driver_first() -> None:
    """A driver left connected would retry the dead GCS for 60 s and then end this process
    (Ray's std::_Exit): under pytest-xdist, a worker lost mid-suite with no message."""
    import ray

    state_dir = tempfile.mkdtemp(prefix="tpdd-", dir="/tmp")
    cluster = emulator.EmulatedCluster.start(emulator.Plan((), 0), state_dir=state_dir, name="test-driver")
    try:
        cluster.connect()
        assert ray.is_initialized()
    finally:
        assert cluster.stop() == []
    assert not ray.is_initialized()
