"""benchmarks/report.py's demo section: before and after, and `--only demo` leaves other sections alone."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from report import DEMO_HEADING, demo_section, replace_section  # noqa: E402


def _run(wall: float, load: float, phases: dict[str, float]) -> dict:
    return {"ok": True, "wall_s": wall, "load_1min_before": load, "load_1min_after": load, "phases_s": phases}


DEMO = {
    "machine": {"cpus": 2},
    "before": {
        "stack": "dev",
        "commit": "84fb78b",
        "measured_at": "2026-12-01 00:20 UTC",
        "runs": [_run(390.0, 4.1, {"train": 244.0})],
        "best": {**_run(390.0, 4.1, {"train": 244.0}), "hosts": None},
    },
    "after": {
        "stack": "dev",
        "commit": "abc1234",
        "measured_at": "2026-12-01 00:40 UTC",
        "runs": [_run(150.0, 3.0, {"train": 70.0, "serve": 15.0})],
        "best": {
            **_run(150.0, 3.0, {"train": 70.0, "serve": 15.0}),
            "hosts": 5,
            "train_milestones_s": {"driver connected to Ray": 8.0, "job ended": 70.0},
        },
    },
}


def test_the_demo_section_puts_before_and_after_side_by_side_with_the_load() -> None:
    text = "\n".join(demo_section(DEMO, "/tmp/x.json"))
    assert "| train | 244.0 | 70.0 |" in text
    assert "| serve | - | 15.0 |" in text
    assert "| **whole command (wall)** | **390.0** | **150.0** |" in text
    assert "| load average at start | 4.1 | 3.0 |" in text
    assert "| job ended | 70.0 | 62.0 |" in text  # at 70 s, 62 s after the previous milestone


def test_only_demo_replaces_its_section_and_keeps_the_others_byte_for_byte() -> None:
    doc = (
        "# Benchmarks\n\nintro\n\n## Slices\n\nslice table\n\n" + DEMO_HEADING + "\n\nold figures\n\n## Later\n\nkept\n"
    )
    new = replace_section(doc, DEMO_HEADING, [DEMO_HEADING, "", "new figures", ""])
    assert (
        new
        == "# Benchmarks\n\nintro\n\n## Slices\n\nslice table\n\n"
        + DEMO_HEADING
        + "\n\nnew figures\n\n## Later\n\nkept\n"
    )


def test_a_missing_demo_section_is_appended() -> None:
    new = replace_section("# Benchmarks\n\nintro\n", DEMO_HEADING, [DEMO_HEADING, "", "figures"])
    assert new == "# Benchmarks\n\nintro\n\n" + DEMO_HEADING + "\n\nfigures\n"


def _arm(goodput: float, ttr: list[float], slices: list[int], notices: list[dict]) -> dict:
    causes = {"waiting_for_capacity": 10.0, "startup": 20.0, "redone": 3.0, "checkpoint": 1.0, "idle": 2.0}
    return {
        "goodput": goodput,
        "allocated_slice_s": 100.0,
        "productive_slice_s": 64.0,
        "badput_slice_s": causes,
        "time_to_recover_s": ttr,
        "slices_over_time": slices,
        "notice_checkpoints": notices,
        "resumed_from": [40],
        "wall_s": 300.5,
    }


GOODPUT = {
    "seed": 34,
    "steps": 160,
    "step_s": 0.5,
    "checkpoint_every": 20,
    "shape": "v5p 2x2x2 x 2 slices",
    "schedule": [{"at_step": 51, "notice_s": 10.0, "back_after_s": 62.6}],
    "arms": {
        "elastic_with_notice": _arm(0.64, [35.7], [2, 1, 2], [{"step": 48, "within_window": True}]),
        "restart_from_checkpoint": _arm(0.4, [120.5], [2, 2], []),
    },
    "goodput_gain_points": 24.0,
    "goodput_ratio": 1.6,
}


def test_the_goodput_section_puts_both_arms_side_by_side_and_says_by_how_much() -> None:
    from report_goodput import goodput_section

    text = "\n".join(goodput_section(GOODPUT, "/tmp/g.json"))
    assert (
        "| (a) elastic, notice used | 64.0% | 35.7 | 2 → 1 → 2 | 300.5 | 100.0 | 64.0 | 10.0 | 20.0 | 3.0 | 1.0 | 2.0 |"
        in text
    )
    assert "| (b) restart from last checkpoint | 40.0% | 120.5 | 2 → 2 |" in text
    assert "goodput +24.0 points, 1.60x that of restart-from-checkpoint" in text
    assert "checkpoints on the notice at step 48 (inside the window); resumed from [40]" in text
    assert "at step 51: a 10 s notice, back 62.6 s after the kill" in text


def test_a_missing_goodput_result_is_reported_as_not_measured() -> None:
    from report_goodput import goodput_section

    assert goodput_section(None, "/tmp/none.json")[2] == "Not measured (no `/tmp/none.json`)."


JOINT = {
    "machine": {"cpus": 2, "python": "3.11.7", "load_1m": 6.25},
    "substrate_start_s": 21.5,
    "slice_deadline_s": 120.0,
    "first_shape_available": {"created_to_first_step_s": 88.2, "shape": "TPU-V6E:4x4:4:4",
                              "tried": [["TPU-V6E:4x4:4:4", True, 35.7]]},
    "first_shape_out_of_stock": {"created_to_first_step_s": 240.4, "shape": "TPU-V5LITEPOD:4x4:4:4",
                                 "tried": [["TPU-V6E:4x4:4:4", False, 120.0], ["TPU-V5LITEPOD:4x4:4:4", True, 52.8]]},
    "slice_preemption": {"preempted_after_step": 4, "pods_deleted": 4, "preemption_to_next_step_observed_s": 97.3,
                         "preemption_to_next_step_goodput_s": 95.12, "resumed_at_step": 5, "final_step": 16},
}  # fmt: skip


def test_the_joint_section_gives_each_runs_time_with_the_shape_it_got_and_the_chain_it_walked() -> None:
    from report_joint import joint_section

    text = "\n".join(joint_section(JOINT, "/tmp/j.json"))
    assert (
        "| first shape out of stock on every tier (two on-demand v5e slices) | RayJob created → first training step "
        "| 240.4 | TPU-V5LITEPOD:4x4:4:4 | TPU-V6E:4x4:4:4 not granted after 120 s, then TPU-V5LITEPOD:4x4:4:4 "
        "granted after 52.8 s |" in text
    )
    assert "| first shape available (two spot v6e slices in stock) | RayJob created → first training step | 88.2 |" in text
    assert (
        "| one of two v6e slices preempted after step 4 (nodes and pods deleted) | preemption → next step (observed) "
        "| 97.3 | TPU-V6E:4x4:4:4 | resumed at step 5, 4 pods deleted |" in text
    )
    assert "recovery (loss to the first step beyond the one reached) at 95.12 s" in text
    assert "Of the fall-through's 240.4 s, 120 s are the first shape's wait" in text


def test_a_missing_joint_result_is_reported_as_not_measured() -> None:
    from report_joint import joint_section

    assert joint_section(None, "/tmp/none.json")[2] == "Not measured (no `/tmp/none.json`)."
