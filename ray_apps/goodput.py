"""Goodput of a training run: productive step time over the TPU slice time the run held.

Units are slice-seconds (slices x seconds): a step that ran on 2 slices for 3 s is 6 slice-seconds
of productive time; a slice that sat up for 10 s while the run waited for a second one is 10
slice-seconds of badput. Every slice-second the run held falls in exactly one bucket, so
productive + sum(badput) == allocated:

- productive: the last execution of each training step (the one the final history keeps);
- redone: an earlier execution of a step that a loss threw away (run again after a restart);
- checkpoint: writing checkpoints (periodic, and the one a preemption notice triggers);
- startup: a worker group coming up (from the train function's start to its first step) and
  the gaps between attempts while enough slices are up to start the next one;
- waiting_for_capacity: gaps while fewer slices are up than the next attempt runs on;
- idle: slices up but not used by the running attempt (an elastic run on 1 slice while a second
  is back but not yet joined), and overhead inside an attempt between steps.

Events come from rank 0 of the training loop (`attempt`, `step`, `checkpoint`, `notice`) and the
capacity from a sampler of the run's whole slices; `account` is pure (tests feed it literal
timelines). `Recorder` is the Ray actor that collects both during a run, samples the capacity
itself and exports the ray_tpuray_train_goodput_* gauges (tpuray/data/metrics.yaml).

Time to recover from a loss at time L: from L until the run completes a step beyond the last step
it had reached at L (the work the loss threw away done again, and the restart, included).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

CAUSES = ("waiting_for_capacity", "startup", "redone", "checkpoint", "idle")
SAMPLE_S = 1.0  # the recorder's capacity sampling period


@dataclass(frozen=True)
class Span:
    """What rank 0 was doing from t0 to t1 on `slices` slices: a step, a checkpoint, an attempt's start."""

    kind: str  # "attempt", "step", "checkpoint"
    attempt: float  # the worker group: its start time on rank 0 (attempt numbers repeat when one saved nothing)
    t0: float
    t1: float
    slices: int
    step: int | None = None

    @classmethod
    def of(cls, event: dict[str, Any]) -> Span:
        group = float(event.get("group", event["attempt"]))
        return cls(event["kind"], group, event["t0"], event["t1"], int(event["slices"]), event.get("step"))


@dataclass
class Goodput:
    allocated_slice_s: float
    productive_slice_s: float
    badput_slice_s: dict[str, float]
    slices_over_time: list[dict[str, Any]] = field(default_factory=list)
    recoveries: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return self.productive_slice_s / self.allocated_slice_s if self.allocated_slice_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "goodput": round(self.ratio, 4),
            "allocated_slice_s": round(self.allocated_slice_s, 2),
            "productive_slice_s": round(self.productive_slice_s, 2),
            "badput_slice_s": {k: round(v, 2) for k, v in self.badput_slice_s.items()},
            "slices_over_time": self.slices_over_time,
            "recoveries": self.recoveries,
        }


def capacity_at(samples: Sequence[tuple[float, int]], t: float) -> int:
    """The slice count of the last sample at or before t (the first sample's before it)."""
    if not samples:
        return 0
    i = bisect.bisect_right([s[0] for s in samples], t) - 1
    return samples[max(i, 0)][1]


def _productive(spans: Sequence[Span]) -> set[Span]:
    """The last execution of each step number: the one the final history keeps."""
    last: dict[int, Span] = {}
    for s in spans:
        if s.kind == "step" and s.step is not None and (s.step not in last or s.t1 >= last[s.step].t1):
            last[s.step] = s
    return set(last.values())


def _attempt_bounds(spans: Sequence[Span]) -> list[tuple[float, float, float, int]]:
    """(worker group, start, end of its last span, slices), in start order."""
    bounds: dict[float, list[float]] = {}
    slices: dict[float, int] = {}
    for s in spans:
        b = bounds.setdefault(s.attempt, [s.t0, s.t1])
        b[0], b[1] = min(b[0], s.t0), max(b[1], s.t1)
        slices.setdefault(s.attempt, s.slices)
    return sorted(((a, b[0], b[1], slices[a]) for a, b in bounds.items()), key=lambda x: x[1])


