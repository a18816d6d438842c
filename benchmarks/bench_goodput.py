"""Goodput and time to recover under one seeded schedule of preemptions and returns, side by side:
(a) elastic training with the preemption notice used, (b) the behaviour before it: a fixed
two-slice run that restarts from its last periodic checkpoint once both slices are whole again.

Both arms run, one after the other, the same ray_apps.train job (device emulated, two v5p 2x2x2
slices of 2 hosts each, `--min-step-s` so that a step lasts about as long as a real TPU step)
on a fresh emulated cluster, under the same schedule drawn from --seed: for each event, once the
run has reached step `at_step` the slice holding rank 0 gets a notice of `notice_s` (its Ray
nodes drained with that deadline, as the worker pods' preStop hook does on GKE), is killed at the
deadline, and comes back `back_after_s` seconds later (tpuray/local/emulator/preemption.py). The
figures are the runs' own summaries (ray_apps/goodput.py): goodput = productive slice-seconds /
slice-seconds held, badput by cause, and the time from each loss until the run first completes a
step beyond the one it had reached.

Usage:
    .venv/bin/python benchmarks/bench_goodput.py [--seed 34] [--steps 320] [--checkpoint-every 20]
        [--events 2] [--out /tmp/tpuray-bench-goodput.json]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from results import write_results  # noqa: E402  (benchmarks/ is the script's folder)

from ray_apps import data, goodput, train  # noqa: E402
from ray_apps.contracts import TRAIN_MODULE, TrainArgs, last_result  # noqa: E402
from tpuray import catalog  # noqa: E402
from tpuray.local.emulator import EmulatedCluster, SliceSpec, plan_for, preemption  # noqa: E402

SHAPE = catalog.lookup("v5p", "2x2x2")
SLICES = ["v5p-gp-0", "v5p-gp-1"]
DEFAULT_OUT = "/tmp/tpuray-bench-goodput.json"
BATCH, STEP_S = 16, 0.5
ARMS = {
    "elastic_with_notice": {"min_slices": 1, "preemption_notice": "checkpoint"},
    "restart_from_checkpoint": {"preemption_notice": "ignore"},
}


def schedule(seed: int, steps: int, events: int) -> list[dict[str, Any]]:
    """`events` preemptions, each in its own stretch of the run's first half, drawn from `seed`:
    the step it comes at (or later: never before the run trains again after the previous
    return), the notice (GKE's spot window is 30 s; scaled down with the emulator's short
    steps) and how long the slice stays away."""
    rng = random.Random(seed)
    span = (steps // 2) // (events + 1)
    return [
        {
            "at_step": rng.randrange(span * (i + 1), span * (i + 1) + span // 2),
            "notice_s": rng.choice([10.0, 12.0, 15.0]),
            # Longer than a worker group's start here (about a minute on 2 shared cores).
            "back_after_s": round(rng.uniform(90, 120), 1),
        }
        for i in range(events)
    ]


def _wait(predicate: Any, timeout: float, what: str, proc: subprocess.Popen[bytes]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc.poll() is not None:
            raise RuntimeError(f"the driver exited ({proc.returncode}) while waiting for {what}")
        time.sleep(0.2)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


def _training_past(name: str, step: int, since: float) -> bool:
    """The run has completed `step` and is training in a worker group started after `since` (the
    last return), as its goodput recorder shows (what `tpuray local status` reads)."""
    report = goodput.live_reports().get(name) or {}
    groups = report.get("slices_over_time") or []
    return (
        report.get("last_step", 0) >= step
        and bool(groups)
        and groups[-1]["at"] >= since
        and (report.get("last_step_at") or 0) > groups[-1]["at"]
    )


def arm(name: str, events: list[dict[str, Any]], steps: int, checkpoint_every: int) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix=f"tpuray-bench-gp-{name}-"))
    data.write_synthetic(str(workdir / "data"), rows=2 * SHAPE.hosts * BATCH * steps, fmt="parquet", files=4)
    specs = [SliceSpec(s, "v5p-spot", SHAPE, "spot") for s in SLICES]
    emu = EmulatedCluster.start(plan_for(specs), state_dir=tempfile.mkdtemp(prefix="tpgp-", dir="/tmp"), name=name)
    run_uri = str(workdir / "runs" / name)
    log_path = workdir / "train.log"
    happened: list[dict[str, Any]] = []
    try:
        emu.connect()
        args = TrainArgs.on_shape(
            SHAPE.shape_step,
            device="emulated",
            slices=2,
            steps=steps,
            checkpoint_every=checkpoint_every,
            data_uri=str(workdir / "data"),
            storage_uri=str(workdir / "runs"),
            run_name=name,
            batch_size=BATCH,
            min_step_s=STEP_S,
            resize_interval_s=5,
            max_failures=3,
            slice_deadline_s=300,  # the fixed run waits for its second slice to come back
            **ARMS[name],
        )
        args.validate()
        env = {
            **os.environ,
            "RAY_ADDRESS": emu.address,
            "RAY_AUTH_MODE": "disabled",
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
            "PYTHONPATH": str(REPO),
        }
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", TRAIN_MODULE, *args.to_argv()], env=env, cwd=REPO, stdout=log, stderr=log
            )
            try:
                since = 0.0
                for event in events:
                    # At the step, or later while training again after the previous return.
                    _wait(lambda e=event, t=since: _training_past(name, e["at_step"], t), 900, "the step", proc)
                    placed = [p for p in train.read_placements(run_uri) if p["rank"] == 0]
                    victim = max(placed, key=lambda p: p["time"])["slice"]  # the running group's rank 0
                    times = preemption.preempt_slice(emu, victim, event["notice_s"])
                    time.sleep(max(0.0, times["killed"] + event["back_after_s"] - time.time()))
                    times["returned"] = since = preemption.return_slice(emu, victim)
                    happened.append({**event, "slice": victim, **{k: round(v, 2) for k, v in times.items()}})
                proc.wait(timeout=900)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    finally:
        import ray

        ray.shutdown()
        emu.stop()
    summary = last_result(log_path.read_text(errors="replace"))
    if summary is None or proc.returncode != 0 or summary.get("error"):
        raise RuntimeError(f"arm {name} failed (exit {proc.returncode}); log: {log_path}")
    report = summary["goodput"]
    return {
        "goodput": report["goodput"],
        "allocated_slice_s": report["allocated_slice_s"],
        "productive_slice_s": report["productive_slice_s"],
        "badput_slice_s": report["badput_slice_s"],
        "time_to_recover_s": [r["time_to_recover_s"] for r in report["recoveries"]],
        "recoveries": report["recoveries"],
        "slices_over_time": [s["slices"] for s in summary["slices_over_time"]],
        "notice_checkpoints": [{"step": n["step"], "within_window": n["within_window"]} for n in report["notices"]],
        "resumed_from": [a["resumed_from"] for a in summary["attempts"][1:]],
        "wall_s": summary["wall_s"],
        "events": happened,
        "log": str(log_path),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=34)
    p.add_argument("--steps", type=int, default=320)
    p.add_argument("--checkpoint-every", type=int, default=20)
    p.add_argument("--events", type=int, default=2, help="preemptions (each followed by the slice's return)")
    p.add_argument("--out", default=DEFAULT_OUT)
    a = p.parse_args(argv)
    events = schedule(a.seed, a.steps, a.events)
    print(f"schedule (seed {a.seed}): {events}", flush=True)
    arms = {name: arm(name, events, a.steps, a.checkpoint_every) for name in ARMS}
    el, rs = arms["elastic_with_notice"], arms["restart_from_checkpoint"]
    for name, r in arms.items():
        print(
            f"{name:24s} goodput {r['goodput']:.1%}  time to recover {r['time_to_recover_s']} s  "
            f"slices over time {r['slices_over_time']}  badput {r['badput_slice_s']}",
            flush=True,
        )
    gain = el["goodput"] - rs["goodput"]
    ratio = el["goodput"] / rs["goodput"] if rs["goodput"] else float("inf")
    print(f"elastic with the notice: goodput {gain * 100:+.1f} points ({ratio:.2f}x) over restart-from-checkpoint")
    results = {
        "benchmark": "bench_goodput",
        "seed": a.seed,
        "steps": a.steps,
        "checkpoint_every": a.checkpoint_every,
        "note": "both arms measured in this one invocation, one after the other, on fresh emulated clusters",
        "step_s": STEP_S,
        "shape": f"{SHAPE.generation} {SHAPE.topology} x 2 slices",
        "schedule": events,
        "arms": arms,
        "goodput_gain_points": round(gain * 100, 1),
        "goodput_ratio": round(ratio, 2),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    write_results(results, Path(a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
