"""Checks of facts derived from the stack's desired state, one home each: whether the slices the
workloads claim fit their pools (slice demand) and whether a gang can be held to one slice (the
one-VM rule, decided by catalog.SliceShape.one_vm_gang_problem). tpuray/config/checks.py runs them
on every stack before anything is declared; the LLM engine's device count is llm_stack's
(`stack_lines`), next to the LLMConfig it builds.
"""

from __future__ import annotations

from tpuray import catalog
from tpuray.config.base import NAMESPACE
from tpuray.config.schema import StackConfig
from tpuray.config.workloads import SliceRange

# The workloads that hold slices, and the key that says how many.
_CLAIMS = (("train", "slices"), ("serve", "replicas"), ("interactive", "slices"))


def one_vm_gang_lines(cfg: StackConfig, pool_name: str, gang: str) -> list[str]:
    """The pool's shape when `gang` cannot be held to one slice. JaxTrainer and Ray Serve LLM
    (ray/llm/_internal/serve/core/configs/accelerators.py) both reserve TPU slices with Ray's
    slice placement group and pass no chips_per_vm. Fallback shapes name no machine type and so
    get the one-VM machine of such a topology."""
    i, pool = next((i, p) for i, p in enumerate(cfg.slice_pools) if p.name == pool_name)
    try:
        shape = pool.shape
    except catalog.CatalogError:
        return []  # reported by the shape check
    problem = shape.one_vm_gang_problem(gang)
    if problem is None:
        return []
    return [
        f"{NAMESPACE}:slicePools[{i}].machineType: {shape.machine_type!r} makes {shape.generation} "
        f"{shape.topology} {shape.hosts} hosts of {shape.chips_per_host} chips: {problem}"
    ]


def gang_lines(cfg: StackConfig) -> list[str]:
    """The one-VM rule for the training gang and each Ray Serve LLM replica (pools that exist)."""
    names = {p.name for p in cfg.slice_pools}
    train, serve = cfg.workloads.train, cfg.workloads.serve
    lines = []
    if train is not None and train.pool in names:
        lines += one_vm_gang_lines(cfg, train.pool, "the JaxTrainer gang of workloads.train")
    if serve is not None and serve.backend == "llm" and serve.pool in names:
        lines += one_vm_gang_lines(cfg, serve.pool, "a Ray Serve LLM replica of workloads.serve")
    return lines


def slice_demand_lines(cfg: StackConfig) -> list[str]:
    """Each workload holds whole slices of its pool; more claims than slices leave a gang pending
    forever. Claims on a pool the stack does not declare are the pool check's."""
    names = {p.name for p in cfg.slice_pools}
    demand: dict[str, list[tuple[str, int]]] = {}
    ranges: list[str] = []
    for kind, count_key in _CLAIMS:
        workload = getattr(cfg.workloads, kind)
        if workload is None or workload.pool not in names:
            continue
        key = f"{NAMESPACE}:workloads.{kind}"
        count = getattr(workload, count_key)
        if kind == "train":  # an elastic run may hold its most slices
            ranges += slice_range_lines(f"{key}.slices", workload.slices)
            count = workload.max_slices
        if kind == "serve" and workload.autoscaling is not None:  # at most maxReplicas slices
            count_key, count = "autoscaling.maxReplicas", workload.autoscaling.max_replicas
        demand.setdefault(workload.pool, []).append((f"{key}.{count_key}", count))
    lines = ranges
    for pool_name, claims in demand.items():
        pool = cfg.pool(pool_name)
        needed = sum(count for _, count in claims)  # arithmetic, never one step per slice
        if pool.slices >= 1 and needed > pool.slices:  # slices < 1 is reported on its own
            lines.append(
                f"{claims[-1][0]}: workloads on pool {pool_name!r} need {needed} slices "
                f"({', '.join(sorted({k for k, _ in claims}))}) but the pool has {pool.slices}; raise slicePools "
                f"{pool_name!r}.slices or move a workload to another pool"
            )
    return lines


def slice_range_lines(key: str, slices: int | SliceRange) -> list[str]:
    """A train run's slices: a count >= 1, or an elastic {min, max} with 1 <= min <= max."""
    if isinstance(slices, int):
        return [f"{key}: {slices} is invalid; a run needs at least 1 slice"] if slices < 1 else []
    if slices.min < 1:
        return [f"{key}.min: {slices.min} is invalid; an elastic run keeps at least 1 slice"]
    if slices.min > slices.max:
        return [f"{key}: min {slices.min} is above max {slices.max}; write min <= max, e.g. {{min: 1, max: 2}}"]
    return []
