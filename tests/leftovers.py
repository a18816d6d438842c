"""Processes a test session leaves behind: `make test` must end every emulator host, Ray
process and GCS emulator it started (issue 10).

The session marks its environment with a token (`SESSION_ENV`) before any test runs; every
process it starts inherits it, including the daemons `ray start` detaches (raylet, GCS
server, Ray's workers) and the GCS emulator. At the end, any live process that still
carries the token was left behind. Reading other processes' environments works for the
same user, which is every process a test starts; another user's process is skipped."""

from __future__ import annotations

import os
import time
import uuid

import psutil

SESSION_ENV = "TPURAY_TEST_SESSION"


def mark_session() -> str:
    """Give this process (and so every process it starts) a fresh session token."""
    token = os.environ.get(SESSION_ENV) or uuid.uuid4().hex
    os.environ[SESSION_ENV] = token
    return token


def carrying(token: str) -> list[psutil.Process]:
    """Live processes other than this one whose environment holds `token`."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(SESSION_ENV) == token and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def left_behind(token: str, grace_s: float = 10.0) -> list[str]:
    """'PID command' of each process still carrying `token` after `grace_s` (processes a
    test has just signalled may take a moment to exit)."""
    deadline = time.monotonic() + grace_s
    while True:
        procs = carrying(token)
        if not procs or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    lines = []
    for proc in procs:
        try:
            lines.append(f"{proc.pid} {' '.join(proc.cmdline())[:160]}")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return lines
