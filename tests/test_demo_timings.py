"""What the demo prints about its own time: phases, then the training job's and Serve's milestones."""

from __future__ import annotations

import sys
from pathlib import Path

from tpuray.commands.demo import timing_lines

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_demo import parse_phase_line  # noqa: E402

TIMINGS = {
    "phases_s": {
        "doctor": 2.4,
        "preview": 3.6,
        "emulator up": 18.2,
        "train": 61.0,
        "serve": 14.5,
        "emulator down": 2.1,
    },
    "total_s": 101.8,
    "train_milestones_s": {"bundle fetched, driver started": 4.2, "first checkpoint": 41.0, "job ended": 60.1},
    "serve_milestones_s": {"config accepted": 0.3, "applications RUNNING": 12.4, "answered": 13.0},
    "cpus": 2,
    "load_average_at_end": [3.52, 2.9, 2.1],
}


def test_the_demo_ends_with_its_phase_times_and_the_milestones_of_its_jobs() -> None:
    assert timing_lines(TIMINGS) == [
        "phase times: doctor 2 s, preview 4 s, emulator up 18 s, train 61 s, serve 14 s, emulator down 2 s",
        "  training job, seconds after submission: bundle fetched, driver started 4; first checkpoint 41; job ended 60",
        "  serving, seconds after submission: config accepted 0; applications RUNNING 12; answered 13",
        "total 102 s (2 CPUs, load average 3.5)",
    ]


def test_the_benchmark_reads_the_phase_line_of_a_demo_that_wrote_no_timings_file() -> None:
    line = "phase times: doctor 3 s, preview 4 s, emulator up 39 s, train 244 s, serve 30 s, emulator down 2 s"
    assert parse_phase_line(f"...\n{line}\ntotal 322 s\n") == {
        "doctor": 3.0,
        "preview": 4.0,
        "emulator up": 39.0,
        "train": 244.0,
        "serve": 30.0,
        "emulator down": 2.0,
    }
