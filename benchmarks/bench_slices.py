"""Slice-atomic scheduling benchmark on an emulated cluster (2 x v6e 4x4, 8 hosts).

Three side-by-side comparisons, one run:
1. whole-slice reservation latency on an idle cluster: ours (ray_apps.slices.reserve_slice)
   vs ray.util.tpu.slice_placement_group vs a plain STRICT_SPREAD placement group of the
   same bundles (which is fast but gives no slice guarantee);
2. fragmentation over random contention trials (0-3 random busy hosts): how often a
   placed 4-host gang spans two slices, ours vs a naive STRICT_SPREAD placement group;
3. one slice partly busy (worker 3 busy, worker 0 free) and one slice free: time to a
   ready gang, ours vs SlicePlacementGroup (which may claim the partly busy slice and wait).

Prints the figures and writes them to a JSON file whose path it prints. Usage:
    .venv/bin/python benchmarks/bench_slices.py [--trials 200] [--reps 20] [--out PATH]
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results import write_results  # noqa: E402  (benchmarks/ is the script's folder)

from tpuray import catalog  # noqa: E402
from tpuray.local.emulator import EmulatedCluster, SliceSpec, plan_for  # noqa: E402

SHAPE = catalog.lookup("v6e", "4x4")
SLICES = ["v6e-b-0", "v6e-b-1"]
SELECTOR = [{"ray.io/accelerator-type": SHAPE.ray_accelerator_type}]
BUNDLE = {"TPU": SHAPE.chips_per_host, f"accelerator_type:{SHAPE.ray_accelerator_type}": 0.001}


def _stats(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {
        "n": len(xs),
        "median_ms": round(statistics.median(xs) * 1e3, 1),
        "p90_ms": round(xs[int(0.9 * (len(xs) - 1))] * 1e3, 1),
        "max_ms": round(xs[-1] * 1e3, 1),
    }


class Bench:
    def __init__(self) -> None:
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group

        from ray_apps import slices

        self.ray, self.pg, self.rm, self.slices = ray, placement_group, remove_placement_group, slices
        self._slice_of = {n["NodeID"]: n["Labels"].get("ray.io/tpu-slice-name", "") for n in ray.nodes()}

    def slice_of(self, node_id: str) -> str:
        return self._slice_of[node_id]

    def wait_view(self, busy: set[tuple[str, int]], timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            seen = {(h.slice_name, h.worker_id) for v in self.slices.slice_inventory() for h in v.hosts if not h.free}
            if seen == busy:
                return
            time.sleep(0.03)
        raise RuntimeError(f"resource view did not settle to {busy}")

    def busy(self, hosts: set[tuple[str, int]]) -> list[Any]:
        pgs = [
            self.pg(
                [{"TPU": SHAPE.chips_per_host}],
                name=f"busy-{s}-{w}",
                bundle_label_selector=[{"ray.io/tpu-slice-name": s, "ray.io/tpu-worker-id": str(w)}],
            )
            for s, w in sorted(hosts)
        ]
        if pgs:
            self.ray.wait([p.ready() for p in pgs], num_returns=len(pgs), timeout=30)
        self.wait_view(hosts)
        return pgs

    def release(self, pgs: list[Any]) -> None:
        for p in pgs:
            self.rm(p)
        self.wait_view(set())

    # -- the three contenders
    def ours(self, deadline_s: float = 30) -> tuple[float, list[str]] | None:
        t = time.perf_counter()
        try:
            res = self.slices.reserve_slice(
                SHAPE.topology,
                hosts=SHAPE.hosts,
                chips_per_host=SHAPE.chips_per_host,
                selectors=SELECTOR,
                deadline_s=deadline_s,
            )
        except self.slices.SliceUnavailableError:
            return None
        dt = time.perf_counter() - t
        nodes = res.node_ids
        res.release()
        return dt, nodes

    def ray_slice_pg(self, timeout: float = 30) -> tuple[float, list[str]] | None:
        from ray.util.tpu import slice_placement_group

        t = time.perf_counter()
        spg = slice_placement_group(SHAPE.topology, SHAPE.generation, head_reservation_timeout_s=timeout)
        ready, _ = self.ray.wait([spg.placement_group.ready()], timeout=timeout)
        dt = time.perf_counter() - t
        nodes = list(self.ray.util.placement_group_table(spg.placement_group)["bundles_to_node_id"].values())
        spg.shutdown()
        return (dt, nodes) if ready else None

    def plain_pg(self, timeout: float = 30) -> tuple[float, list[str]] | None:
        t = time.perf_counter()
        pg = self.pg([dict(BUNDLE) for _ in range(SHAPE.hosts)], strategy="STRICT_SPREAD")
        ready, _ = self.ray.wait([pg.ready()], timeout=timeout)
        dt = time.perf_counter() - t
        nodes = list(self.ray.util.placement_group_table(pg)["bundles_to_node_id"].values())
        self.rm(pg)
        return (dt, nodes) if ready else None


def latency(b: Bench, reps: int) -> dict[str, Any]:
    out: dict[str, list[float]] = {"ours": [], "ray_slice_placement_group": [], "plain_placement_group": []}
    fns = {"ours": b.ours, "ray_slice_placement_group": b.ray_slice_pg, "plain_placement_group": b.plain_pg}
    for _ in range(reps):
        for key, fn in fns.items():  # interleaved, so drift affects all three alike
            got = fn()
            assert got is not None, key
            out[key].append(got[0])
            b.wait_view(set())
    return {k: _stats(v) for k, v in out.items()}


def fragmentation(b: Bench, trials: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    hosts = [(s, w) for s in SLICES for w in range(SHAPE.hosts)]
    ours = {"placed": 0, "spanned": 0, "refused": 0, "refused_with_free_slice": 0}
    naive = {"placed": 0, "spanned": 0, "unplaced": 0}
    for _ in range(trials):
        busy = set(rng.sample(hosts, rng.randint(0, 3)))
        any_free = any(all((s, w) not in busy for w in range(SHAPE.hosts)) for s in SLICES)
        held = b.busy(busy)
        got = b.ours(deadline_s=0.3)
        if got is None:
            ours["refused"] += 1
            ours["refused_with_free_slice"] += int(any_free)
        else:
            ours["placed"] += 1
            ours["spanned"] += int(len({b.slice_of(n) for n in got[1]}) > 1)
        b.wait_view(busy)
        got = b.plain_pg(timeout=5)
        if got is None:
            naive["unplaced"] += 1
        else:
            naive["placed"] += 1
            naive["spanned"] += int(len({b.slice_of(n) for n in got[1]}) > 1)
        b.release(held)
    for d in (ours, naive):
        d["fragmentation_rate"] = round(d["spanned"] / d["placed"], 3) if d["placed"] else 0.0
    return {"trials": trials, "seed": seed, "ours": ours, "naive_strict_spread": naive}


def partly_busy(b: Bench, reps: int, timeout: float) -> dict[str, Any]:
    busy = {(SLICES[0], SHAPE.hosts - 1)}  # worker 3 busy; worker 0 (the head resource) free
    res: dict[str, dict[str, Any]] = {}
    for key, fn in (
        ("ours", lambda: b.ours(deadline_s=timeout)),
        ("ray_slice_placement_group", lambda: b.ray_slice_pg(timeout=timeout)),
    ):
        times, stuck, wrong = [], 0, 0
        for _ in range(reps):
            held = b.busy(busy)
            got = fn()
            if got is None:
                stuck += 1
            else:
                times.append(got[0])
                wrong += int({b.slice_of(n) for n in got[1]} != {SLICES[1]})
            b.release(held)
        res[key] = {
            "ready": len(times),
            "stuck_past_timeout": stuck,
            "on_busy_slice": wrong,
            **(_stats(times) if times else {}),
        }
    return {"reps": reps, "timeout_s": timeout, "busy": sorted(f"{s}/w{w}" for s, w in busy), **res}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--busy-reps", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    specs = [SliceSpec(name, "v6e-b", SHAPE, "spot") for name in SLICES]
    t0 = time.perf_counter()
    with EmulatedCluster.start(
        plan_for(specs), state_dir=tempfile.mkdtemp(prefix="tprb-", dir="/tmp"), name="bench"
    ) as emu:
        startup = time.perf_counter() - t0
        emu.connect()
        import ray

        try:
            b = Bench()
            results = {
                "cluster": {
                    "slices": len(specs),
                    "hosts": sum(s.shape.hosts for s in specs),
                    "shape": SHAPE.key,
                    "startup_s": round(startup, 1),
                },
                "reservation_latency_idle": latency(b, args.reps),
                "fragmentation": fragmentation(b, args.trials, args.seed),
                "one_slice_partly_busy": partly_busy(b, args.busy_reps, args.timeout),
            }
        finally:
            ray.shutdown()
    results["machine"] = {
        "cpus": __import__("os").cpu_count(),
        "python": platform.python_version(),
        "ray": __import__("ray").__version__,
    }
    out = Path(args.out) if args.out else Path(tempfile.gettempdir()) / "tpuray-bench-slices.json"
    write_results(results, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
