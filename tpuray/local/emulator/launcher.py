"""The detached launcher of `tpuray local up`: nodes in a session of their own.

`launch_detached` starts `python -m tpuray.local.emulator launch` in a new session; that process
starts the nodes without Ray's fate-sharing, reports progress as JSON lines on its stdout,
records every PID in the state file, and exits. `tpuray local down` kills exactly those
process trees later.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from tpuray.local.emulator.cluster import BASE_ENV, EmulatedCluster, ProgressFn
from tpuray.local.emulator.plan import EmulatorError, Plan
from tpuray.local.emulator.processes import _tree, kill_processes


def launch_detached(
    plan: Plan,
    state_dir: Path,
    name: str,
    *,
    dashboard: bool = False,
    progress: ProgressFn | None = None,
    timeout_s: float = 300,
    delivery: bool = False,
) -> EmulatedCluster:
    """Start the cluster from a launcher in its own session; return once it is ready.

    The launcher is a separate process so the nodes belong to a fresh session (no
    terminal hang-up or Ctrl-C reaches them) and nothing of this process's state (signal
    handlers, a Ray driver) leaks into them."""
    state_dir.mkdir(parents=True, exist_ok=True)
    plan_file = state_dir / "plan.json"
    plan_file.write_text(json.dumps(plan.as_json()))
    log = open(state_dir / "launcher.log", "wb")  # noqa: SIM115 - handed to the child
    cmd = [sys.executable, "-m", "tpuray.local.emulator", "launch", "--state-dir", str(state_dir), "--name", name]
    if dashboard:
        cmd.append("--dashboard")
    if delivery:
        cmd.append("--delivery")
    env = {**os.environ, **BASE_ENV}
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
        # With delivery the hosts must not find the checkout's ray_apps in their working directory.
        cwd=state_dir if delivery else None,
    )
    log.close()
    deadline = time.monotonic() + timeout_s
    error = None
    try:
        assert proc.stdout is not None
        # Read events, not until EOF: a grandchild could in principle hold the pipe open.
        for raw in proc.stdout:
            event = json.loads(raw)
            if event["event"] == "progress" and progress:
                progress(event["what"], event["done"], event["total"])
            elif event["event"] == "ready":
                break
            elif event["event"] == "error":
                error = event["message"]
                break
            if time.monotonic() > deadline:
                error = f"not ready after {timeout_s:.0f} s"
                break
        else:
            error = f"launcher exited with code {proc.wait()} before the cluster was ready"
    except BaseException:
        _cleanup_failed_launch(proc, state_dir)
        raise
    if error:
        _cleanup_failed_launch(proc, state_dir)
        raise EmulatorError(f"{error}; see {state_dir / 'launcher.log'}")
    proc.wait(timeout=30)
    return EmulatedCluster.attach(state_dir)


def _cleanup_failed_launch(proc: subprocess.Popen[bytes], state_dir: Path) -> None:
    with contextlib.suppress(psutil.Error):
        kill_processes(_tree([psutil.Process(proc.pid)]))
    with contextlib.suppress(EmulatorError):
        EmulatedCluster.attach(state_dir).stop(remove_dir=False)


def _launch_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tpuray.local.emulator launch")
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--dashboard", action="store_true")
    parser.add_argument("--delivery", action="store_true")
    args = parser.parse_args(argv)
    # Progress goes to a private duplicate of the pipe; fds 1 and 2 go to the log so the
    # long-lived Ray processes never inherit (and hold open) the parent's pipe.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    log_fd = os.open(os.path.join(args.state_dir, "launcher.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)

    def emit(**event: Any) -> None:
        out.write(json.dumps(event) + "\n")
        out.flush()

    raw = json.loads(Path(args.state_dir, "plan.json").read_text())
    plan = Plan.from_json(raw)
    # Ray replaces SIGTERM handlers on each node start; make SIGTERM an exception that
    # unwinds through start()'s cleanup instead.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        EmulatedCluster.start(
            plan,
            state_dir=args.state_dir,
            name=args.name,
            detach=True,
            dashboard=args.dashboard,
            delivery=args.delivery,
            progress=lambda what, done, total: emit(event="progress", what=what, done=done, total=total),
        )
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, then re-raised
        emit(event="error", message=f"{type(exc).__name__}: {exc}")
        raise
    emit(event="ready")
    # os._exit: skip interpreter teardown, which could touch Ray's process handles.
    out.close()
    os._exit(0)


def main(argv: list[str]) -> int:
    """`python -m tpuray.local.emulator launch ...` (what launch_detached runs)."""
    if argv[:1] == ["launch"]:
        return _launch_main(argv[1:])
    sys.exit("usage: python -m tpuray.local.emulator launch --state-dir DIR --name NAME")
