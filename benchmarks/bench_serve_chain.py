"""Time from "the primary shape has no room for a Serve replica" to "the replica answers on the
next shape of the chain", on emulated slices (docs/capacity.md, Serve).

One emulated cluster: a v6e 2x4 slice and a v5e 2x4 slice of one pool (one host each). The
checkpoint backend's replica is deployed the way the rendered RayService deploys it
(`ray_apps.serve.build_app` with the pool's v6e selector and the chain's v5e selector as Ray's
fallback_strategy); per trial, from `serve.run` to `GET /healthz` answering 200:
- primary: the v6e hosts have room, so the replica runs there (the baseline);
- fallback: every v6e host is full (one actor holds all its CPUs, as other replicas or jobs
  would), so Ray places the replica on the v5e slice; /healthz must say `fallback: true`.
The difference is what the fallback step costs. Serve has no deadline of ours: Ray resolves the
fallback at scheduling time, so the target is the 30 s of the train benchmark's margin.

Prints median, min and max per case and writes them as JSON. Usage:
    .venv/bin/python benchmarks/bench_serve_chain.py [--trials 3] [--out /tmp/tpuray-bench-serve-chain.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from results import write_results  # noqa: E402  (benchmarks/ is the script's folder)

from ray_apps import features, model, slices  # noqa: E402
from tpuray import catalog  # noqa: E402
from tpuray.local.emulator import EmulatedCluster, SliceSpec, plan_for  # noqa: E402

V6E = catalog.lookup("v6e", "2x4")
V5E = catalog.lookup("v5e", "2x4")
POOL = "serve"
DEFAULT_OUT = "/tmp/tpuray-bench-serve-chain.json"
TARGET_S = 30.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _checkpoint(root: Path) -> Path:
    """A complete checkpoint written by the training code's own save_checkpoint."""
    cfg = model.ModelConfig()
    stats = features.fit_stats(features.engineer(features.generate_rows(256)))
    state = model.TrainingState(1, model.init_params(cfg), None, cfg, stats)
    return model.save_checkpoint(root / "runs" / "bench" / "checkpoint_step_00000001", state)


def _healthz(port: int, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
                return json.loads(resp.read())
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"/healthz did not answer 200 within {timeout_s:.0f} s")


def trial(port: int, checkpoint: Path, name: str) -> tuple[float, dict[str, Any]]:
    from ray import serve

    from ray_apps import serve as serve_app

    app = serve_app.build_app(
        {
            "checkpoint_uri": str(checkpoint),
            "checkpoint_wait_s": 0,
            "label_selector": {slices.SLICE_POOL: POOL, slices.GENERATION: V6E.generation},
            "fallback_label_selectors": [{slices.SLICE_POOL: POOL, slices.GENERATION: V5E.generation}],
        }
    )
    started = time.monotonic()
    serve.run(app, name=name, route_prefix="/", blocking=False)
    health = _healthz(port, 180)
    took = time.monotonic() - started
    serve.delete(name)
    return took, health["placement"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--out", default=DEFAULT_OUT)
    args = p.parse_args(argv)

    import ray
    from ray import serve
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    root = Path(tempfile.mkdtemp(prefix="tpsc-", dir="/tmp"))
    checkpoint = _checkpoint(root)
    specs = [SliceSpec("serve-v6e-0", POOL, V6E, "spot", tier="spot"),
             SliceSpec("serve-v5e-0", POOL, V5E, "on-demand", tier="on-demand")]  # fmt: skip
    emu = EmulatedCluster.start(plan_for(specs), state_dir=str(root / "state"), name="bench-serve-chain")
    times: dict[str, list[float]] = {"primary": [], "fallback": []}
    loads: list[float] = []
    try:
        emu.connect()
        port = _free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})

        @ray.remote
        class Filler:
            def ready(self) -> bool:
                return True

        for case in ("primary", "fallback"):
            fillers = []
            if case == "fallback":
                v6e = [n for n in ray.nodes() if n["Alive"] and (n.get("Labels") or {}).get(slices.GENERATION) == "v6e"]
                fillers = [
                    Filler.options(num_cpus=n["Resources"]["CPU"],
                                   scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
                    for n in v6e
                ]  # fmt: skip
                ray.get([f.ready.remote() for f in fillers], timeout=60)
            for i in range(args.trials):
                loads.append(os.getloadavg()[0])
                took, placement = trial(port, checkpoint, f"bench-{case}-{i}")
                expected = V5E.generation if case == "fallback" else V6E.generation
                if placement["generation"] != expected or placement["fallback"] != (case == "fallback"):
                    raise SystemExit(f"{case} trial {i}: replica placed at {placement}, expected {expected}")
                times[case].append(round(took, 1))
                print(f"{case} trial {i}: /healthz 200 after {took:.1f} s on {placement['slice']}", flush=True)
            for f in fillers:
                ray.kill(f)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        leftover = emu.stop()
    summary = {
        case: {"median_s": statistics.median(v), "min_s": min(v), "max_s": max(v), "trials_s": v}
        for case, v in times.items()
    }
    doc = {
        "benchmark": "serve_chain_fallback",
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_1min": {"min": min(loads), "max": max(loads)},
        "target_s": TARGET_S,
        "cases": summary,
        "leftover_pids": leftover,
    }
    write_results(doc, Path(args.out))
    for case, s in summary.items():
        print(f"{case}: median {s['median_s']} s (min {s['min_s']}, max {s['max_s']})")
    print(f"load (1 min) {min(loads):.1f}-{max(loads):.1f}; target for fallback: {TARGET_S:.0f} s")
    return 0 if not leftover and summary["fallback"]["median_s"] < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