def account(
    events: Sequence[dict[str, Any]],
    capacity: Sequence[tuple[float, int]],
    start: float,
    end: float,
    losses: Sequence[float] = (),
) -> Goodput:
    """Split the slice-seconds of [start, end] (capacity(t) slices up, never fewer than the running
    attempt uses) into productive time and badput by cause. `losses`: times a slice was lost, for
    the time to recover (default: every drop of the capacity samples)."""
    spans = sorted((Span.of(e) for e in events if e["kind"] in ("attempt", "step", "checkpoint")), key=lambda s: s.t0)
    samples = sorted((float(t), int(n)) for t, n in capacity)
    keep = _productive(spans)
    attempts = _attempt_bounds(spans)
    cuts = sorted({start, end, *(t for s in spans for t in (s.t0, s.t1)), *(t for t, _ in samples)})
    cuts = [t for t in cuts if start <= t <= end]
    badput = dict.fromkeys(CAUSES, 0.0)
    productive = allocated = 0.0
    for a, b in zip(cuts, cuts[1:], strict=False):
        mid, dt = (a + b) / 2, b - a
        up = capacity_at(samples, mid)
        span = next((s for s in reversed(spans) if s.t0 <= mid < s.t1 and s.kind != "attempt"), None)
        running = next(((n, t0, t1, k) for n, t0, t1, k in attempts if t0 <= mid < t1), None)
        if running is not None:
            used = running[3]
            held = max(up, used)
            if span is None:
                first = min(
                    (s.t0 for s in spans if s.attempt == running[0] and s.kind != "attempt"), default=running[2]
                )
                cause = "startup" if mid < first else "idle"
            elif span.kind == "checkpoint":
                cause = "checkpoint"
            else:
                cause = "productive" if span in keep else "redone"
            if cause == "productive":
                productive += used * dt
            else:
                badput[cause] += used * dt
            badput["idle"] += (held - used) * dt
        else:
            held = up
            upcoming = next((k for _, t0, _, k in attempts if t0 >= mid), None)
            if upcoming is None:
                cause = "idle" if attempts else "startup"
            else:
                cause = "waiting_for_capacity" if up < upcoming else "startup"
            badput[cause] += held * dt
        allocated += held * dt
    if not losses:
        losses = [t for (t, n), (_, prev) in zip(samples[1:], samples, strict=False) if n < prev]
    return Goodput(
        allocated_slice_s=allocated,
        productive_slice_s=productive,
        badput_slice_s=badput,
        slices_over_time=[{"at": round(t0, 2), "slices": k} for _, t0, _, k in attempts],
        recoveries=[r for t in losses if (r := recovery(spans, t)) is not None],
    )


def recovery(spans: Sequence[Span], loss_at: float) -> dict[str, Any] | None:
    """From a loss at `loss_at` until a step beyond the last one reached by then completes."""
    done = [s for s in spans if s.kind == "step" and s.step is not None]
    reached = max((s.step for s in done if s.t1 <= loss_at), default=0)  # type: ignore[type-var]
    later = [s for s in done if s.t1 > loss_at and s.step is not None and s.step > reached]
    if not later:
        return None
    back = min(later, key=lambda s: s.t1)
    resumed = [s.step for s in done if s.t0 >= loss_at and s.step is not None]
    return {
        "loss_at": round(loss_at, 2),
        "step_reached": reached,
        "resumed_at_step": min(resumed) if resumed else None,
        "time_to_recover_s": round(back.t1 - loss_at, 2),
    }


