"""Driving `python -m ray_apps.train` against an emulated cluster, as a RayJob's entrypoint does:
the argv from the job's contract (ray_apps.contracts.TrainArgs), the environment KubeRay gives
the driver, and the JSON summary it prints last. Shared by the emulated-cluster modules that
run the driver as its own process (chain, fault recovery, autoscaler, watchdog)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ray_apps.contracts import TRAIN_MODULE, TrainArgs, last_result
from tpuray import catalog

REPO = Path(__file__).resolve().parent.parent


def train_argv(shape: catalog.SliceShape, workdir: Path, run_name: str, **fields: Any) -> list[str]:
    """The driver's command line for one slice shape (emulated devices), reading
    workdir/data and writing workdir/runs/<run_name>; `fields` are other TrainArgs fields."""
    args = TrainArgs.on_shape(
        shape.shape_step,
        data_uri=str(workdir / "data"),
        storage_uri=str(workdir / "runs"),
        run_name=run_name,
        device="emulated",
        **fields,
    )
    args.validate()
    return [sys.executable, "-m", TRAIN_MODULE, *args.to_argv()]


def driver_env(address: str) -> dict[str, str]:
    """The driver's environment: the cluster's address, as KubeRay sets RAY_ADDRESS in every Ray
    container, the emulator's auth mode and loopback addresses, and this checkout on the path."""
    return {
        **os.environ,
        "RAY_ADDRESS": address,
        "RAY_AUTH_MODE": "disabled",
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "PYTHONPATH": str(REPO),
    }


def run_driver(argv: list[str], address: str, timeout_s: float = 400) -> tuple[int, dict[str, Any], str]:
    """Run the driver to its end: (exit code, its JSON summary, its output)."""
    done = subprocess.run(argv, env=driver_env(address), cwd=REPO, capture_output=True, text=True, timeout=timeout_s)
    output = done.stdout + "\n" + done.stderr
    return done.returncode, result_of(output), output


def result_of(output: str) -> dict[str, Any]:
    """The JSON summary the driver printed last (contracts.last_result); fails showing the
    output's tail when there is none."""
    summary = last_result(output)
    assert summary is not None, output[-4000:]
    return summary


def wait_for(what: str, check: Any, proc: subprocess.Popen[str] | None = None, timeout_s: float = 120) -> Any:
    """Poll `check()` until it returns something truthy, which is returned; fail when the driver
    (`proc`, if given) exits first or after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the driver exited ({proc.returncode}) before {what}")
        time.sleep(0.25)
    pytest.fail(f"no {what} after {timeout_s:.0f} s")
