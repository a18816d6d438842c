"""The session check that `make test` leaves no process behind (tests/leftovers.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests import leftovers

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def test_a_process_started_by_the_session_is_reported_while_it_runs() -> None:
    token = os.environ[leftovers.SESSION_ENV]
    proc = subprocess.Popen(SLEEPER)
    try:
        (line,) = [ln for ln in leftovers.left_behind(token, grace_s=0) if ln.startswith(f"{proc.pid} ")]
        assert line.endswith("-c import time; time.sleep(60)")
    finally:
        proc.kill()
        proc.wait()
    assert [ln for ln in leftovers.left_behind(token, grace_s=0) if ln.startswith(f"{proc.pid} ")] == []


def test_a_process_without_the_sessions_token_is_not_reported() -> None:
    env = {k: v for k, v in os.environ.items() if k != leftovers.SESSION_ENV}
    proc = subprocess.Popen(SLEEPER, env=env)
    try:
        pids = [p.pid for p in leftovers.carrying(os.environ[leftovers.SESSION_ENV])]
        assert proc.pid not in pids
    finally:
        proc.kill()
        proc.wait()
