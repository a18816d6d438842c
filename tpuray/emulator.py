"""A local, real Ray cluster that looks like the stack's GKE TPU slices.

Each emulated TPU host is one raylet on 127.0.0.1 started with the environment GKE and
the KubeRay TPU webhook give a TPU pod (TPU_NAME, TPU_WORKER_ID, TPU_ACCELERATOR_TYPE,
TPU_TOPOLOGY, TPU_WORKER_HOSTNAMES) and the chip count as its TPU resource. Ray itself
then derives the ray.io/tpu-* labels and the TPU-<pod type>-head resource exactly as on
GKE, so the scheduling code under test is not told anything a real cluster would not say.

Two ways to run it:
- in-process (`EmulatedCluster.start(..., detach=False)`, tests): the raylets share the
  fate of this process through Ray's kernel fate-sharing, so a crashed test leaves
  nothing behind;
- detached (`tpuray local up`): a launcher process in its own session starts the nodes
  without fate-sharing, records every PID in a state file and exits; `tpuray local down`
  kills exactly those process trees. Never `ray stop` or pkill: other Ray clusters may run
  on the same machine.

Shapes come from tpuray.catalog only (via the stack config's `.shape`).

Length (about 800 lines, over the ~400 rule): plan, state, processes, cluster and launcher are
still one module; issue #14 item 5 splits them into a package.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil

from tpuray import catalog, errors, labels, storage_emulator
from tpuray.mockrun import StackRun

STATE_FILE = "state.json"
LOCAL_DIR_ENV = "TPURAY_LOCAL_DIR"
DEFAULT_ROOT = Path("/tmp/tpuray-local")
HOST_MEMORY_BYTES = 300 * 2**20  # measured: 250-340 MB per idle emulated host
HEAD_MEMORY_BYTES = 800 * 2**20  # GCS, head raylet, monitor, a driver
HOST_OBJECT_STORE_BYTES = 100 * 2**20
HEAD_OBJECT_STORE_BYTES = 200 * 2**20
HOST_CPUS = 2  # logical: room for one Train worker plus a Data task per host

# Ray's runtime_env agent of each node downloads and unpacks working_dirs under
# <session>/<runtime_env_dir_name>, and re-creates an existing one (rmtree, then unzip:
# working_dir.py create(..., overwrite=True)) the first time its node needs it. On GKE
# every host is a pod with its own filesystem. Here every node shares the session folder,
# so with Ray's one default name a host re-unpacking the bundle deleted the folder under
# another host's starting worker ("cd .../working_dir_files/gs_...: No such file").
# Each emulated host gets its own folder, as each pod has its own disk.
RUNTIME_ENV_DIR = "runtime_resources"

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
# runtime_env working_dir, as from the ray-tpu image (tpuray/image_site/sitecustomize.py).
IMAGE_SITE = Path(__file__).resolve().parent / "image_site"


EmulatorError = errors.EmulatorError  # the emulated cluster cannot be planned, started or found


# ---------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class SliceSpec:
    """One emulated slice: what GKE would create for one replica of a TPU worker group."""

    name: str  # TPU_NAME: <worker group>-<replica index>, as the webhook sets it
    pool: str
    generation: str
    topology: str
    hosts: int
    chips_per_host: int
    pod_type: str
    ray_accelerator_type: str
    market_type: str  # ray.io/market-type of the worker group (its capacity tier)
    reduced_from: str | None = None  # "4x4" when emulated at a smaller topology
    tier: str = ""  # tpuray.dev/capacity-tier of the worker group

    @classmethod
    def from_shape(
        cls,
        name: str,
        pool: str,
        shape: catalog.SliceShape,
        market_type: str,
        reduced_from: str | None = None,
        tier: str = "",
    ) -> SliceSpec:
        return cls(
            name=name,
            pool=pool,
            generation=shape.generation,
            topology=shape.topology,
            hosts=shape.hosts,
            chips_per_host=shape.chips_per_host,
            pod_type=shape.pod_type,
            ray_accelerator_type=shape.ray_accelerator_type,
            market_type=market_type,
            reduced_from=reduced_from,
            tier=tier,
        )

    @property
    def head_resource(self) -> str:
        return f"TPU-{self.pod_type}-head"

    @property
    def chips(self) -> int:
        return self.hosts * self.chips_per_host

    def hostnames(self) -> list[str]:
        # The webhook names pods <group>-<replica>-<worker id>; the list is what
        # TPU_WORKER_HOSTNAMES carries on every host of a multi-host slice.
        return [f"{self.name}-{w}" for w in range(self.hosts)]

    def host_env(self, worker_id: int) -> dict[str, str]:
        env = {
            "TPU_NAME": self.name,
            "TPU_WORKER_ID": str(worker_id),
            "TPU_ACCELERATOR_TYPE": self.pod_type,
            "TPU_TOPOLOGY": self.topology,
            # KubeRay passes these from the pod spec; Ray turns them into ray.io/market-type
            # and ray.io/node-group.
            "RAY_NODE_MARKET_TYPE": self.market_type,
            "RAY_NODE_TYPE_NAME": self.pool,
        }
        if self.hosts > 1:
            env["TPU_WORKER_HOSTNAMES"] = ",".join(self.hostnames())
        return env

    def host_labels(self) -> dict[str, str]:
        """The worker group's own Ray labels (market type arrives through RAY_NODE_MARKET_TYPE)."""
        found = {labels.GENERATION: self.generation, labels.SLICE_POOL: self.pool}
        if self.tier:
            found[labels.CAPACITY_TIER] = self.tier
        return found


