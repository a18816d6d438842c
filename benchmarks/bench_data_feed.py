"""Training step fed by Ray Data (iter_jax_batches) vs the same step fed from memory.

One process, one private local Ray cluster on 127.0.0.1, JAX on CPU. Both sides run the
jitted ray_apps.model train step on the same engineered, standardised rows with the same
batch size; they are interleaved in rounds so machine drift affects both alike:
- memory: the prepared rows as numpy arrays, sliced per step and put on the device;
- ray_data: ray_apps.data.build_dataset (Parquet read, feature engineering, scaling as
  Ray Data map_batches) consumed with Dataset.iter_jax_batches (ray_apps.data.iterate).
Per step, each side's time is the step plus waiting for its batch; the Ray Data side also
reports its pipeline start-up (dataset creation to first batch) separately.

Prints the figures and writes them as JSON. Usage:
    .venv/bin/python benchmarks/bench_data_feed.py [--rows 32768] [--batch-size 256]
        [--steps 100] [--rounds 3] [--out /tmp/tpuray-bench-data-feed.json]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from results import write_results  # noqa: E402  (benchmarks/ is the script's folder)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DEFAULT_OUT = "/tmp/tpuray-bench-data-feed.json"


def _ms(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {
        "n": len(xs),
        "median_ms": round(statistics.median(xs) * 1e3, 3),
        "p90_ms": round(xs[int(0.9 * (len(xs) - 1))] * 1e3, 3),
        "mean_ms": round(statistics.fmean(xs) * 1e3, 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=32768)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--steps", type=int, default=100, help="timed steps per side per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    if args.rows < args.batch_size * (args.steps + 1):
        ap.error("--rows must hold --steps + 1 batches (one epoch per round, no re-read)")

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import numpy as np
    import ray

    from ray_apps import data, features, model
    from ray_apps.runtime import ensure_ray

    workdir = tempfile.mkdtemp(prefix="tpuray-bench-feed-")
    data.write_synthetic(workdir, rows=args.rows, fmt="parquet", files=4)
    t0 = time.perf_counter()
    ensure_ray(None, num_cpus=max(os.cpu_count() or 1, 2))
    ray_start_s = time.perf_counter() - t0
    try:
        ds, stats = data.build_dataset(workdir, "parquet", cache=False)  # measures the streaming pipeline
        # The same rows, prepared once in memory with the same preprocessing code.
        raw = features.generate_rows(args.rows, seed=0)
        mem = features.to_model_batch(raw, stats=stats.to_dict())
        mem_x, mem_y = np.asarray(mem["x"], np.float32), np.asarray(mem["y"], np.float32)

        cfg = model.ModelConfig()
        optimizer = model.make_optimizer(cfg)
        step_fn = model.make_train_step(optimizer)
        params0 = model.init_params(cfg)
        opt0 = optimizer.init(params0)
        # Compile once, outside the timings.
        warm = step_fn(params0, opt0, jax.numpy.asarray(mem_x[: args.batch_size]), mem_y[: args.batch_size])
        jax.block_until_ready(warm)

        def run_memory() -> list[float]:
            params, opt_state = params0, opt0
            times = []
            for i in range(args.steps):
                t = time.perf_counter()
                lo = i * args.batch_size
                x = jax.device_put(mem_x[lo : lo + args.batch_size])
                y = jax.device_put(mem_y[lo : lo + args.batch_size])
                params, opt_state, loss = step_fn(params, opt_state, x, y)
                jax.block_until_ready(loss)
                times.append(time.perf_counter() - t)
            return times

        def run_ray_data() -> tuple[list[float], float]:
            params, opt_state = params0, opt0
            t = time.perf_counter()
            batches = data.iterate(ds, args.batch_size)
            first = next(batches)
            startup = time.perf_counter() - t
            # The first batch's step is not timed (it carries the pipeline start-up).
            params, opt_state, loss = step_fn(params, opt_state, first["x"], first["y"])
            jax.block_until_ready(loss)
            times = []
            for _ in range(args.steps):
                t = time.perf_counter()
                batch = next(batches)
                params, opt_state, loss = step_fn(params, opt_state, batch["x"], batch["y"])
                jax.block_until_ready(loss)
                times.append(time.perf_counter() - t)
            return times, startup

        memory: list[float] = []
        ray_data: list[float] = []
        startups: list[float] = []
        for _ in range(args.rounds):
            memory += run_memory()
            times, startup = run_ray_data()
            ray_data += times
            startups.append(startup)
    finally:
        ray.shutdown()

    mem_stats, rd_stats = _ms(memory), _ms(ray_data)
    results: dict[str, Any] = {
        "config": {
            "rows": args.rows,
            "batch_size": args.batch_size,
            "steps_per_round": args.steps,
            "rounds": args.rounds,
            "model_hidden": list(cfg.hidden),
        },
        "step_memory": mem_stats,
        "step_ray_data": rd_stats,
        "ratio_median": round(rd_stats["median_ms"] / mem_stats["median_ms"], 2),
        "ratio_mean": round(rd_stats["mean_ms"] / mem_stats["mean_ms"], 2),
        "samples_per_s": {
            "memory": round(args.batch_size / (mem_stats["mean_ms"] / 1e3)),
            "ray_data": round(args.batch_size / (rd_stats["mean_ms"] / 1e3)),
        },
        "ray_data_pipeline_startup_s": [round(s, 2) for s in startups],
        "local_ray_start_s": round(ray_start_s, 1),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "ray": ray.__version__,
            "jax": jax.__version__,
            "jax_backend": jax.default_backend(),
        },
    }
    out = Path(args.out)
    write_results(results, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
