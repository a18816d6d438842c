"""Time `tpuray preview STACK` per stack, as a user runs it: a fresh process each time.

Target (issue: foundation): under 5 s per stack on the 2-core CI machine.
Usage: python benchmarks/bench_preview.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 5.0


def time_preview(stack: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tpuray.cli", "preview", stack, "--json"],
        cwd=REPO,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    stacks = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (REPO / "stacks").glob("Pulumi.*.yaml"))
    print(f"{'stack':10} {'median s':>9} {'max s':>7}  (target < {TARGET_SECONDS:.0f} s, {args.repeat} runs)")
    for stack in stacks:
        times = [time_preview(stack) for _ in range(args.repeat)]
        print(f"{stack:10} {statistics.median(times):9.2f} {max(times):7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
