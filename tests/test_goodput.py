"""Goodput accounting (ray_apps/goodput.py) on literal timelines: every slice-second a run held
lands in exactly one bucket, and the figures are worked out by hand in each test."""

from __future__ import annotations

from typing import Any

import pytest

from ray_apps import goodput


def ev(kind: str, group: float, t0: float, t1: float, slices: int, step: int | None = None) -> dict[str, Any]:
    return {"kind": kind, "attempt": 1, "group": group, "t0": t0, "t1": t1, "slices": slices, "step": step}


def test_one_attempt_on_one_slice_splits_startup_steps_checkpoint_and_the_idle_end() -> None:
    events = [
        ev("attempt", 1, 1, 1, 1),
        ev("step", 1, 2, 3, 1, 1),
        ev("step", 1, 3, 4, 1, 2),
        ev("checkpoint", 1, 4, 5, 1, 2),
    ]
    got = goodput.account(events, [(0, 1)], start=0, end=10)
    assert got.allocated_slice_s == 10
    assert got.productive_slice_s == 2
    assert got.badput_slice_s == {"waiting_for_capacity": 0, "startup": 2, "redone": 0, "checkpoint": 1, "idle": 5}
    assert got.ratio == 0.2


# Two slices until a loss at t=10, one until t=20, two again: attempt A (2 slices) runs steps 1-4
# and checkpoints at step 2; attempt B (2 slices, after the slice is back) redoes 3-4 and runs 5.
LOSS_AND_RETURN = [
    ev("attempt", 0, 0, 0, 2),
    ev("step", 0, 0, 2, 2, 1),
    ev("step", 0, 2, 4, 2, 2),
    ev("checkpoint", 0, 4, 5, 2, 2),
    ev("step", 0, 5, 7, 2, 3),
    ev("step", 0, 7, 9, 2, 4),
    ev("attempt", 21, 21, 21, 2),
    ev("step", 21, 22, 24, 2, 3),
    ev("step", 21, 24, 26, 2, 4),
    ev("step", 21, 26, 28, 2, 5),
]
CAPACITY = [(0, 2), (10, 1), (20, 2)]


def test_a_restart_that_waits_for_the_lost_slice_counts_waiting_and_redone_steps() -> None:
    got = goodput.account(LOSS_AND_RETURN, CAPACITY, start=0, end=28)
    # [0,10) 2 slices, [10,20) 1, [20,28) 2
    assert got.allocated_slice_s == 46
    # steps 1, 2 of A and 3, 4, 5 of B, 2 s on 2 slices each
    assert got.productive_slice_s == 20
    assert got.badput_slice_s == {
        "waiting_for_capacity": 10,  # [10,20): one slice up, B needs two
        "startup": 6,  # [9,10) and [20,22) on two slices
        "redone": 8,  # A's steps 3 and 4
        "checkpoint": 2,
        "idle": 0,
    }
    assert got.productive_slice_s + sum(got.badput_slice_s.values()) == got.allocated_slice_s


def test_the_time_to_recover_runs_from_the_loss_to_the_first_step_past_the_one_reached() -> None:
    got = goodput.account(LOSS_AND_RETURN, CAPACITY, start=0, end=28)
    assert got.recoveries == [{"loss_at": 10, "step_reached": 4, "resumed_at_step": 3, "time_to_recover_s": 18}]


def test_slices_up_beyond_what_the_attempt_uses_are_idle() -> None:
    events = [ev("attempt", 0, 0, 0, 1), ev("step", 0, 0, 4, 1, 1)]
    got = goodput.account(events, [(0, 2)], start=0, end=4)
    assert (got.allocated_slice_s, got.productive_slice_s, got.badput_slice_s["idle"]) == (8, 4, 4)


def test_the_slice_count_over_time_lists_every_worker_group_even_with_a_repeated_attempt_number() -> None:
    events = [ev("attempt", 0, 0, 0, 2), ev("attempt", 5, 5, 5, 1), ev("attempt", 9, 9, 9, 2)]
    got = goodput.account(events, [(0, 2)], start=0, end=10)
    assert got.slices_over_time == [{"at": 0, "slices": 2}, {"at": 5, "slices": 1}, {"at": 9, "slices": 2}]


def test_capacity_before_the_first_sample_is_the_first_sample() -> None:
    assert goodput.capacity_at([(5, 2), (8, 1)], 1) == 2
    assert goodput.capacity_at([(5, 2), (8, 1)], 8) == 1
    assert goodput.capacity_at([], 3) == 0


def test_the_report_rounds_and_names_every_cause() -> None:
    got = goodput.account([ev("attempt", 0, 0, 0, 1), ev("step", 0, 0, 1, 1, 1)], [(0, 1)], start=0, end=3)
    out = got.to_dict()
    assert out["goodput"] == pytest.approx(0.3333)
    assert sorted(out["badput_slice_s"]) == sorted(goodput.CAUSES)
