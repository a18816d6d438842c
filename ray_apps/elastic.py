"""Elastic, slice-aligned training and the preemption notice, on Ray Train v2's own mechanisms.

Elastic (docs/capacity.md, "Elastic training"): `ScalingConfig(num_workers=(min, max))` makes Ray
Train's ElasticScalingPolicy pick the worker count at every (re)start, and while running look
every `elastic_resize_monitor_interval_s` for more; with `use_tpu`, `topology` and
`accelerator_type` it counts only whole, intact slices (ray 2.60.0
python/ray/train/v2/_internal/execution/scaling_policy/elastic.py, `_get_strict_tpu_worker_count`).
Each new worker group is a new set of worker processes: JaxConfig sets `MEGASCALE_*` from the new
group and `jax.distributed` comes up again with the new world (ray/train/v2/jax/config.py,
`_JaxBackend.on_start`), so nothing of the old coordinator survives a resize.

Batch policy on fewer slices than the most: `per-slice` keeps each host's batch (the global batch
shrinks with the slices; the step count stays), `global` keeps the global batch of the most
slices by accumulating max/current micro-batches per step.

The notice: GKE gives a preempted or maintained TPU pod SIGTERM and its grace period; the worker
group's preStop hook drains its own Ray node with that deadline (GCS DrainNode, reason
PREEMPTION: infra/components/ray_cluster.py). Ray Train's PreemptionWatcher sees the drained node
and every worker's `ray.train.get_preemption_info()` returns it; the loop then saves a checkpoint
at once (`Notice`). The controller keeps the group running until the deadline (plus
`SETTLE_S`), then restarts it without the drained slice: the restart repeats only the steps since
the notice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

# Past the drain deadline, how long Ray Train keeps the survivors running before it restarts
# (FailureConfig.preemption_grace_s): the drained hosts are gone by then, so the restart's
# count of whole slices no longer includes them.
SETTLE_S = 5.0


def accumulation(batch_policy: str | None, max_slices: int, slices_now: int) -> int:
    """Micro-batches per step: 1 for per-slice; max/current (rounded up) to keep the global batch."""
    if batch_policy != "global" or slices_now >= max_slices:
        return 1
    return -(-max_slices // max(slices_now, 1))


def slices_in(world: int, hosts_per_slice: int) -> int:
    """Slices a worker group of `world` workers spans (one worker per TPU host)."""
    return max(1, world // max(hosts_per_slice, 1))


@dataclass
class Notice:
    """The preemption notice as the loop sees it. Call `due()` once per step on every rank (it is
    Ray Train's barrier: every rank must call it as often); True once per notice, then save."""

    enabled: bool
    seen: dict[str, Any] | None = None

    def due(self) -> bool:
        if not self.enabled:
            return False
        import ray.train

        info = ray.train.get_preemption_info()
        if info is None or self.seen is not None:
            return False
        self.seen = {
            "detected_at": time.time(),
            "deadline": info.deadline_ms / 1000 if info.deadline_ms else None,
            "preempted_ranks": list(info.preempted_ranks),
            "nodes": list(info.preempted_node_ids),
        }
        return True

    def saved(self, step: int, t0: float, t1: float) -> dict[str, Any]:
        """The record of the checkpoint the notice triggered: at `step`, written from t0 to t1."""
        assert self.seen is not None
        deadline = self.seen["deadline"]
        self.seen.update(
            step=step,
            saved_at=t1,
            checkpoint_s=round(t1 - t0, 3),
            within_window=deadline is None or t1 <= deadline,
        )
        return dict(self.seen)


class Progress:
    """Rank 0's events for the goodput recorder (ray_apps/goodput.py); fire and forget."""

    def __init__(self, recorder: Any, attempt: int, slices: int, group: float) -> None:
        self.recorder, self.attempt, self.slices, self.group = recorder, attempt, slices, group

    def span(self, kind: str, t0: float, t1: float, step: int | None = None, **extra: Any) -> None:
        if self.recorder is None:
            return
        event = {"kind": kind, "attempt": self.attempt, "group": self.group, "t0": t0, "t1": t1}
        event.update(slices=self.slices, step=step)
        self.recorder.add.remote({**event, **extra})


def scaling_workers(args: Any) -> int | tuple[int, int]:
    """ScalingConfig.num_workers: the (min, max) range of whole slices when elastic."""
    return args.worker_range if args.elastic else args.num_workers


# pragma: no mutate start (a live Ray cluster: tests/test_elastic_emulated.py)
def whole_slice_counter(args: Any) -> Any:
    """What the goodput recorder samples: whole slices of the run's shape that are up (draining
    ones included: the run holds them until they go)."""
    topology, accelerator, hosts, chips = (
        args.topology,
        args.accelerator_type,
        args.hosts_per_slice,
        args.chips_per_host,
    )
    if args.device == "cpu":
        fixed = args.slices
        return lambda: fixed

    def count() -> int:
        # ray.nodes() alone (one GCS call a second): alive hosts of the shape, by slice.
        import ray

        from ray_apps import slices

        per_slice: dict[str, int] = {}
        for node in ray.nodes():
            lab = node.get("Labels") or {}
            if (
                node.get("Alive")
                and lab.get(slices.ACCELERATOR_TYPE) == accelerator
                and lab.get(slices.TOPOLOGY) == topology
                and (node.get("Resources") or {}).get("TPU") == chips
            ):
                per_slice[lab[slices.SLICE_NAME]] = per_slice.get(lab[slices.SLICE_NAME], 0) + 1
        return sum(1 for n in per_slice.values() if n == hosts)

    return count


# pragma: no mutate end
