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
