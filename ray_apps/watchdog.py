"""Fail loud when a training gang hangs: a step watchdog and the progress metrics.

A TPU job that hangs does not fail: every rank of a synchronous data-parallel gang waits in
the step's all-reduce for the one that never arrives, and the slices stay billed. Each Train
worker therefore runs a `StepWatchdog` thread. When its rank completes no step within
`max(factor x median step time, floor)` (before the attempt's first step: `startup`, which
covers compilation), the watchdog

1. reads every rank's progress from the run's `ProgressBoard` actor and names the stuck
   ranks with their slice (TPU_NAME) and worker id (TPU_WORKER_ID): the ranks that never
   *started* the step the others are waiting in, or every rank when all of them started it
   (a collective that hangs for all);
2. prints one `tpuray watchdog:` line to the worker's log, and
3. ends the worker process, which fails the attempt: Ray Train's FailureConfig restarts
   the gang from the latest checkpoint, or the run ends when restarts are spent.

The same progress is exported as Ray application metrics (`StepMetrics`, prefixed ray_ by
Ray's exporter) for the TpurayHungGangStepStalled alert (tpuray/observe/rules.py), which
uses the same threshold. Ray exports a gauge only in the export interval after it was set:
the worker's OpenTelemetry recorder clears its gauge observations at each export (Ray's
metrics developer guide, "Recording mechanisms": the gauge callback "collects all stored
values and clears the map to prevent stale data"; Ray 2.60.0 `src/ray/observability/
open_telemetry_metric_recorder.cc`), and the node's agent drops a gauge not refreshed within
two intervals (`python/ray/_private/telemetry/open_telemetry_metric_recorder.py`). A rank
stuck in a step sets nothing, so its series would vanish exactly when the alert needs it:
the watchdog thread, which runs beside the stuck training thread, therefore re-sets the
last values on every poll, and `time() - last step` keeps growing in Prometheus.
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

BOARD_PREFIX = "tpuray-progress-"
LOG_PREFIX = "tpuray watchdog: "


@dataclass(frozen=True)
class WatchdogConfig:
    factor: float = 10.0
    floor_s: float = 900.0
    startup_s: float = 1800.0
    poll_s: float = 1.0

    def validate(self) -> None:
        if self.factor <= 1 or self.floor_s <= 0 or self.startup_s <= 0 or self.poll_s <= 0:
            raise ValueError("--watchdog-factor must be > 1 and --watchdog-floor-s/--watchdog-startup-s > 0")


@dataclass(frozen=True)
class Beat:
    """One rank's progress in one attempt: steps it started and completed, and where it runs."""

    rank: int
    started: int
    completed: int
    time: float
    slice: str | None
    worker_id: str | None

    def where(self) -> str:
        return f"rank {self.rank} (slice {self.slice}, worker {self.worker_id})"


def threshold_s(step_times: list[float], cfg: WatchdogConfig) -> float:
    """How long a rank may go without completing a step: max(factor x median, floor)."""
    if not step_times:
        return cfg.startup_s
    return max(cfg.factor * statistics.median(step_times), cfg.floor_s)


def stuck_ranks(beats: dict[int, Beat], world: int) -> tuple[list[int], list[Beat]]:
    """(ranks that never reported, ranks behind the others). When every rank reported and all
    started the same step, all of them are stuck in it together."""
    missing = [r for r in range(world) if r not in beats]
    if not beats:
        return missing, []
    lowest = min(b.started for b in beats.values())
    behind = [b for b in beats.values() if b.started == lowest]
    return missing, sorted(behind, key=lambda b: b.rank)


def describe(rank: int, waited_s: float, limit_s: float, beats: dict[int, Beat], world: int) -> str:
    """The one log line the watchdog prints before it fails the attempt."""
    missing, behind = stuck_ranks(beats, world)
    parts = [b.where() + f" started step {b.started}, completed {b.completed}" for b in behind]
    parts += [f"rank {r} (never reported)" for r in missing]
    lead = max((b.started for b in beats.values()), default=0)
    everyone = not missing and len(behind) == len(beats)
    who = "all ranks are stuck in the same step" if everyone else f"the others wait in step {lead}"
    return (
        f"{LOG_PREFIX}rank {rank} completed no step for {waited_s:.0f}s (limit {limit_s:.0f}s = "
        f"max(factor x median step time, floor)); stuck: {'; '.join(parts)}; {who}. Failing this attempt."
    )


# ---------------------------------------------------------------- the shared board (a Ray actor)


class _Board:
    """Latest Beat per (attempt, rank). Tiny and CPU-less: ranks send fire-and-forget beats."""

    def __init__(self) -> None:
        self.beats: dict[int, dict[int, dict[str, Any]]] = {}

    def beat(self, attempt: int, beat: dict[str, Any]) -> None:
        self.beats.setdefault(attempt, {})[beat["rank"]] = beat

    def snapshot(self, attempt: int) -> dict[int, dict[str, Any]]:
        return dict(self.beats.get(attempt, {}))


def board_name(run_name: str) -> str:
    return BOARD_PREFIX + run_name


def create_board(run_name: str) -> Any:
    """The run's ProgressBoard, owned by the driver (it dies with the driver)."""
    import ray

    board_cls = ray.remote(num_cpus=0, max_restarts=-1)(_Board)
    return board_cls.options(name=board_name(run_name), get_if_exists=True).remote()


# ---------------------------------------------------------------- metrics


