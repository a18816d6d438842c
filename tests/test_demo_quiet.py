"""The quiet demo: job output goes to the log file, the terminal gets one live status line (no Ray cluster)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.text import Text

from tpuray.commands.demo import job_console


class Status:
    def __init__(self) -> None:
        self.shown: list[str] = []

    def update(self, text: Text) -> None:
        self.shown.append(text.plain)  # plain text, never markup: a line may hold `[...]`


def test_job_lines_go_to_the_log_and_progress_to_the_status_line() -> None:
    terminal, log, status = io.StringIO(), io.StringIO(), Status()
    with job_console(Console(file=terminal), log, False, status, 40) as out:
        out.print("submitted raysubmit_abc to http://127.0.0.1:8265")
        out.print("2026-11-30 22:04:46 INFO logging_progress.py:231 -- ReadFilesParquetV2: 0/1", markup=False)
        out.print("step 20 loss 0.61110 samples/s 57", markup=False)
        out.print("serving: app [/v1] RUNNING")
    assert terminal.getvalue() == ""
    assert "ReadFilesParquetV2: 0/1" in log.getvalue()
    assert status.shown == [
        "submitted raysubmit_abc; waiting for the slice's workers",
        "training: step 20 of 40, loss 0.6111, 57 samples/s",
        "serving: serving: app [/v1] RUNNING",
    ]


def test_verbose_streams_to_the_terminal() -> None:
    terminal, log = io.StringIO(), io.StringIO()
    with job_console(Console(file=terminal), log, True, Status(), 40) as out:
        out.print("step 20 loss 0.61110 samples/s 57", markup=False)
    assert "step 20 loss 0.61110" in terminal.getvalue()
    assert log.getvalue() == ""
