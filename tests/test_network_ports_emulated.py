"""The ports emulated TPU hosts are seen listening on are admitted between the pods of their object.

One emulated slice of dev's training pool (v6e 4x4: 4 hosts, each a real raylet on 127.0.0.1
with the environment GKE and the TPU webhook give a TPU pod) plus the head, running a JaxTrainer
with use_tpu=True (JAX on CPU, gloo): jax.distributed comes up across the 4 hosts, its
coordinator on a port rank 0's host picks, as on GKE. While the job holds, the listening TCP
sockets of every process each host started (raylet, agents, Train workers; psutil, by the PIDs
the cluster recorded) are read, and each is checked against the rendered NetworkPolicies for
every peer that may dial it: the other pods of the same Ray object (tests/netpol.py evaluates
Kubernetes' rules). The ports are not this project's table: Ray, JAX and gloo chose them.

The emulator's ports are not the pinned ones of the rendered pods (hosts share one address, so
Ray picks them); what this shows is that no port the runtime opens is blocked between peers.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import mocked
from tests.netpol import Pod, admits
from tests.ray_fixtures import connected_emulator
from tpuray import catalog
from tpuray.local.emulator import EmulatedCluster, SliceSpec, plan_for
from tpuray.local.emulator.processes import _tree
from tpuray.preview.render import manifests

pytestmark = pytest.mark.slow

OBJECT = "tpuray-dev-train"  # dev's RayJob: its worker group train-v6e-16 is one v6e 4x4 slice per replica
GROUP = "train-v6e-16"
SHAPE = catalog.lookup("v6e", "4x4")
HOLD_S = 90.0


def train_loop(config: dict[str, Any]) -> None:
    """Each Train worker: report jax.distributed's view, then hold until the test has looked."""
    import jax
    import ray.train
    from jax._src import distributed

    rank = ray.train.get_context().get_world_rank()
    marker = Path(config["dir"]) / f"rank-{rank}.json"
    marker.write_text(
        json.dumps(
            {
                "processes": jax.process_count(),
                "coordinator": distributed.global_state.coordinator_address,
                "worker_id": os.environ.get("TPU_WORKER_ID"),
            }
        )
    )
    release = Path(config["dir"]) / "release"
    deadline = time.monotonic() + HOLD_S
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmulatedCluster]:
    with connected_emulator(
        plan_for([SliceSpec(f"{GROUP}-0", "v6e-dev", SHAPE, "spot")]), "tprn-", "test-ports"
    ) as emu:
        yield emu


def listening_ports(host_processes: list[psutil.Process]) -> set[int]:
    ports = set()
    for proc in _tree(host_processes):
        try:
            conns = proc.net_connections(kind="tcp")
        except psutil.Error:
            continue  # ended while we looked
        ports |= {c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN}
    return ports


@pytest.fixture(scope="module")
def observed(cluster: EmulatedCluster) -> Iterator[dict[str, Any]]:
    """While a 4-host JaxTrainer holds: {"ranks": [...], "hosts": {(slice, worker): ports}}."""
    import sys

    from ray import cloudpickle
    from ray.train import RunConfig, ScalingConfig
    from ray.train.v2.jax import JaxTrainer

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/
    work = Path(tempfile.mkdtemp(prefix="tprn-job-", dir="/tmp"))
    trainer = JaxTrainer(
        train_loop,
        train_loop_config={"dir": str(work)},
        scaling_config=ScalingConfig(
            num_workers=SHAPE.hosts,
            use_tpu=True,
            topology=SHAPE.topology,
            accelerator_type="TPU-V6E",
            resources_per_worker={"TPU": SHAPE.chips_per_host},
        ),
        run_config=RunConfig(
            storage_path=str(work / "results"),
            worker_runtime_env={"env_vars": {"JAX_PLATFORMS": "cpu", "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo"}},
        ),
    )
    outcome: dict[str, Any] = {}
    fit = threading.Thread(target=lambda: outcome.update(result=trainer.fit()), daemon=True)
    fit.start()
    markers = [work / f"rank-{r}.json" for r in range(SHAPE.hosts)]
    deadline = time.monotonic() + HOLD_S
    while not all(m.exists() for m in markers) and time.monotonic() < deadline and fit.is_alive():
        time.sleep(0.2)
    try:
        assert all(m.exists() for m in markers), f"the Train workers did not come up: {outcome}"
        hosts = {}
        for host in cluster.state.hosts:
            procs = [p for r in host.processes if (p := r.process()) is not None]
            hosts[(host.slice, host.worker_id)] = listening_ports(procs)
        yield {"ranks": [json.loads(m.read_text()) for m in markers], "hosts": hosts}
    finally:
        (work / "release").touch()
        fit.join(timeout=60)
        shutil.rmtree(work, ignore_errors=True)


def object_pods() -> tuple[list[dict[str, Any]], dict[str, Pod]]:
    objects = manifests(mocked("dev"))
    job = next(m for m in objects if m["kind"] == "RayJob" and m["metadata"]["name"] == OBJECT)
    spec = job["spec"]["rayClusterSpec"]
    pods = {"head": Pod(spec["headGroupSpec"]["template"]["metadata"]["labels"])}
    pods |= {g["groupName"]: Pod(g["template"]["metadata"]["labels"]) for g in spec["workerGroupSpecs"]}
    return [m for m in objects if m["kind"] == "NetworkPolicy"], pods


def test_jax_distributed_came_up_across_the_four_hosts_of_the_emulated_slice(observed: dict[str, Any]) -> None:
    assert [r["processes"] for r in observed["ranks"]] == [4, 4, 4, 4]
    assert sorted(r["worker_id"] for r in observed["ranks"]) == ["0", "1", "2", "3"]


def test_the_jax_coordinator_listens_on_a_tpu_host_of_the_slice(observed: dict[str, Any]) -> None:
    (coordinator,) = {r["coordinator"] for r in observed["ranks"]}
    port = int(coordinator.rsplit(":", 1)[1])
    assert any(port in ports for (slice_name, _), ports in observed["hosts"].items() if slice_name)


def test_every_port_an_emulated_host_listens_on_is_admitted_from_every_peer_of_its_object(
    observed: dict[str, Any],
) -> None:
    policies, pods = object_pods()
    blocked = []
    for (slice_name, worker), ports in sorted(observed["hosts"].items()):
        target = pods[GROUP] if slice_name else pods["head"]
        where = f"{slice_name}/{worker}" if slice_name else "head"
        for port in sorted(ports):
            blocked += [
                f"{where}:{port} from {peer}"
                for peer, source in pods.items()
                if not admits(policies, source, target, port)
            ]
    assert sum(len(p) for p in observed["hosts"].values()) > 4 * len(observed["hosts"])  # the job's sockets were seen
    assert blocked == []