# pragma: no mutate start (the Ray actor: covered by tests/test_elastic_emulated.py)
class Recorder:
    """Collects rank 0's events and samples the run's whole slices; exports the goodput gauges.

    `count_slices` returns how many whole slices of the run's shape are up (every host alive);
    it runs in this actor every SAMPLE_S seconds."""

    def __init__(self, run: str, count_slices: Callable[[], int]) -> None:
        self.run = run
        self.count_slices = count_slices
        self.start = time.time()
        self.events: list[dict[str, Any]] = []
        self.capacity: list[tuple[float, int]] = []
        self.losses: list[float] = []
        self._stop = threading.Event()
        self._gauges = _gauges()
        threading.Thread(target=self._sample, daemon=True).start()

    def add(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def lost(self, at: float) -> None:
        """A slice loss the platform knows the time of (the emulator's kill; else capacity drops)."""
        self.losses.append(at)

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                n = int(self.count_slices())
                if not self.capacity or self.capacity[-1][1] != n:
                    self.capacity.append((time.time(), n))
                self._export()
            except Exception:  # a sampling hiccup (GCS busy) must not end the recorder
                pass
            self._stop.wait(SAMPLE_S)

    def report(self, end: float | None = None) -> dict[str, Any]:
        result = account(self.events, self.capacity, self.start, end or time.time(), self.losses)
        out = result.to_dict()
        out["notices"] = [e for e in self.events if e["kind"] == "notice"]
        steps = [e for e in self.events if e["kind"] == "step"]
        out["last_step"] = max((e["step"] for e in steps), default=0)
        out["last_step_at"] = max((e["t1"] for e in steps), default=None)
        out["capacity"] = [[round(t, 2), n] for t, n in self.capacity]
        return out

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        out = self.report()
        self._export(out)
        return out

    def _export(self, out: dict[str, Any] | None = None) -> None:
        if self._gauges is None:
            return
        out = out or self.report()
        tags = {"run": self.run}
        ratio, allocated, bad, slices = self._gauges
        ratio.set(out["goodput"], tags=tags)
        allocated.set(out["allocated_slice_s"], tags=tags)
        for cause, value in out["badput_slice_s"].items():
            bad.set(value, tags={**tags, "cause": cause})
        if self.capacity:
            slices.set(self.capacity[-1][1], tags=tags)


def _gauges() -> tuple[Any, ...] | None:
    try:
        from ray.util.metrics import Gauge
    except ImportError:
        return None
    return (
        Gauge("tpuray_train_goodput_ratio", "productive slice time / slice time held", tag_keys=("run",)),
        Gauge("tpuray_train_allocated_slice_seconds", "slice-seconds the run held", tag_keys=("run",)),
        Gauge("tpuray_train_badput_slice_seconds", "slice-seconds lost, by cause", tag_keys=("run", "cause")),
        Gauge("tpuray_train_slices_up", "whole slices of the run's shape up", tag_keys=("run",)),
    )


NAMESPACE, PREFIX = "tpuray", "tpuray-goodput:"


def start_recorder(run: str, count_slices: Callable[[], int]) -> Any:
    """The recorder actor, on the driver's own node (the head: never a TPU host a preemption
    takes away) and with no CPU (it must never wait behind the gang), named so `tpuray local
    status` finds it."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    actor = ray.remote(num_cpus=0, max_restarts=0)(Recorder)
    name = f"{PREFIX}{run}:{time.time():.0f}"
    return actor.options(name=name, namespace=NAMESPACE, scheduling_strategy=here).remote(run, count_slices)


def live_reports(timeout_s: float = 5.0) -> dict[str, dict[str, Any]]:
    """Each running run's goodput so far, by run name (the recorders alive on the cluster)."""
    import ray

    found = {}
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry.get("namespace") != NAMESPACE or not entry["name"].startswith(PREFIX):
            continue
        try:
            actor = ray.get_actor(entry["name"], namespace=NAMESPACE)
            found[entry["name"][len(PREFIX) :].rsplit(":", 1)[0]] = ray.get(actor.report.remote(), timeout=timeout_s)
        except Exception:  # a run that just ended
            continue
    return found


# pragma: no mutate end
