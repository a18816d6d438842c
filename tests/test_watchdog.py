"""ray_apps.watchdog: when a rank counts as stuck, who is named, and that the attempt fails."""

from __future__ import annotations

import time

import pytest

from ray_apps.train import parse_args
from ray_apps.watchdog import Beat, StepWatchdog, WatchdogConfig, describe, stuck_ranks, threshold_s

CFG = WatchdogConfig(factor=10, floor_s=60, startup_s=600, poll_s=0.01)


def beat(rank: int, started: int, completed: int) -> Beat:
    return Beat(rank, started, completed, 0.0, "tpu-v6e-train-0", str(rank))


def test_before_the_first_step_the_limit_is_the_startup_allowance() -> None:
    assert threshold_s([], CFG) == 600


def test_fast_steps_are_limited_by_the_floor() -> None:
    assert threshold_s([0.5, 0.4, 0.6], CFG) == 60


def test_slow_steps_are_limited_by_factor_times_the_median() -> None:
    assert threshold_s([9.0, 12.0, 30.0], CFG) == 120


def test_the_rank_that_never_entered_the_step_is_the_straggler() -> None:
    beats = {0: beat(0, 6, 5), 1: beat(1, 5, 5), 2: beat(2, 6, 5), 3: beat(3, 6, 5)}
    missing, behind = stuck_ranks(beats, 4)
    assert missing == []
    assert [b.rank for b in behind] == [1]


def test_when_every_rank_entered_the_step_all_are_named() -> None:
    beats = {r: beat(r, 6, 5) for r in range(4)}
    assert [b.rank for b in stuck_ranks(beats, 4)[1]] == [0, 1, 2, 3]


def test_a_rank_that_never_reported_is_named() -> None:
    missing, behind = stuck_ranks({0: beat(0, 1, 0)}, 2)
    assert missing == [1]
    assert [b.rank for b in behind] == [0]


def test_the_log_line_names_rank_slice_and_worker_of_the_straggler() -> None:
    beats = {0: beat(0, 6, 5), 1: beat(1, 5, 5)}
    assert describe(0, 75.4, 60, beats, 2) == (
        "tpuray watchdog: rank 0 completed no step for 75s (limit 60s = max(factor x median step time, floor)); "
        "stuck: rank 1 (slice tpu-v6e-train-0, worker 1) started step 5, completed 5; the others wait in step 6. "
        "Failing this attempt."
    )


def test_the_log_line_says_when_all_ranks_are_stuck_together() -> None:
    line = describe(1, 90, 60, {0: beat(0, 6, 5), 1: beat(1, 6, 5)}, 2)
    assert line.endswith("; all ranks are stuck in the same step. Failing this attempt.")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def watchdog(clock: FakeClock, fired: list[str]) -> StepWatchdog:
    return StepWatchdog(
        CFG, rank=0, world=1, attempt=1, slice_name="tpu-v6e-train-0", worker_id="0", clock=clock, on_fire=fired.append
    )


def test_a_rank_within_its_limit_is_not_stuck() -> None:
    clock, fired = FakeClock(), []
    dog = watchdog(clock, fired)
    dog.begin(1)
    for step in range(1, 6):
        dog.started(step)
        clock.now += 1.0
        dog.completed(step)
    clock.now += 59
    assert dog.check() is None


def test_a_rank_past_its_limit_is_reported_with_its_placement() -> None:
    clock, fired = FakeClock(), []
    dog = watchdog(clock, fired)
    dog.begin(11)  # resumed after checkpoint 10
    dog.started(11)
    clock.now += 2.0
    dog.completed(11)
    dog.started(12)
    clock.now += 61
    assert dog.check() == (
        "tpuray watchdog: rank 0 completed no step for 61s (limit 60s = max(factor x median step time, floor)); "
        "stuck: rank 0 (slice tpu-v6e-train-0, worker 0) started step 12, completed 11; all ranks are stuck in the "
        "same step. Failing this attempt."
    )


def test_the_thread_fires_once_and_calls_the_failure_hook() -> None:
    clock, fired = FakeClock(), []
    dog = watchdog(clock, fired)
    dog.begin(1)
    clock.now += 601  # no first step within the startup allowance
    dog.start()
    assert dog._thread is not None
    dog._thread.join(timeout=5)
    assert len(fired) == 1 and fired[0].startswith("tpuray watchdog: rank 0 completed no step for 601s (limit 600s")


def test_a_stopped_watchdog_never_fires() -> None:
    clock, fired = FakeClock(), []
    dog = watchdog(clock, fired)
    dog.begin(1)
    dog.stop()
    dog.start()
    clock.now += 10_000
    assert dog._thread is not None
    dog._thread.join(timeout=5)
    assert fired == []


def test_train_cli_takes_the_watchdog_and_stall_flags() -> None:
    args = parse_args(
        ["--data-uri=d", "--storage-uri=s", "--run-name=r", "--watchdog-factor=3", "--watchdog-floor-s=5",
         "--watchdog-startup-s=120", "--stall-once-at-step=4", "--stall-rank=1"]
    )  # fmt: skip
    assert args.watchdog == WatchdogConfig(factor=3, floor_s=5, startup_s=120)
    assert (args.stall_once_at_step, args.stall_rank) == (4, 1)


@pytest.mark.parametrize("flag", ["--watchdog-factor=1", "--watchdog-floor-s=0", "--watchdog-startup-s=-1"])
def test_a_watchdog_that_could_never_or_always_fire_is_refused(flag: str) -> None:
    args = parse_args(["--device=cpu", "--data-uri=d", "--storage-uri=s", "--run-name=r", flag])
    with pytest.raises(ValueError, match="--watchdog-factor must be > 1"):
        args.validate()


class RecordingMetrics:
    """Stands in for StepMetrics (Ray's Gauge needs a running Ray): records every export."""

    def __init__(self) -> None:
        self.progress_calls: list[tuple[int, float, float]] = []
        self.republished = 0

    def progress(self, step: int, at: float, median_s: float) -> None:
        self.progress_calls.append((step, at, median_s))

    def republish(self) -> None:
        self.republished += 1


def test_a_stuck_rank_keeps_exporting_its_last_step_and_its_time() -> None:
    """Ray drops a gauge that is not set again within an export interval; the watchdog thread
    re-sets the stuck rank's old values, so `time() - last step` keeps growing for the alert."""
    clock, fired, metrics = FakeClock(), [], RecordingMetrics()
    dog = StepWatchdog(
        CFG, rank=1, world=4, attempt=1, slice_name="tpu-v6e-train-0", worker_id="1",
        metrics=metrics, clock=clock, on_fire=fired.append,  # type: ignore[arg-type]
    )  # fmt: skip
    dog.begin(1)
    dog.started(1)
    clock.now += 2.0
    dog.completed(1)  # step 1 at t=1002, median 2 s
    dog.started(2)  # ... and never completes
    clock.now += 30  # within the 60 s floor: the thread polls without firing
    dog.start()
    deadline = time.monotonic() + 5
    while metrics.republished < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    dog.stop()
    assert metrics.republished >= 3
    assert set(metrics.progress_calls[1:]) == {(1, 1002.0, 2.0)}
    assert fired == []
