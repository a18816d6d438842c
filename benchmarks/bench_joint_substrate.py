"""Prod's training RayJob on the joint substrate (issue 33): the real API server and KubeRay
operator, Ray's own autoscaler v2 and KubeRay provider, the stand-ins of tpuray/local/substrate/
(docs/testing.md). Needs root, unshare and nsenter, and the Go-built tools (`make cluster-tools`).

One substrate, three runs of the rendered prod RayJob (tests/joint_prod.py: JAX on CPU, a
checkpoint and a printed step every step, --slice-deadline-s 120), in this order:
1. first shape available: two spot v6e 4x4 slices in stock. RayJob created -> first training
   step (the driver's "step 1 loss" line, polled every 0.2 s in the submitter's output);
2. preemption: one on-demand v6e slice more; after step 4, the slice of replica 1 is preempted (nodes and
   pods deleted). Preemption -> the next step, observed (the first step line after the
   restart's "attempt 2" line) and as the run's goodput record computes it (from the loss in
   its capacity samples to the first step beyond the one reached);
3. fall-through: every v6e slice gone, two on-demand v5e slices in stock. RayJob created ->
   first step: the v6e step's 120 s deadline, then v5e's slices from zero.

Prints the figures and writes them as JSON. Usage:
    .venv/bin/python benchmarks/bench_joint_substrate.py [--out /tmp/tpuray-bench-joint.json]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from results import write_results  # noqa: E402  (benchmarks/ is the script's folder)

from tests import joint_prod as prod  # noqa: E402
from tests.control_plane import CRD_FILES, tools_missing  # noqa: E402
from tpuray import capacity  # noqa: E402
from tpuray.local.substrate import nodes  # noqa: E402
from tpuray.preview.mockrun import run_stack  # noqa: E402

DEFAULT_OUT = "/tmp/tpuray-bench-joint.json"
STEP_LINE = re.compile(r"\bstep (\d+) loss")  # after the "(RayTrainWorker pid=...)" prefix
V6E_SPOT = nodes.SlicePool(prod.CLASS, prod.V6E, capacity.SPOT, 2)
V6E_ON_DEMAND = nodes.SlicePool(prod.CLASS, prod.V6E, capacity.ON_DEMAND, 1)
V5E_ON_DEMAND = nodes.SlicePool(prod.CLASS, prod.V5E, capacity.ON_DEMAND, 2)


def first_step(joint: Any, run: Any, name: str, steps: int) -> dict[str, Any]:
    job = prod.submit(joint, run, name, steps=steps, checkpoint_every=1)
    at = prod.wait_for_line(joint, job, "step 1 loss", 1200)
    result = prod.wait_for_result(joint, job)
    prod.delete(joint)
    return {
        "created_to_first_step_s": round(at - job.created_at, 1),
        "shape": result["capacity"]["shape"],
        "tried": [(t["shape"], t["granted"], t["waited_s"]) for t in result["capacity"]["tried"]],
    }


def preemption(joint: Any, run: Any, steps: int, preempt_after: int) -> dict[str, Any]:
    job = prod.submit(joint, run, "bench-preempted", steps=steps, checkpoint_every=1, min_step_s=1.0)
    prod.wait_for_line(joint, job, f"step {preempt_after} loss", 1200)
    preempted_at = time.time()
    deleted = prod.preempt_replica(joint, "train-v6e-16-1")
    prod.wait_for_line(joint, job, "attempt 2: start", 1200)
    deadline = time.monotonic() + 900
    stepped_at = None
    while stepped_at is None and time.monotonic() < deadline:
        log = prod.driver_log(joint, job)
        after = log[log.index("attempt 2: start") :]
        if STEP_LINE.search(after):
            stepped_at = time.time()
        time.sleep(0.2)
    result = prod.wait_for_result(joint, job)
    prod.delete(joint)
    recoveries = result["goodput"]["recoveries"]
    return {
        "preempted_after_step": preempt_after,
        "pods_deleted": len(deleted),
        "preemption_to_next_step_observed_s": None if stepped_at is None else round(stepped_at - preempted_at, 1),
        "preemption_to_next_step_goodput_s": recoveries[0]["time_to_recover_s"] if recoveries else None,
        "resumed_at_step": recoveries[0]["resumed_at_step"] if recoveries else None,
        "final_step": result.get("final_step"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--steps", type=int, default=4, help="steps of the first-step runs")
    args = parser.parse_args()
    if missing := tools_missing():
        print(f"the joint substrate needs the Go-built tools: {missing}; run `make cluster-tools`", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("the joint substrate needs root (the pods' network and mount namespaces)", file=sys.stderr)
        return 2
    run = run_stack("prod")
    t0 = time.perf_counter()
    joint = prod.start(CRD_FILES, Path(tempfile.mkdtemp(prefix="tpuray-bench-joint-")), run)
    started_s = time.perf_counter() - t0
    try:
        joint.add_nodes([V6E_SPOT])
        available = first_step(joint, run, "bench-available", args.steps)
        joint.add_nodes([V6E_ON_DEMAND])
        preempted = preemption(joint, run, steps=16, preempt_after=4)
        prod.take_out_of_stock(joint, V6E_SPOT)
        prod.take_out_of_stock(joint, V6E_ON_DEMAND)
        joint.add_nodes([V5E_ON_DEMAND])
        fallen = first_step(joint, run, "bench-fallen-through", args.steps)
    finally:
        joint.stop()
    write_results(
        {
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_1m": os.getloadavg()[0]},
            "substrate_start_s": round(started_s, 1),
            "slice_deadline_s": prod.DEADLINE_S,
            "first_shape_available": available,
            "first_shape_out_of_stock": fallen,
            "slice_preemption": preempted,
        },
        Path(args.out),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
