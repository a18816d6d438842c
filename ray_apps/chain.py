"""The capacity chain as the training driver walks it (docs/capacity.md has the whole design).

GKE takes the tier steps of one shape by itself: a worker group's pods select the slice pool's
ComputeClass and the shape (accelerator, topology), never a tier, so GKE falls from one
priority of that shape to the next (reservation, spot, on-demand...). What GKE cannot do is
change the shape: a v6e pod never lands on a v5e node. That step is the driver's:

    for each shape of the chain, in order:
        enough whole free slices of it already: take them;
        else ask Ray for whole slices of that shape (`WholeSliceDemand`: hosts x slices
        bundles of one host's chips on the shape's worker group, the demand Ray's autoscaler
        answers with whole replicas of that group) and wait up to `deadline_s` for that
        many whole, fully free slices; once the demand is placed it is given back, so that
        the slices it held read free; when hosts of the shape start joining, the capacity is
        arriving: the wait is extended once, to `deadline_s` after the first of them joined
        (a slice's hosts come up over a minute or more; giving up then drops the nodes GKE
        just made), so a step waits at most twice its deadline;
        got them: hand the shape to JaxTrainer; else give the demand back, next shape.
    none in time: ChainExhaustedError, naming every step and what it saw.

A slice counts only when every host of it is alive and free: a slice that came up with 3 of
4 hosts (a stockout in the middle of a spot scale-up) is no slice.

The Ray-free core (`walk`) takes the inventory, the demand and the clock as arguments, so
its choices are tested with fake inventories (tests/test_chain.py); `WholeSliceDemand` is the
demand on a live cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ray_apps import slices
from ray_apps.contracts import ShapeStep

UNKNOWN_TIER = "unknown"


class ChainExhaustedError(slices.SliceUnavailableError):
    """No step of the capacity chain gave whole slices before its deadline."""


@dataclass(frozen=True)
class StepAttempt:
    """What one step of the chain got: the slices it ran on, or what it saw at its deadline."""

    index: int
    step: ShapeStep
    granted: bool
    waited_s: float
    slices: tuple[str, ...] = ()
    tier: str | None = None
    seen: str = ""

    def describe(self) -> str:
        head = f"step {self.index + 1}: {self.step.describe()}"
        if self.granted:
            return f"{head}: got {', '.join(self.slices)} (tier {self.tier}) after {self.waited_s:.1f} s"
        return f"{head}: no whole free slice within {self.waited_s:.1f} s; {self.seen}"

    def record(self) -> dict[str, Any]:
        return {
            "step": self.index + 1,
            "shape": self.step.to_flag(),
            "granted": self.granted,
            "waited_s": round(self.waited_s, 2),
            "slices": list(self.slices),
            "tier": self.tier,
            "seen": self.seen,
        }


@dataclass(frozen=True)
class ChainChoice:
    """The step the driver runs on, and every step it tried before."""

    index: int
    step: ShapeStep
    slices: tuple[str, ...]
    tier: str
    tried: tuple[StepAttempt, ...] = field(default_factory=tuple)

    def record(self) -> dict[str, Any]:
        """The result's `capacity` entry: shape, tier, and the steps tried."""
        return {
            "step": self.index + 1,
            "shape": self.step.to_flag(),
            "accelerator_type": self.step.accelerator_type,
            "topology": self.step.topology,
            "hosts_per_slice": self.step.hosts_per_slice,
            "chips_per_host": self.step.chips_per_host,
            "slices": list(self.slices),
            "tier": self.tier,
            "tried": [t.record() for t in self.tried],
        }


class Demand(Protocol):
    """Asks the cluster for slices of a shape (so an autoscaler scales them up) and lets go."""

    def ask(self, step: ShapeStep, num_slices: int) -> Any: ...

    def placed(self, handle: Any) -> bool:
        """Whether the demand got its hosts (it then holds them: `walk` gives it back)."""
        ...

    def cancel(self, handle: Any) -> None: ...


SETTLE_S = 5.0  # after a placed demand is given back: how long its hosts may take to read free


def whole_free_slices(views: Sequence[slices.SliceView], step: ShapeStep) -> list[slices.SliceView]:
    """The slices of the step's shape whose hosts are all alive and free, by name."""
    selector = {slices.ACCELERATOR_TYPE: step.accelerator_type}
    found = slices.candidates(views, selector, step.topology, step.hosts_per_slice, step.chips_per_host)
    return [v for v in found if v.free]


def _same_shape(views: Sequence[slices.SliceView], step: ShapeStep) -> list[slices.SliceView]:
    return [
        v
        for v in views
        if v.labels.get(slices.ACCELERATOR_TYPE) == step.accelerator_type and v.topology == step.topology
    ]


def hosts_of_shape(views: Sequence[slices.SliceView], step: ShapeStep) -> int:
    """Alive hosts of the step's shape, whole slices or not: capacity arriving shows here first."""
    return sum(len(v.hosts) for v in _same_shape(views, step))


def tier_of(view: slices.SliceView) -> str:
    """The capacity tier a slice runs on: the tier label where the nodes carry one (the emulator;
    on GKE a node's tier is GKE's choice), else Ray's market type, else unknown."""
    lab = view.labels
    return lab.get(slices.CAPACITY_TIER) or lab.get(slices.MARKET_TYPE) or UNKNOWN_TIER


def _seen(views: Sequence[slices.SliceView], step: ShapeStep, num_slices: int) -> str:
    same_kind = _same_shape(views, step)
    if not same_kind:
        return "no slice of this shape came up"
    free = len(whole_free_slices(views, step))
    return f"{free} whole free of {num_slices} needed; " + "; ".join(v.describe() for v in same_kind)


