"""Time from "a step of the capacity chain has no capacity" to "the gang runs on the next step",
on emulated slices (docs/capacity.md).

One emulated cluster (a v6e 4x4 slice and a v5e 4x4 slice) for every trial. Before the trials,
TPU worker 1 of the v6e slice is killed: the v6e step has no whole slice (a spot stockout or
preemption), the v5e step has one. Per trial, ray_apps.train runs as its own driver process
with the chain [v6e 4x4, v5e 4x4] and --slice-deadline-s D; measured from the driver's start to
the new gang running (every rank of attempt 1 recorded its placement on the v5e slice, from the
run's own placement files). The target is D + 30 s: the driver waits D on the empty step, then
JaxTrainer must have the gang placed within 30 s.

From zero, with Ray's own autoscaler v2 and KubeRay provider adding the fallback shape's
slices, the chain is measured on the joint substrate (benchmarks/bench_joint_substrate.py, its
fall-through run).

Serve is measured by benchmarks/bench_serve_chain.py: its fallback is Ray's fallback_strategy
on one replica actor, which Ray resolves at scheduling time with no deadline of ours.

Prints the figures (median, min, max) and writes them as JSON. Usage:
    .venv/bin/python benchmarks/bench_chain.py [--trials 3] [--deadline 10]
        [--out /tmp/tpuray-bench-chain.json]
"""

from __future__ import annotations

import argparse
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

from ray_apps import data, train  # noqa: E402
from ray_apps.contracts import TRAIN_MODULE, TrainArgs  # noqa: E402
from tpuray import catalog  # noqa: E402
from tpuray.local.emulator import EmulatedCluster, SliceSpec, plan_for  # noqa: E402

V6E = catalog.lookup("v6e", "4x4")
V5E = catalog.lookup("v5e", "4x4")
DEFAULT_OUT = "/tmp/tpuray-bench-chain.json"
BATCH, STEPS = 16, 2


def train_trial(cluster: EmulatedCluster, workdir: Path, index: int, deadline_s: float) -> float:
    """Seconds from the driver's start to every rank of attempt 1 placed on the chain's second
    shape (v5e 4x4)."""
    first, fallback = V6E, V5E
    expect = fallback.pod_type
    run_name = f"chain-{index}"
    args = TrainArgs.on_shape(
        first.shape_step,
        device="emulated",
        fallback_shapes=fallback.shape_step.to_flag(),
        slice_deadline_s=deadline_s,
        steps=STEPS,
        checkpoint_every=1,
        batch_size=BATCH,
        data_uri=str(workdir / "data"),
        storage_uri=str(workdir / "runs"),
        run_name=run_name,
    )
    argv = [sys.executable, "-m", TRAIN_MODULE, *args.to_argv()]
    env = {**os.environ, "RAY_ADDRESS": cluster.address, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(REPO)}
    run_uri = str(workdir / "runs" / run_name)
    start = time.time()
    log = open(workdir / f"{run_name}.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(argv, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    try:
        while True:
            placed = [p for p in train.read_placements(run_uri) if p["attempt"] == 1]
            if len(placed) == first.hosts:
                assert {p["pod_type"] for p in placed} == {expect}, placed
                return max(p["time"] for p in placed) - start
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the driver exited ({proc.returncode}) before the gang was placed; see {workdir / run_name}.log"
                )
            if time.time() - start > deadline_s + 300:
                raise TimeoutError("no gang on the fallback shape within the deadline + 300 s")
            time.sleep(0.1)
    finally:
        proc.wait(timeout=300)
        log.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--deadline", type=float, default=10.0, help="--slice-deadline-s of the driver")
    p.add_argument("--out", default=DEFAULT_OUT)
    args = p.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="tpuray-bench-chain-"))
    data.write_synthetic(str(workdir / "data"), rows=V5E.hosts * BATCH * STEPS, fmt="parquet", files=2)
    specs = [
        SliceSpec("v6e-bc-0", "train", V6E, "spot", tier="spot"),
        SliceSpec("v5e-bc-0", "train", V5E, "on-demand", tier="on-demand"),
    ]
    state_dir = tempfile.mkdtemp(prefix="tpbc-", dir="/tmp")
    cluster = EmulatedCluster.start(plan_for(specs), state_dir=state_dir, name="bench-chain")
    try:
        cluster.kill_host("v6e-bc-0", 1)  # the v6e step has no whole slice from here on
        time.sleep(15)  # Ray notices the dead host (its view of the slice drops to 3 hosts)
        seconds = [round(train_trial(cluster, workdir, i, args.deadline), 2) for i in range(args.trials)]
    finally:
        cluster.stop()
    results: dict[str, Any] = {
        "benchmark": "chain",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load_1m": os.getloadavg()[0]},
        "deadline_s": args.deadline,
        "train_seconds": seconds,
        "train_median_s": statistics.median(seconds),
        "target_s": args.deadline + 30,
    }
    print(
        f"train: empty step -> gang on the fallback shape: median {statistics.median(seconds):.1f} s "
        f"(min {min(seconds):.1f}, max {max(seconds):.1f}, {len(seconds)} trials; "
        f"target {args.deadline + 30:g} s = deadline + 30 s; load {os.getloadavg()[0]:.1f})"
    )
    write_results(results, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
