"""A running emulated cluster: a Ray head plus one raylet per emulated TPU host on 127.0.0.1.

Each emulated TPU host is started with the environment GKE and the KubeRay TPU webhook give
a TPU pod (TPU_NAME, TPU_WORKER_ID, TPU_ACCELERATOR_TYPE, TPU_TOPOLOGY,
TPU_WORKER_HOSTNAMES) and the chip count as its TPU resource. Ray itself then derives the
ray.io/tpu-* labels and the TPU-<pod type>-head resource exactly as on GKE.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from tpuray import labels
from tpuray.local import storage_emulator
from tpuray.local.emulator.plan import (
    HEAD_OBJECT_STORE_BYTES,
    HOST_CPUS,
    HOST_OBJECT_STORE_BYTES,
    EmulatorError,
    Plan,
    SliceSpec,
    runtime_env_dir_name,
)
from tpuray.local.emulator.processes import (
    _environ,
    _free_port,
    _loopback_only,
    _marked,
    _records,
    _tree,
    kill_processes,
)
from tpuray.local.emulator.state import STATE_FILE, ClusterState, HostRecord, ProcessRecord, state_dir_for

# Environment every emulated node gets. RAY_AUTH_MODE is explicit: Ray 2.60 turns token
# auth on after any ray.init() that starts a local cluster, after which nodes without
# the token cannot join. RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 keeps addresses on loopback.
BASE_ENV = {
    "RAY_AUTH_MODE": "disabled",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "JAX_PLATFORMS": "cpu",
    "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo",
}
# With `delivery` (what `tpuray local up` starts): hosts import ray_apps only from the
# runtime_env working_dir, as from the ray-tpu image (tpuray/local/image_site/sitecustomize.py).
IMAGE_SITE = Path(__file__).resolve().parent.parent / "image_site"

ProgressFn = Callable[[str, int, int], None]  # (what just started, done, total)


def node_common_args(ray_dir: str) -> dict[str, Any]:
    """The add_node/RayParams arguments every emulated node shares (loopback, its temp dir)."""
    return {
        "node_ip_address": "127.0.0.1",
        "temp_dir": ray_dir,
        "min_worker_port": 0,
        "max_worker_port": 0,
        "dashboard_agent_listen_port": None,
    }


def host_node_args(spec: SliceSpec, worker: int, host_cpus: int, common: dict[str, Any]) -> dict[str, Any]:
    """The RayParams of one emulated TPU host, started with `spec.host_env(worker)` in the
    environment: the one definition of a host, whether the emulator starts it up front or
    brings a preempted slice back (tpuray/local/emulator/preemption.py)."""
    return {
        "num_cpus": host_cpus,
        "runtime_env_dir_name": runtime_env_dir_name(spec, worker),
        "resources": {"TPU": spec.shape.chips_per_host},
        "labels": {**spec.host_labels(), labels.EMULATOR_ROLE: "tpu-host"},
        "object_store_memory": HOST_OBJECT_STORE_BYTES,
        **common,
    }


class EmulatedCluster:
    """A running emulated cluster. Use `start` (new) or `attach` (from a state file)."""

    def __init__(self, state: ClusterState, cluster: Any = None):
        self.state = state
        self._cluster = cluster  # ray.cluster_utils.Cluster when started in this process
        self._nodes: dict[tuple[str, int], Any] = {}

    # -- properties
    @property
    def address(self) -> str:
        return self.state.address

    @property
    def slices(self) -> list[SliceSpec]:
        """The slices started up front (the plan's)."""
        return list(self.state.slices)

    @property
    def state_dir(self) -> Path:
        return Path(self.state.state_dir)

    @property
    def notes(self) -> list[str]:
        return list(self.state.notes)

    def slice(self, name: str) -> SliceSpec:
        for s in self.slices:
            if s.name == name:
                return s
        raise EmulatorError(f"no slice {name!r}; slices: {', '.join(s.name for s in self.slices)}")

    def pids(self) -> list[int]:
        """Every PID this cluster started that is still running (recorded trees plus children)."""
        recorded = [p for h in self.state.hosts for r in h.processes if (p := r.process()) is not None]
        recorded += [p for r in self.state.storage if (p := r.process()) is not None]
        return sorted({p.pid for p in _tree(recorded)} | {p.pid for p in _marked(self.state.ray_dir)})

    def is_alive(self) -> bool:
        head = next((h for h in self.state.hosts if not h.slice), None)
        return head is not None and any(r.process() is not None for r in head.processes if r.kind == "gcs_server")

    # -- lifecycle
    @classmethod
    def start(
        cls,
        plan: Plan,
        *,
        state_dir: str | Path | None = None,
        name: str | None = None,
        detach: bool = False,
        host_cpus: int = HOST_CPUS,
        dashboard: bool = False,
        progress: ProgressFn | None = None,
        delivery: bool = False,
    ) -> EmulatedCluster:
        """Start a head plus one raylet per emulated TPU host on 127.0.0.1.

        `plan` comes from `plan_slices` (a stack's rendered worker groups) or `plan_for`
        (explicit slices). With `detach=False` the nodes die with this process. With
        `delivery`, a GCS emulator starts first and the hosts fetch code the way GKE pods do:
        from the runtime_env working_dir only (see IMAGE_SITE). Every slice is started up front:
        scaling worker groups from zero is left to Ray's own autoscaler and KubeRay provider on
        the joint substrate (tests/substrate.py)."""
        name = name or "emulated"
        sdir = Path(state_dir) if state_dir is not None else state_dir_for(name)
        if (sdir / STATE_FILE).exists():
            old = cls.attach(sdir)
            if old.pids():
                raise EmulatorError(f"an emulated cluster is already running from {sdir}; stop it first")
            shutil.rmtree(sdir, ignore_errors=True)
        (sdir / "ray").mkdir(parents=True, exist_ok=True)
        state = ClusterState(
            name=name,
            state_dir=str(sdir),
            launcher_pid=os.getpid(),
            started_at=time.time(),
            slices=list(plan.slices),
            notes=list(plan.notes),
        )
        state.save()
        self = cls(state)
        try:
            if delivery:
                self._start_storage()
            self._start_nodes(plan, detach=detach, host_cpus=host_cpus, dashboard=dashboard, progress=progress)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_storage(self) -> None:
        proc, host = storage_emulator.start(self.state_dir / "gcs-emulator", _free_port())
        ps = psutil.Process(proc.pid)
        self.state.storage = [ProcessRecord(proc.pid, ps.create_time(), "gcs_emulator")]
        self.state.storage_host = host
        self.state.save()

    def _start_nodes(
        self,
        plan: Plan,
        *,
        detach: bool,
        host_cpus: int,
        dashboard: bool,
        progress: ProgressFn | None,
    ) -> None:
        _loopback_only()
        from ray.cluster_utils import Cluster

        state = self.state
        total = plan.hosts + 1
        gcs_port = _free_port()
        # Every node's processes get RAY_ADDRESS, as KubeRay sets it in every Ray container
        # (ray-operator/controllers/ray/common/pod.go, setContainerEnvVars). Ray's state API,
        # which Ray Train's controller and state actors call with no address, otherwise
        # looks for "the" local cluster and fails with "Found multiple active Ray instances"
        # when other clusters run on the same machine.
        base = {**BASE_ENV, "RAY_TMPDIR": state.state_dir, "RAY_ADDRESS": f"127.0.0.1:{gcs_port}"}
        if state.storage_host:
            base[storage_emulator.HOST_ENV] = state.storage_host
            base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(IMAGE_SITE), os.environ.get("PYTHONPATH")]))
        common = node_common_args(state.ray_dir)
        with _environ(base):
            # shutdown_at_exit=False turns off Ray's fate-sharing: the detached cluster must
            # outlive the launcher. In-process we want the opposite, so no stray raylets
            # survive a crashed test run.
            cluster = Cluster(initialize_head=False, shutdown_at_exit=not detach)
            self._cluster = cluster
            head = self._add_head(cluster, host_cpus, gcs_port, dashboard, common)

            state.address = head.address
            if dashboard:
                state.dashboard_url = "http://" + (head.webui_url or "").removeprefix("http://")
            state.hosts.append(HostRecord("", 0, head.unique_id, _records(head)))
            state.save()
            if progress:
                progress("head", 1, total)
            done = 1
            for spec in plan.slices:
                for worker in range(spec.shape.hosts):
                    with _environ(spec.host_env(worker)):
                        node = cluster.add_node(wait=False, **host_node_args(spec, worker, host_cpus, common))
                    self._nodes[(spec.name, worker)] = node
                    state.hosts.append(HostRecord(spec.name, worker, node.unique_id, _records(node)))
                    state.save()  # written per node, so `down` can clean up a half-started cluster
                    done += 1
                    if progress:
                        progress(f"{spec.name} worker {worker}", done, total)
            cluster.wait_for_nodes(timeout=120)
        state.ready = True
        state.save()

    @staticmethod
    def _add_head(cluster: Any, host_cpus: int, gcs_port: int, dashboard: bool, common: dict[str, Any]) -> Any:
        return cluster.add_node(
            num_cpus=host_cpus,
            gcs_server_port=gcs_port,
            runtime_env_dir_name=runtime_env_dir_name(None),
            include_dashboard=dashboard,
            dashboard_port=_free_port(),
            dashboard_host="127.0.0.1",
            object_store_memory=HEAD_OBJECT_STORE_BYTES,
            labels={labels.EMULATOR_ROLE: "head"},
            **common,
        )

    @classmethod
    def attach(cls, state_dir: str | Path) -> EmulatedCluster:
        return cls(ClusterState.load(state_dir))

    def kill_host(self, slice_name: str, worker_id: int) -> list[int]:
        """Kill one emulated TPU host (its raylet and workers), as a preemption would.

        Returns the PIDs killed. The rest of the slice keeps running, as on GKE before
        KubeRay recreates the group."""
        self.slice(slice_name)
        host = next((h for h in self.state.hosts if (h.slice, h.worker_id) == (slice_name, worker_id)), None)
        if host is None:
            raise EmulatorError(f"slice {slice_name!r} has no worker {worker_id}")
        procs = _tree([p for r in host.processes if (p := r.process()) is not None])
        node = self._nodes.pop((slice_name, worker_id), None)
        if node is not None and self._cluster is not None:
            # Keep Cluster's bookkeeping right; it kills the same processes.
            with contextlib.suppress(Exception):
                self._cluster.remove_node(node, allow_graceful=False)
        kill_processes(procs, grace_s=2.0)
        self.state.hosts.remove(host)
        self.state.save()
        return [p.pid for p in procs]

    def stop(self, remove_dir: bool = True) -> list[int]:
        """Kill this cluster's processes (and only these). Returns PIDs that survived."""
        self._disconnect_driver()
        if self._cluster is not None:
            # What ray.cluster_utils.Cluster.shutdown does besides killing the nodes ("need to
            # reset internal kv since gcs is down"): drop this process's GCS clients for the
            # cluster while its GCS still answers, so none is left reconnecting to a dead one.
            import ray.experimental.internal_kv

            self._cluster.global_state.disconnect()
            ray.experimental.internal_kv._internal_kv_reset()
        recorded = [p for h in self.state.hosts for r in h.processes if (p := r.process()) is not None]
        recorded += [p for r in self.state.storage if (p := r.process()) is not None]  # last: after the hosts
        # Hosts first, head last: raylets that lose the GCS first spend seconds retrying.
        leftover = kill_processes(_tree(recorded) + _marked(self.state.ray_dir))
        leftover += kill_processes(_marked(self.state.ray_dir))
        if self._cluster is not None:
            # The processes are gone; drop Cluster's references so its exit hook has nothing to do.
            self._cluster.worker_nodes.clear()
            self._cluster.head_node = None
            self._nodes.clear()
        if remove_dir and not leftover:
            shutil.rmtree(self.state.state_dir, ignore_errors=True)
        return sorted(set(leftover))

    def _disconnect_driver(self) -> None:
        """If this process is a Ray driver of this cluster, disconnect it before the GCS goes.

        A driver's core worker keeps RPCs open to the GCS (pubsub long polls, task events); once
        the GCS is gone it retries for gcs_rpc_server_reconnect_timeout_s (60 s) and then ends
        the whole process with std::_Exit ("Failed to connect to GCS within 60 seconds ... The
        program will terminate.", rpc_client.h in Ray's C++ core). Measured here: a call through
        a client left on a stopped cluster ended its process with exit code 1, nothing raised."""
        ray = sys.modules.get("ray")  # not imported: this process never connected
        if ray is None or not ray.is_initialized():
            return
        with contextlib.suppress(Exception):
            if ray.get_runtime_context().gcs_address != self.state.address:
                return  # a driver of another cluster: not ours to end
        ray.shutdown()

    def __enter__(self) -> EmulatedCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- inspection
    def connect(self, **kwargs: Any) -> Any:
        """ray.init() this process against the cluster (auth mode matching the nodes)."""
        import ray

        os.environ["RAY_AUTH_MODE"] = BASE_ENV["RAY_AUTH_MODE"]
        _loopback_only()
        kwargs.setdefault("logging_level", "ERROR")
        kwargs.setdefault("log_to_driver", False)
        return ray.init(address=self.address, **kwargs)
