"""The emulator's plan: which slices to emulate for a stack, as pure data (no processes).

A slice is what GKE creates for one replica of a TPU worker group: `SliceSpec` holds the
catalog's `SliceShape` (the catalog is the only place that does TPU arithmetic) plus what
the worker group adds (its name, pool, capacity tier and Ray market type).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import psutil

from tpuray import capacity, catalog, errors, labels
from tpuray.desired import worker_group
from tpuray.preview.mockrun import StackRun

EmulatorError = errors.EmulatorError  # the emulated cluster cannot be planned, started or found

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


@dataclass(frozen=True)
class SliceSpec:
    """One emulated slice: what GKE would create for one replica of a TPU worker group."""

    name: str  # TPU_NAME: <worker group>-<replica index>, as the webhook sets it
    pool: str
    shape: catalog.SliceShape  # what is emulated (reduced_from says when smaller than rendered)
    market_type: str  # ray.io/market-type of the worker group (its capacity tier)
    reduced_from: str | None = None  # "4x4" when emulated at a smaller topology
    tier: str = ""  # tpuray.dev/capacity-tier of the worker group

    def as_json(self) -> dict[str, Any]:
        """The state file's form: the shape by its catalog key, not a copy of its fields."""
        shape = self.shape
        return {
            "name": self.name,
            "pool": self.pool,
            "shape": {"generation": shape.generation, "topology": shape.topology, "machine_type": shape.machine_type},
            "market_type": self.market_type,
            "reduced_from": self.reduced_from,
            "tier": self.tier,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> SliceSpec:
        key = raw["shape"]
        shape = catalog.lookup(key["generation"], key["topology"], key["machine_type"])
        return cls(**{**raw, "shape": shape})

    @property
    def group(self) -> str:
        """The worker group the slice is a replica of (its name without the replica index)."""
        return self.name.rsplit("-", 1)[0]

    def hostnames(self) -> list[str]:
        # The webhook names pods <group>-<replica>-<worker id>; the list is what
        # TPU_WORKER_HOSTNAMES carries on every host of a multi-host slice.
        return [f"{self.name}-{w}" for w in range(self.shape.hosts)]

    def host_env(self, worker_id: int) -> dict[str, str]:
        env = {
            "TPU_NAME": self.name,
            "TPU_WORKER_ID": str(worker_id),
            "TPU_ACCELERATOR_TYPE": self.shape.pod_type,
            "TPU_TOPOLOGY": self.shape.topology,
            # KubeRay sets RAY_NODE_TYPE_NAME from the pod's ray.io/group label (the worker
            # group), and Ray turns it into ray.io/node-group. KubeRay sets no
            # RAY_NODE_MARKET_TYPE: a group's replicas land on any tier of its ComputeClass.
            "RAY_NODE_TYPE_NAME": self.group,
        }
        if self.shape.multi_host:
            env["TPU_WORKER_HOSTNAMES"] = ",".join(self.hostnames())
        return env

    def host_labels(self) -> dict[str, str]:
        """The worker group's own Ray labels, and the emulator's tier label (a stand-in for the
        node's tier, which a pod on GKE cannot read: docs/capacity.md)."""
        found = {
            labels.GENERATION: self.shape.generation,
            labels.SLICE_POOL: self.pool,
            labels.TPU_POD_TYPE: self.shape.pod_type,
        }
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
        return sum(s.shape.hosts for s in self.slices)

    def as_json(self) -> dict[str, Any]:
        return {"slices": [s.as_json() for s in self.slices], "max_hosts": self.max_hosts, "notes": list(self.notes)}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Plan:
        return cls(tuple(SliceSpec.from_json(s) for s in raw["slices"]), raw["max_hosts"], tuple(raw["notes"]))


def default_max_hosts() -> int:
    return max_hosts_for(psutil.virtual_memory().available)


def max_hosts_for(available_bytes: int) -> int:
    """Hosts that fit in half the available memory (the rest stays for the workloads)."""
    budget = available_bytes // 2 - HEAD_MEMORY_BYTES
    return max(int(budget // HOST_MEMORY_BYTES), 1)


def _smaller_shape(shape: catalog.SliceShape) -> catalog.SliceShape | None:
    """The same generation's shape with the most hosts below this one's (catalog order). Never a
    multi-host slice that Ray reads as one VM: ray_apps.train refuses those (JaxTrainer could not
    hold the gang to one slice), so a reduced v6e 4x4 becomes the one-VM 2x4 (ct6e-standard-8t), not the 2-host one."""
    smaller = [
        s
        for s in catalog.all_shapes()
        if s.generation == shape.generation and s.hosts < shape.hosts and not s.ray_reads_as_one_host
    ]
    if not smaller:
        return None
    return max(smaller, key=lambda s: (s.hosts, s.chips))  # max keeps the first of equals


@dataclass(frozen=True)
class TpuGroup:
    """One TPU worker group of a rendered KubeRay object: what GKE would run for it."""

    name: str  # groupName; TPU_NAME of its replicas is <name>-<replica index>
    pool: str
    shape: catalog.SliceShape
    max_slices: int  # maxReplicas: fallback shapes' groups start empty but may be scaled up
    # The capacity tiers GKE walks for this shape's replicas: the priorities of the pods'
    # ComputeClass whose TPU type and topology are the group's, in order (docs/capacity.md).
    tiers: tuple[capacity.Tier, ...] = ()
    # The slices a run has at start: the group's replicas, or, in a chain whose groups all start
    # empty (tpuray/desired/ray_cluster.py), the first shape's most slices, which the driver's
    # first demand asks Ray's autoscaler for (0 for a fallback shape).
    start_slices: int = 1


def class_tiers(classes: dict[str, dict[str, Any]], name: str | None, shape: catalog.SliceShape) -> tuple:
    """The tiers of ComputeClass `name` for one shape, in priority order; the default tier when
    the pods select no rendered class (GKE then places them on whatever pool matches)."""
    priorities = (classes.get(name or "") or {}).get("spec", {}).get("priorities", [])
    found = [
        capacity.tier_of_priority(p)
        for p in priorities
        if (p.get("tpu") or {}).get("type") == shape.gke_accelerator and p["tpu"].get("topology") == shape.topology
    ]
    unique = [t for i, t in enumerate(found) if all(t is not u for u in found[:i])]
    return tuple(unique) or (capacity.default_tier(),)


def emulated_groups(run: StackRun) -> list[TpuGroup]:
    """The TPU worker groups of every RayJob, RayService and RayCluster the stack renders, read
    through the one worker-group model (tpuray/desired/worker_group.py)."""
    groups = []
    manifests = [r.manifest() for r in run.kubernetes_objects()]
    classes = {m["metadata"]["name"]: m for m in manifests if m.get("kind") == "ComputeClass"}
    for manifest in manifests:
        if manifest.get("kind") not in labels.RAY_KINDS:
            continue
        tpu = [g for g in worker_group.of_object(manifest) if g.shape is not None]
        chain = bool(tpu) and all(g.start_slices == 0 for g in tpu)
        for index, group in enumerate(tpu):
            shape = group.shape
            assert shape is not None
            start = (group.most_slices if index == 0 else 0) if chain else group.start_slices
            groups.append(
                TpuGroup(
                    name=group.name,
                    pool=group.pool,
                    shape=shape,
                    max_slices=group.most_slices,
                    tiers=class_tiers(classes, group.compute_class, shape),
                    start_slices=start,
                )
            )
    return groups


def plan_slices(run: StackRun, max_hosts: int | None = None, start_only: bool = False) -> Plan:
    """The slices to emulate for a stack's rendered worker groups, reduced to fit `max_hosts`.

    Every group gets its maxReplicas slices on each tier GKE may walk for it (its ComputeClass's
    priorities of its shape, in order), so later tiers and fallback shapes exist to fall back
    to. With `start_only`, every group gets its `replicas` on its first tier instead: the
    slices KubeRay creates when the object is applied, where GKE puts them when the first
    tier has capacity. That is what a run that needs no fallback uses (`tpuray demo`).
    Reduction order keeps what matters for scheduling as long as possible: first fewer
    slices per group (down to one), then a smaller topology of the same generation
    (preferring one that is still multi-host). Every group keeps at least one slice."""
    groups = emulated_groups(run)
    if start_only:
        groups = [replace(g, max_slices=g.start_slices, tiers=g.tiers[:1]) for g in groups if g.start_slices > 0]
    if not groups:
        what = "no TPU worker group that starts with a slice (replicas > 0)" if start_only else "no TPU worker group"
        raise EmulatorError(f"stack {run.stack!r} renders {what}: nothing to emulate")
    limit = default_max_hosts() if max_hosts is None else max_hosts
    if limit < len(groups):
        raise EmulatorError(
            f"--max-hosts {limit} is too small: the stack has {len(groups)} TPU worker groups "
            "and each needs at least one emulated host"
        )
    state = {g.name: [g.shape, g.max_slices * len(g.tiers)] for g in groups}

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
        full, wanted = group.shape, group.max_slices * len(group.tiers)
        if (shape, n) != (full, wanted):
            notes.append(
                f"{group.name}: {wanted} x {full.generation} {full.topology} "
                f"({_hosts(wanted * full.hosts)}) emulated as {n} x {shape.topology} "
                f"({_hosts(n * shape.hosts)} of {shape.chips_per_host} chips) to fit --max-hosts {limit}"
            )
        reduced = full.topology if shape.topology != full.topology or shape.hosts != full.hosts else None
        for i in range(n):
            # Replicas fill the first tier, then the next: where GKE's walk of the class puts them.
            tier = group.tiers[min(i // group.max_slices, len(group.tiers) - 1)] if group.max_slices else group.tiers[0]
            slices.append(SliceSpec(f"{group.name}-{i}", group.pool, shape, tier.market_type, reduced, tier.key))
    return Plan(tuple(slices), limit, tuple(notes))


def _hosts(n: int) -> str:
    return f"{n} host" + ("" if n == 1 else "s")


def runtime_env_dir_name(spec: SliceSpec | None, worker: int = 0) -> str:
    """The node's runtime_env folder under Ray's session folder (RUNTIME_ENV_DIR/<host>)."""
    return f"{RUNTIME_ENV_DIR}/{'head' if spec is None else f'{spec.name}-{worker}'}"


def plan_for(slices: Sequence[SliceSpec]) -> Plan:
    """A plan of explicit slices (tests and benchmarks that need a given layout)."""
    return Plan(tuple(slices), sum(s.shape.hosts for s in slices))