class StepMetrics:
    """The ray_tpuray_train_* gauges of tpuray/data/metrics.yaml, tagged run/rank/slice/worker."""

    def __init__(self, run: str, rank: int, slice_name: str | None, worker_id: str | None):
        from ray.util.metrics import Gauge

        keys = ("run", "rank", "slice", "worker_id")
        self.tags = {"run": run, "rank": str(rank), "slice": slice_name or "", "worker_id": worker_id or ""}
        self.step = Gauge("tpuray_train_step", "last completed step of this rank", tag_keys=keys)
        self.last = Gauge(
            "tpuray_train_last_step_timestamp_seconds", "unix time of the rank's last step", tag_keys=keys
        )
        self.median = Gauge("tpuray_train_step_seconds_median", "median step time in this attempt", tag_keys=keys)
        self.checkpoint = Gauge(
            "tpuray_train_last_checkpoint_timestamp_seconds", "unix time of the last checkpoint", tag_keys=keys
        )

        self.checkpoint_at: float | None = None

    def progress(self, step: int, at: float, median_s: float) -> None:
        self.step.set(step, tags=self.tags)
        self.last.set(at, tags=self.tags)
        self.median.set(median_s, tags=self.tags)

    def checkpointed(self, at: float) -> None:
        self.checkpoint_at = at
        self.checkpoint.set(at, tags=self.tags)

    def republish(self) -> None:
        """Set the checkpoint gauge again (Ray drops gauges that are not re-set)."""
        if self.checkpoint_at is not None:
            self.checkpoint.set(self.checkpoint_at, tags=self.tags)


# ---------------------------------------------------------------- the per-rank watchdog


class StepWatchdog:
    """Runs in each Train worker. Call started(step) before a step and completed(step) after."""

    def __init__(
        self,
        cfg: WatchdogConfig,
        *,
        rank: int,
        world: int,
        attempt: int,
        slice_name: str | None = None,
        worker_id: str | None = None,
        board: Any = None,
        metrics: StepMetrics | None = None,
        on_fire: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.cfg = cfg
        self.rank, self.world, self.attempt = rank, world, attempt
        self.slice, self.worker_id = slice_name, worker_id
        self.board, self.metrics = board, metrics
        self.on_fire = on_fire or _fail_attempt
        self.clock = clock
        self.step_times: deque[float] = deque(maxlen=200)
        self.started_step = self.completed_step = 0
        self.last_progress = clock()
        self.fired: str | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()  # progress is written by the loop, read by the thread
        self._thread: threading.Thread | None = None

    # progress, from the training loop
    def begin(self, first_step: int) -> None:
        """The attempt starts at first_step (after a resume, the checkpoint's step + 1)."""
        self.started_step = self.completed_step = first_step - 1
        self.last_progress = self.clock()
        self._report()

    def started(self, step: int) -> None:
        self.started_step = step
        self._beat()

    def completed(self, step: int) -> None:
        now = self.clock()
        with self._lock:
            self.step_times.append(now - self.last_progress)
            self.completed_step, self.last_progress = step, now
        self._report()

    def _median(self) -> float | None:
        times = self._times()
        return statistics.median(times) if times else None

    def _times(self) -> list[float]:
        with self._lock:
            return list(self.step_times)

    def limit_s(self) -> float:
        return threshold_s(self._times(), self.cfg)

    def _report(self) -> None:
        self._beat()
        self._publish()

    def _publish(self) -> None:
        """The progress gauges, with the last completed step (also from the watchdog thread,
        so a stuck rank's series stays in Prometheus with its old timestamp)."""
        if self.metrics is not None:
            median = self._median()
            with self._lock:
                step, at = self.completed_step, self.last_progress
            # Before the first step the median is unknown: export the startup limit divided by
            # the factor the alert multiplies with, so alert and watchdog agree on the limit.
            self.metrics.progress(step, at, median if median is not None else self.limit_s() / self.cfg.factor)

    def _beat(self) -> None:
        if self.board is None:
            return
        beat = Beat(self.rank, self.started_step, self.completed_step, self.clock(), self.slice, self.worker_id)
        try:
            self.board.beat.remote(self.attempt, asdict(beat))
        except Exception as err:  # bookkeeping never fails a step
            print(f"[rank{self.rank}] watchdog beat failed: {err}", file=sys.stderr)

    # the check
    def check(self) -> str | None:
        """The log line if the rank is overdue, else None."""
        waited, limit = self.clock() - self.last_progress, self.limit_s()
        if waited <= limit:
            return None
        beats: dict[int, Beat] = {}
        if self.board is not None:
            import ray

            try:
                raw = ray.get(self.board.snapshot.remote(self.attempt), timeout=10)
                beats = {int(r): Beat(**b) for r, b in raw.items()}
            except Exception as err:
                print(f"[rank{self.rank}] watchdog could not read the board: {err}", file=sys.stderr)
        if self.rank not in beats:
            beats[self.rank] = Beat(
                self.rank, self.started_step, self.completed_step, self.clock(), self.slice, self.worker_id
            )
        return describe(self.rank, waited, limit, beats, self.world)

    def start(self) -> StepWatchdog:
        self._thread = threading.Thread(target=self._run, name="tpuray-step-watchdog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _republish(self) -> None:
        try:
            self._publish()
            if self.metrics is not None:
                self.metrics.republish()
        except Exception as err:  # metrics are for people; never stop the watchdog over them
            print(f"[rank{self.rank}] could not export step metrics: {err}", file=sys.stderr)

    def _run(self) -> None:
        while not self._stop.wait(self.cfg.poll_s):
            self._republish()
            line = self.check()
            if line is not None and not self._stop.is_set():
                self.fired = line
                self.on_fire(line)
                return


def _fail_attempt(line: str) -> None:
    """Print the line and end this worker process: Ray Train sees the worker die and fails
    the attempt. A stuck rank cannot raise from its own training thread (it is blocked in a
    collective or in user code), so the process ends from here."""
    print(line, file=sys.stderr, flush=True)
    print(line, flush=True)
    os._exit(1)
