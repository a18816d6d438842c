"""Recovery time after a TPU host dies mid-training, on an emulated cluster (2 x v6e 4x4).

Per trial: start the emulated cluster (8 hosts + head), run ray_apps.train (device
emulated, JaxTrainer, FailureConfig) as its own driver process, and once checkpoint
--kill-after is on storage kill TPU worker 1 of the slice the gang runs on. Measured from
the run's own records (per-rank placement files, per-step wall-clock history):
- kill -> new gang placed (first rank of the new attempt started),
- kill -> training resumed (first step of the new attempt done),
- steps redone (kill-time progress minus the checkpoint the restart resumed from),
- for context, the first attempt's start -> first step (JAX + Ray Data pipeline start-up).

Prints the figures and writes them as JSON. Usage:
    .venv/bin/python benchmarks/bench_recovery.py [--trials 1] [--steps 20]
        [--checkpoint-every 5] [--out /tmp/tpuray-bench-recovery.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from results import write_results  # noqa: E402  (benchmarks/ is the script's folder)

from ray_apps import checkpoints, data, model, train  # noqa: E402
from ray_apps.contracts import TRAIN_MODULE, TrainArgs, last_result  # noqa: E402
from tpuray import catalog  # noqa: E402
from tpuray.local.emulator import EmulatedCluster, SliceSpec, plan_for  # noqa: E402

SHAPE = catalog.lookup("v6e", "4x4")
SLICES = ["v6e-br-0", "v6e-br-1"]
DEFAULT_OUT = "/tmp/tpuray-bench-recovery.json"
BATCH = 32


def _wait(predicate: Any, timeout: float, what: str, proc: subprocess.Popen[bytes]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc.poll() is not None:
            raise RuntimeError(f"the driver exited ({proc.returncode}) while waiting for {what}")
        time.sleep(0.1)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


def trial(steps: int, checkpoint_every: int, kill_after: int, timeout_s: float) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="tpuray-bench-rec-"))
    data.write_synthetic(str(workdir / "data"), rows=SHAPE.hosts * BATCH * steps, fmt="parquet", files=4)
    specs = [SliceSpec(name, "v6e-spot", SHAPE, "spot") for name in SLICES]
    t0 = time.perf_counter()
    emu = EmulatedCluster.start(
        plan_for(specs), state_dir=tempfile.mkdtemp(prefix="tpbr-", dir="/tmp"), name="bench-recovery"
    )
    cluster_start_s = time.perf_counter() - t0
    run_uri = str(workdir / "runs" / "bench")
    log_path = workdir / "train.log"
    try:
        args = TrainArgs.on_shape(
            SHAPE.shape_step,
            device="emulated",
            steps=steps,
            checkpoint_every=checkpoint_every,
            data_uri=str(workdir / "data"),
            storage_uri=str(workdir / "runs"),
            run_name="bench",
            batch_size=BATCH,
            max_failures=2,
            slice_deadline_s=120,
        )
        cmd = [sys.executable, "-m", TRAIN_MODULE, *args.to_argv()]
        env = {
            **os.environ,
            "RAY_ADDRESS": emu.address,
            "RAY_AUTH_MODE": "disabled",
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
            "PYTHONPATH": str(REPO),
        }
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
            try:
                first = _wait(
                    lambda: [p for p in train.read_placements(run_uri) if p["attempt"] == 1], timeout_s, "start", proc
                )
                _wait(
                    lambda: (c := checkpoints.find_latest(run_uri)) and c[1] >= kill_after,
                    timeout_s,
                    f"checkpoint {kill_after}",
                    proc,
                )
                slice_a = next(p["slice"] for p in first if p["rank"] == 0)
                at_kill = checkpoints.find_latest(run_uri)
                killed_at = time.time()
                emu.kill_host(slice_a, 1)
                proc.wait(timeout=timeout_s)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    finally:
        emu.stop()
    output = log_path.read_text(errors="replace")
    summary = last_result(output)
    if summary is None or proc.returncode != 0:
        raise RuntimeError(f"training did not recover (exit {proc.returncode}); log: {log_path}")
    final = model.load_checkpoint(summary["checkpoint"])
    placements = train.read_placements(run_uri)
    second = [p for p in placements if p["attempt"] == 2]
    first_step_2 = min(h["time"] for h in final.history if h["attempt"] == 2)
    steps_before_kill = max((h["step"] for h in final.history if h["attempt"] == 1), default=0)
    first_step_1 = min(h["time"] for h in final.history if h["attempt"] == 1)
    assert at_kill is not None
    return {
        "cluster_start_s": round(cluster_start_s, 1),
        "kill_to_gang_placed_s": round(min(p["time"] for p in second) - killed_at, 1),
        "kill_to_first_step_s": round(first_step_2 - killed_at, 1),
        "first_attempt_start_to_first_step_s": round(first_step_1 - min(p["time"] for p in first), 1),
        "checkpoint_at_kill": at_kill[1],
        "resumed_from": final.attempts[1]["resumed_from"],
        "persisted_steps_redone": max(steps_before_kill - final.attempts[1]["resumed_from"], 0),
        "killed": f"{slice_a}/worker 1",
        "restarted_on": sorted({p["slice"] for p in second}),
        "history_problems": model.step_history_problems(final.history) + model.attempt_problems(final.attempts),
        "train_wall_s": summary["wall_s"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=1, help="each trial starts a fresh cluster (~2.5 min on 2 cores)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--checkpoint-every", type=int, default=5)
    ap.add_argument("--kill-after", type=int, default=5, help="kill once this checkpoint step is on storage")
    ap.add_argument("--timeout-s", type=float, default=300)
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    trials = []
    for i in range(args.trials):
        result = trial(args.steps, args.checkpoint_every, args.kill_after, args.timeout_s)
        print(f"trial {i + 1}: {json.dumps(result)}", flush=True)
        trials.append(result)

    def med(key: str) -> float:
        return round(statistics.median(t[key] for t in trials), 1)

    import ray

    results = {
        "config": {
            "slices": f"{len(SLICES)} x {SHAPE.generation} {SHAPE.topology} ({SHAPE.hosts} hosts x {SHAPE.chips_per_host} chips)",
            "steps": args.steps,
            "checkpoint_every": args.checkpoint_every,
            "kill_after_checkpoint": args.kill_after,
            "batch_per_host": BATCH,
            "trials": args.trials,
        },
        "trials": trials,
        "median": {
            k: med(k)
            for k in (
                "kill_to_gang_placed_s",
                "kill_to_first_step_s",
                "first_attempt_start_to_first_step_s",
                "cluster_start_s",
            )
        },
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "ray": ray.__version__},
    }
    out = Path(args.out)
    write_results(results, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