@dataclass(frozen=True)
class Plan:
    slices: tuple[SliceSpec, ...]
    max_hosts: int
    notes: tuple[str, ...] = ()

    @property
    def hosts(self) -> int:
        return sum(s.hosts for s in self.slices)


def default_max_hosts() -> int:
    return max_hosts_for(psutil.virtual_memory().available)


def max_hosts_for(available_bytes: int) -> int:
    """Hosts that fit in half the available memory (the rest stays for the workloads)."""
    budget = available_bytes // 2 - HEAD_MEMORY_BYTES
    return max(int(budget // HOST_MEMORY_BYTES), 1)


def _smaller_shape(shape: catalog.SliceShape) -> catalog.SliceShape | None:
    """The same generation's shape with the most hosts below this one's (catalog order)."""
    smaller = [s for s in catalog.all_shapes() if s.generation == shape.generation and s.hosts < shape.hosts]
    if not smaller:
        return None
    return max(smaller, key=lambda s: (s.hosts, s.chips))  # max keeps the first of equals


@dataclass(frozen=True)
class TpuGroup:
    """One TPU worker group of a rendered KubeRay object: what GKE would run for it."""

    name: str  # groupName; TPU_NAME of its replicas is <name>-<replica index>
    pool: str
    shape: catalog.SliceShape
    max_slices: int  # maxReplicas: fallback groups start empty but may be scaled up
    market_type: str
    tier: str
    start_slices: int = 1  # replicas: the slices KubeRay creates at start (0 for a fallback tier)


def tpu_groups(run: StackRun) -> list[TpuGroup]:
    """The TPU worker groups of every RayJob, RayService and RayCluster the stack renders."""
    groups = []
    for resource in run.kubernetes_objects():
        manifest = resource.manifest()
        if manifest.get("kind") not in labels.RAY_KINDS:
            continue
        for group in labels.ray_cluster_spec(manifest).get("workerGroupSpecs", []):
            pod = group["template"]["spec"]
            selector = pod.get("nodeSelector", {})
            chips = pod["containers"][0]["resources"]["limits"].get(labels.TPU_RESOURCE)
            if chips is None:
                continue
            shape = catalog.by_gke_labels(
                selector[labels.GKE_TPU_ACCELERATOR], selector[labels.GKE_TPU_TOPOLOGY], int(chips)
            )
            group_labels = group.get("labels", {})
            groups.append(
                TpuGroup(
                    name=group["groupName"],
                    pool=group_labels.get(labels.SLICE_POOL, group["groupName"]),
                    shape=shape,
                    max_slices=int(group.get("maxReplicas", group.get("replicas", 1))),
                    market_type=group_labels.get(labels.MARKET_TYPE, "on-demand"),
                    tier=group_labels.get(labels.CAPACITY_TIER, ""),
                    start_slices=int(group.get("replicas", 1)),
                )
            )
    return groups


def plan_slices(run: StackRun, max_hosts: int | None = None, start_only: bool = False) -> Plan:
    """The slices to emulate for a stack's rendered worker groups, reduced to fit `max_hosts`.

    Every group gets its maxReplicas slices, so fallback tiers exist to fall back to.
    With `start_only`, every group gets its `replicas` instead: the slices KubeRay creates
    when the object is applied, without the fallback tiers (replicas 0) that only a
    fallback would scale up. That is what a run that needs no fallback uses (`tpuray demo`).
    Reduction order keeps what matters for scheduling as long as possible: first fewer
    slices per group (down to one), then a smaller topology of the same generation
    (preferring one that is still multi-host). Every group keeps at least one slice."""
    groups = tpu_groups(run)
    if start_only:
        groups = [replace(g, max_slices=g.start_slices) for g in groups if g.start_slices > 0]
    if not groups:
        what = "no TPU worker group that starts with a slice (replicas > 0)" if start_only else "no TPU worker group"
        raise EmulatorError(f"stack {run.stack!r} renders {what}: nothing to emulate")
    limit = default_max_hosts() if max_hosts is None else max_hosts
    if limit < len(groups):
        raise EmulatorError(
            f"--max-hosts {limit} is too small: the stack has {len(groups)} TPU worker groups "
            "and each needs at least one emulated host"
        )
    state = {g.name: [g.shape, g.max_slices] for g in groups}

    def total() -> int:
        return sum(shape.hosts * n for shape, n in state.values())

    while total() > limit:
        multi = [name for name, (_, n) in state.items() if n > 1]
        if multi:
            name = max(multi, key=lambda k: state[k][0].hosts * state[k][1])
            state[name][1] -= 1
            continue
        shrinkable = [name for name, (shape, _) in state.items() if _smaller_shape(shape) is not None]
        if not shrinkable:
            raise EmulatorError(f"cannot fit the stack into {limit} hosts")
        name = max(shrinkable, key=lambda k: state[k][0].hosts)
        state[name][0] = _smaller_shape(state[name][0])
    notes = []
    slices: list[SliceSpec] = []
    for group in groups:
        shape, n = state[group.name]
        full = group.shape
        if (shape, n) != (full, group.max_slices):
            notes.append(
                f"{group.name}: {group.max_slices} x {full.generation} {full.topology} "
                f"({_hosts(group.max_slices * full.hosts)}) emulated as {n} x {shape.topology} "
                f"({_hosts(n * shape.hosts)} of {shape.chips_per_host} chips) to fit --max-hosts {limit}"
            )
        reduced = full.topology if shape.topology != full.topology or shape.hosts != full.hosts else None
        slices += [
            SliceSpec.from_shape(f"{group.name}-{i}", group.pool, shape, group.market_type, reduced, group.tier)
            for i in range(n)
        ]
    return Plan(tuple(slices), limit, tuple(notes))


def _hosts(n: int) -> str:
    return f"{n} host" + ("" if n == 1 else "s")


def runtime_env_dir_name(spec: SliceSpec | None, worker: int = 0) -> str:
    """The node's runtime_env folder under Ray's session folder (RUNTIME_ENV_DIR/<host>)."""
    return f"{RUNTIME_ENV_DIR}/{'head' if spec is None else f'{spec.name}-{worker}'}"


def plan_for(slices: Sequence[SliceSpec]) -> Plan:
    return Plan(tuple(slices), sum(s.hosts for s in slices))


# ---------------------------------------------------------------------------- state


@dataclass
class ProcessRecord:
    pid: int
    create_time: float  # guards against a recycled PID being killed later
    kind: str

    def process(self) -> psutil.Process | None:
        try:
            proc = psutil.Process(self.pid)
            if abs(proc.create_time() - self.create_time) > 0.01:
                return None
            return proc
        except psutil.Error:
            return None


@dataclass
class HostRecord:
    slice: str  # "" for the head
    worker_id: int
    node_id: str
    processes: list[ProcessRecord] = field(default_factory=list)


@dataclass
class ClusterState:
    name: str
    state_dir: str
    address: str = ""
    dashboard_url: str = ""  # http://127.0.0.1:<port>: Jobs API and Serve REST API
    launcher_pid: int = 0
    started_at: float = 0.0
    ready: bool = False
    slices: list[SliceSpec] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    hosts: list[HostRecord] = field(default_factory=list)
    storage_host: str = ""  # http://127.0.0.1:<port>: the GCS emulator (STORAGE_EMULATOR_HOST)
    storage: list[ProcessRecord] = field(default_factory=list)

    @property
    def ray_dir(self) -> str:
        return os.path.join(self.state_dir, "ray")

    def save(self) -> None:
        path = Path(self.state_dir) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(path)  # atomic: `status` never reads half a file

    @classmethod
    def load(cls, state_dir: str | Path) -> ClusterState:
        path = Path(state_dir) / STATE_FILE
        if not path.is_file():
            raise EmulatorError(f"no emulated cluster at {state_dir} ({STATE_FILE} missing)")
        raw = json.loads(path.read_text())
        raw["slices"] = [SliceSpec(**s) for s in raw["slices"]]
        raw["storage"] = [ProcessRecord(**p) for p in raw.get("storage", [])]
        raw["hosts"] = [
            HostRecord(**{**h, "processes": [ProcessRecord(**p) for p in h["processes"]]}) for h in raw["hosts"]
        ]
        return cls(**raw)


def local_root() -> Path:
    """Where every emulated cluster keeps its state folder ($TPURAY_LOCAL_DIR)."""
    return Path(os.environ.get(LOCAL_DIR_ENV, DEFAULT_ROOT))


def state_dir_for(name: str) -> Path:
    # Kept short on purpose: Ray puts Unix sockets under it and sun_path is 107 bytes.
    return local_root() / name


# ---------------------------------------------------------------------------- processes


def _records(node: Any) -> list[ProcessRecord]:
    out = []
    for kind, infos in node.all_processes.items():
        for info in infos:
            with contextlib.suppress(psutil.Error):
                out.append(ProcessRecord(info.process.pid, psutil.Process(info.process.pid).create_time(), kind))
    return out


def _tree(procs: Sequence[psutil.Process]) -> list[psutil.Process]:
    seen: dict[int, psutil.Process] = {}
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            for p in [proc, *proc.children(recursive=True)]:
                seen[p.pid] = p
    return list(seen.values())


def _marked(ray_dir: str) -> list[psutil.Process]:
    """Processes whose command line names this cluster's own temp dir.

    A safety net for processes reparented away from the recorded trees (a raylet that
    died before its workers): the temp dir is unique to this cluster, so this never
    matches another cluster's processes."""
    me = os.getpid()
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if proc.pid != me and any(ray_dir in part for part in (proc.info["cmdline"] or [])):
                found.append(proc)
    return found


def marked_processes(path: str) -> list[psutil.Process]:
    """Processes (other than this one) whose command line names `path`."""
    return _marked(path)


def kill_processes(procs: Sequence[psutil.Process], grace_s: float = 3.0) -> list[int]:
    """SIGTERM, then SIGKILL what is left after `grace_s`. Returns the PIDs still alive."""
    procs = [p for p in procs if p.pid != os.getpid()]
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    _, alive = psutil.wait_procs(alive, timeout=grace_s)
    return [p.pid for p in alive]


@contextlib.contextmanager
def _environ(updates: dict[str, str]) -> Iterator[None]:
    """Ray reads the TPU environment in *this* process when it resolves a node's labels and
    resources, and the raylet inherits it: set it around each add_node only."""
    saved = {k: os.environ.get(k) for k in updates}
    os.environ.update(updates)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _loopback_only() -> None:
    """Keep this process's Ray on 127.0.0.1.

    On Linux Ray rewrites 127.0.0.1 in a bootstrap address to the machine's network
    address unless RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, and it reads that variable once
    at import: set both the variable (for processes started later) and the value Ray
    already read (if ray was imported before)."""
    os.environ[_CLUSTER_ENV] = "0"
    mod = sys.modules.get("ray._private.ray_constants")
    if mod is not None:
        mod.ENABLE_RAY_CLUSTER = False


_CLUSTER_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------- cluster

ProgressFn = Callable[[str, int, int], None]  # (what just started, done, total)


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
        return list(self.state.slices)

    @property
    def state_dir(self) -> Path:
        return Path(self.state.state_dir)

    @property
    def notes(self) -> list[str]:
        return list(self.state.notes)

    def slice(self, name: str) -> SliceSpec:
        for s in self.state.slices:
            if s.name == name:
                return s
        raise EmulatorError(f"no slice {name!r}; slices: {', '.join(s.name for s in self.state.slices)}")

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
        stack: StackRun | Sequence[SliceSpec] | Plan,
        *,
        max_hosts: int | None = None,
        state_dir: str | Path | None = None,
        name: str | None = None,
        detach: bool = False,
        host_cpus: int = HOST_CPUS,
        dashboard: bool = False,
        progress: ProgressFn | None = None,
        delivery: bool = False,
    ) -> EmulatedCluster:
        """Start a head plus one raylet per emulated TPU host on 127.0.0.1.

        `stack` is a mocked StackRun (planned with `plan_slices` and `max_hosts`), a Plan, or
        explicit SliceSpecs. With `detach=False` the nodes die with this process. With
        `delivery`, a GCS emulator starts first and the hosts fetch code the way GKE pods do:
        from the runtime_env working_dir only (see IMAGE_SITE)."""
        if isinstance(stack, Plan):
            plan = stack
        elif isinstance(stack, StackRun):
            plan = plan_slices(stack, max_hosts)
            name = name or stack.stack
        else:
            plan = plan_for(stack)
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
        self, plan: Plan, *, detach: bool, host_cpus: int, dashboard: bool, progress: ProgressFn | None
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
        common = {
            "node_ip_address": "127.0.0.1",
            "temp_dir": state.ray_dir,
            "min_worker_port": 0,
            "max_worker_port": 0,
            "dashboard_agent_listen_port": None,
        }
        with _environ(base):
            # shutdown_at_exit=False turns off Ray's fate-sharing: the detached cluster must
            # outlive the launcher. In-process we want the opposite, so no stray raylets
            # survive a crashed test run.
            cluster = Cluster(initialize_head=False, shutdown_at_exit=not detach)
            self._cluster = cluster
            head = cluster.add_node(
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
            state.address = head.address
            if dashboard:
                state.dashboard_url = "http://" + (head.webui_url or "").removeprefix("http://")
            state.hosts.append(HostRecord("", 0, head.unique_id, _records(head)))
            state.save()
            if progress:
                progress("head", 1, total)
            done = 1
            for spec in plan.slices:
                for worker in range(spec.hosts):
                    with _environ(spec.host_env(worker)):
                        node = cluster.add_node(
                            wait=False,
                            num_cpus=host_cpus,
                            runtime_env_dir_name=runtime_env_dir_name(spec, worker),
                            resources={"TPU": spec.chips_per_host},
                            labels={**spec.host_labels(), labels.EMULATOR_ROLE: "tpu-host"},
                            object_store_memory=HOST_OBJECT_STORE_BYTES,
                            **common,
                        )
                    self._nodes[(spec.name, worker)] = node
                    state.hosts.append(HostRecord(spec.name, worker, node.unique_id, _records(node)))
                    state.save()  # written per node, so `down` can clean up a half-started cluster
                    done += 1
                    if progress:
                        progress(f"{spec.name} worker {worker}", done, total)
            cluster.wait_for_nodes(timeout=120)
        state.ready = True
        state.save()

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
        recorded = [p for h in self.state.hosts for r in h.processes if (p := r.process()) is not None]
        recorded += [p for r in self.state.storage if (p := r.process()) is not None]  # last: after the hosts
        # Hosts first, head last: raylets that lose the GCS first spend seconds retrying.
        leftover = kill_processes(_tree(recorded) + _marked(self.state.ray_dir))
        leftover += kill_processes(_marked(self.state.ray_dir))
        if self._cluster is not None:
            # The processes are gone; drop Cluster's references so its exit hook has nothing to do.
            self._cluster.worker_nodes.clear()
            self._cluster.head_node = None
        if remove_dir and not leftover:
            shutil.rmtree(self.state.state_dir, ignore_errors=True)
        return sorted(set(leftover))

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


# ---------------------------------------------------------------------------- detached launcher


def launch_detached(
    plan: Plan,
    state_dir: Path,
    name: str,
    *,
    dashboard: bool = False,
    progress: ProgressFn | None = None,
    timeout_s: float = 300,
    delivery: bool = False,
) -> EmulatedCluster:
    """Start the cluster from a launcher in its own session; return once it is ready.

    The launcher is a separate process so the nodes belong to a fresh session (no
    terminal hang-up or Ctrl-C reaches them) and nothing of this process's state (signal
    handlers, a Ray driver) leaks into them."""
    state_dir.mkdir(parents=True, exist_ok=True)
    plan_file = state_dir / "plan.json"
    plan_file.write_text(
        json.dumps({"slices": [asdict(s) for s in plan.slices], "max_hosts": plan.max_hosts, "notes": list(plan.notes)})
    )
    log = open(state_dir / "launcher.log", "wb")  # noqa: SIM115 - handed to the child
    cmd = [sys.executable, "-m", "tpuray.emulator", "launch", "--state-dir", str(state_dir), "--name", name]
    if dashboard:
        cmd.append("--dashboard")
    if delivery:
        cmd.append("--delivery")
    env = {**os.environ, **BASE_ENV}
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
        # With delivery the hosts must not find the checkout's ray_apps in their working directory.
        cwd=state_dir if delivery else None,
    )
    log.close()
    deadline = time.monotonic() + timeout_s
    error = None
    try:
        assert proc.stdout is not None
        # Read events, not until EOF: a grandchild could in principle hold the pipe open.
        for raw in proc.stdout:
            event = json.loads(raw)
            if event["event"] == "progress" and progress:
                progress(event["what"], event["done"], event["total"])
            elif event["event"] == "ready":
                break
            elif event["event"] == "error":
                error = event["message"]
                break
            if time.monotonic() > deadline:
                error = f"not ready after {timeout_s:.0f} s"
                break
        else:
            error = f"launcher exited with code {proc.wait()} before the cluster was ready"
    except BaseException:
        _cleanup_failed_launch(proc, state_dir)
        raise
    if error:
        _cleanup_failed_launch(proc, state_dir)
        raise EmulatorError(f"{error}; see {state_dir / 'launcher.log'}")
    proc.wait(timeout=30)
    return EmulatedCluster.attach(state_dir)


def _cleanup_failed_launch(proc: subprocess.Popen[bytes], state_dir: Path) -> None:
    with contextlib.suppress(psutil.Error):
        kill_processes(_tree([psutil.Process(proc.pid)]))
    with contextlib.suppress(EmulatorError):
        EmulatedCluster.attach(state_dir).stop(remove_dir=False)


def _launch_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tpuray.emulator launch")
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--dashboard", action="store_true")
    parser.add_argument("--delivery", action="store_true")
    args = parser.parse_args(argv)
    # Progress goes to a private duplicate of the pipe; fds 1 and 2 go to the log so the
    # long-lived Ray processes never inherit (and hold open) the parent's pipe.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    log_fd = os.open(os.path.join(args.state_dir, "launcher.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)

    def emit(**event: Any) -> None:
        out.write(json.dumps(event) + "\n")
        out.flush()

    raw = json.loads(Path(args.state_dir, "plan.json").read_text())
    plan = Plan(tuple(SliceSpec(**s) for s in raw["slices"]), raw["max_hosts"], tuple(raw["notes"]))
    # Ray replaces SIGTERM handlers on each node start; make SIGTERM an exception that
    # unwinds through start()'s cleanup instead.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        EmulatedCluster.start(
            plan,
            state_dir=args.state_dir,
            name=args.name,
            detach=True,
            dashboard=args.dashboard,
            delivery=args.delivery,
            progress=lambda what, done, total: emit(event="progress", what=what, done=done, total=total),
        )
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, then re-raised
        emit(event="error", message=f"{type(exc).__name__}: {exc}")
        raise
    emit(event="ready")
    # os._exit: skip interpreter teardown, which could touch Ray's process handles.
    out.close()
    os._exit(0)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "launch":
        sys.exit(_launch_main(sys.argv[2:]))
    sys.exit("usage: python -m tpuray.emulator launch --state-dir DIR --name NAME")
