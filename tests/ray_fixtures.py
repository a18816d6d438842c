"""Shared fixtures for the ray_apps tests: a private local Ray cluster on 127.0.0.1.

Rules it follows (other work runs on the same machine): loopback only, RAY_AUTH_MODE set
explicitly (Ray 2.60 would enable token auth and write ~/.ray/auth_token), a temp dir of its
own (RAY_TMPDIR / temp_dir), and a finalizer that stops only the processes this cluster
started, even when a test fails. Never `ray stop`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from ray_apps.runtime import use_loopback_only
from tpuray.local.emulator import EmulatedCluster, Plan


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LocalRay:
    address: str
    temp_dir: str
    http_port: int


@pytest.fixture(scope="module")
def local_ray() -> Iterator[LocalRay]:
    saved = {
        k: os.environ.get(k)
        for k in ("RAY_AUTH_MODE", "RAY_TMPDIR", "RAY_ADDRESS", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    }
    os.environ["RAY_AUTH_MODE"] = "disabled"
    use_loopback_only()
    # Short path under /tmp: Ray's unix sockets live below it (107-byte limit).
    temp_dir = tempfile.mkdtemp(prefix="tpr-", dir="/tmp")
    os.environ["RAY_TMPDIR"] = temp_dir
    # Cluster writes <RAY_TMPDIR>/ray/ray_current_cluster and expects the folder to exist.
    os.makedirs(os.path.join(temp_dir, "ray"), exist_ok=True)
    port = free_port()
    # Known before start and inherited by every Ray process: Ray Train's helper actors look
    # the cluster up by RAY_ADDRESS, and would otherwise find other people's clusters too.
    os.environ["RAY_ADDRESS"] = f"127.0.0.1:{port}"

    import ray
    from ray.cluster_utils import Cluster

    cluster = None
    try:
        cluster = Cluster(
            initialize_head=True,
            connect=True,
            head_node_args={
                "num_cpus": 6,  # logical: Train workers + Ray Data tasks + Serve on 2 cores
                "gcs_server_port": port,
                "node_ip_address": "127.0.0.1",
                "include_dashboard": False,
                "temp_dir": os.path.join(temp_dir, "ray"),
                "object_store_memory": 300 * 1024 * 1024,
            },
        )
        yield LocalRay(address=cluster.address, temp_dir=temp_dir, http_port=free_port())
    finally:
        if ray.is_initialized():  # serve.shutdown() would otherwise auto-start a connection
            from ray import serve

            try:
                serve.shutdown()
            finally:
                ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(temp_dir, ignore_errors=True)


@contextlib.contextmanager
def connected_emulator(plan: Plan, prefix: str, name: str) -> Iterator[EmulatedCluster]:
    """An in-process emulated cluster for one test module: started from `plan`, this process
    connected to it; on exit Serve (if a test started it) and the connection are shut down,
    every process the cluster started is stopped, and none of them is left."""
    import psutil
    import ray

    state_dir = tempfile.mkdtemp(prefix=prefix, dir="/tmp")  # short: Ray puts sockets under it
    emu = EmulatedCluster.start(plan, state_dir=state_dir, name=name)
    pids = emu.pids()
    try:
        emu.connect()
        yield emu
    finally:
        if ray.is_initialized():
            from ray import serve

            try:
                serve.shutdown()
            finally:
                ray.shutdown()
        pids = sorted(set(pids) | set(emu.pids()))
        assert emu.stop() == []
        assert [p for p in pids if psutil.pid_exists(p)] == []