def walk(
    chain: Sequence[ShapeStep],
    *,
    num_slices: int,
    deadline_s: float,
    inventory: Callable[[], Sequence[slices.SliceView]],
    demand: Demand | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll_s: float = 0.5,
    log: Callable[[str], None] = lambda _line: None,
) -> ChainChoice:
    """The first step of the chain with `num_slices` whole free slices within `deadline_s` of
    asking for it; ChainExhaustedError naming every step when none has."""
    if not chain:
        raise ValueError("the capacity chain has no step")
    tried: list[StepAttempt] = []
    for index, step in enumerate(chain):
        start = clock()
        handle: Any = None
        released_at: float | None = None
        log(f"tpuray chain: step {index + 1}/{len(chain)}: asking for {num_slices} x {step.describe()}")
        views: Sequence[slices.SliceView] = ()
        hosts_at_start: int | None = None
        until = deadline_s  # seconds from `start`; extended once when hosts of the shape join
        try:
            while True:
                views = inventory()
                hosts = hosts_of_shape(views, step)
                if hosts_at_start is None:
                    hosts_at_start = hosts
                elif hosts > hosts_at_start and until == deadline_s:
                    until = clock() - start + deadline_s
                    log(f"tpuray chain: step {index + 1}: hosts of the shape are joining; waiting up to {until:.0f} s")
                free = whole_free_slices(views, step)
                if len(free) >= num_slices:
                    chosen = free[:num_slices]
                    tiers = sorted({tier_of(v) for v in chosen})
                    attempt = StepAttempt(
                        index, step, True, clock() - start, tuple(v.name for v in chosen), ",".join(tiers)
                    )
                    log("tpuray chain: " + attempt.describe())
                    return ChainChoice(index, step, attempt.slices, ",".join(tiers), tuple([*tried, attempt]))
                if demand is not None:
                    if handle is not None and demand.placed(handle):
                        # The hosts are up and the demand holds their chips: give them back.
                        demand.cancel(handle)
                        handle, released_at = None, clock()
                    elif handle is None and (released_at is None or clock() - released_at >= SETTLE_S):
                        # Short of whole free slices (none asked for yet, or a placed demand
                        # got hosts that still do not make whole free slices): ask.
                        handle, released_at = demand.ask(step, num_slices), None
                remaining = until - (clock() - start)
                if remaining <= 0:
                    break
                sleep(min(poll_s, remaining))
        finally:
            if handle is not None and demand is not None:
                demand.cancel(handle)
        attempt = StepAttempt(index, step, False, clock() - start, seen=_seen(views, step, num_slices))
        log("tpuray chain: " + attempt.describe())
        tried.append(attempt)
    raise ChainExhaustedError(exhausted_message(tried, num_slices, deadline_s))


def exhausted_message(tried: Sequence[StepAttempt], num_slices: int, deadline_s: float) -> str:
    lines = [
        f"no step of the capacity chain gave {num_slices} whole free slice(s) within {deadline_s:g} s per step; "
        f"tried {len(tried)} step(s):"
    ]
    lines += [f"  - {t.describe()}" for t in tried]
    return "\n".join(lines)


# pragma: no mutate start (a live Ray cluster: tests/test_chain_emulated.py, tests/test_joint_train.py)
class WholeSliceDemand:
    """`hosts x slices` bundles of one host's chips, one per host (STRICT_SPREAD), selected by
    the shape's worker group's own Ray label (tpuray.dev/tpu-pod-type, tpuray/labels.py).

    Why whole slices: Ray's autoscaler v2 answers pending bundles with one new node per bundle
    it cannot place (ray/autoscaler/v2/scheduler.py), and Ray's KubeRay provider turns a node
    count of a multi-host group into replicas by integer division, `num_workers // numOfHosts`
    (ray/autoscaler/v2/instance_manager/cloud_providers/kuberay/cloud_provider.py,
    `_get_workers_delete_info`/`_initialize_scale_request`, Ray 2.60.0): a demand for fewer
    hosts than a slice patches nothing (tests/test_joint_autoscaler.py shows it). So the
    demand asks for every host of every slice. Why the group label: autoscaler v2 knows a
    node type's labels before the node exists only from the group's `labels` field
    (ray/autoscaler/_private/kuberay/autoscaling_config.py, `_get_labels_from_group_spec`);
    Ray's own ray.io/tpu-pod-type appears once a host runs."""

    def ask(self, step: ShapeStep, num_slices: int) -> Any:
        from ray._private.accelerators.tpu import infer_tpu_pod_type_from_topology
        from ray.util.placement_group import placement_group

        pod_type = infer_tpu_pod_type_from_topology(step.topology, step.accelerator_type)
        hosts = step.hosts_per_slice * num_slices
        return placement_group(
            [{"TPU": float(step.chips_per_host)}] * hosts,
            strategy="STRICT_SPREAD",
            name=f"tpuray-chain-{pod_type}",
            bundle_label_selector=[{slices.GROUP_POD_TYPE: pod_type}] * hosts,
        )

    def placed(self, handle: Any) -> bool:
        # The GCS's record, not `ray.wait([pg.ready()], timeout=0)`: ready() is a task that
        # needs time to run, so a zero timeout never sees it done and the demand is never given
        # back (seen on the joint substrate: the restart's demand held a whole slice to the deadline).
        from ray.util import placement_group_table

        return placement_group_table(handle).get("state") == "CREATED"

    def cancel(self, handle: Any) -> None:
        from ray.util.placement_group import remove_placement_group

        remove_placement_group(handle)


# pragma: no mutate end
