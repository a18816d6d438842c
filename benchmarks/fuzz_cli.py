"""Fuzz the `tpuray` CLI with random one-key changes to the committed stacks, and print the counts.

The same cases as tests/test_fuzz_cli.py (tests/fuzz_stack.py), run longer: `--cases` per stack
(default 1000) from `--seed`. Each case runs the real `tpuray preview` in-process on the changed
stack file. Prints, per stack, how many cases previewed (exit 0 or 1), were refused with one
line per problem (exit 2), and went wrong (a traceback, another exit status, a refusal that
names no key it should), with up to ten distinct problems in full; exits 1 when any went wrong.

    TPURAY_SHARED=../shared .venv/bin/python benchmarks/fuzz_cli.py --cases 2000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import fuzz_stack  # noqa: E402
from tests.fuzz_stack import Change, run_cli, verdict, write_stack  # noqa: E402


def fuzz(stack: str, cases: int, start: int, folder: Path) -> tuple[Counter[str], list[str]]:
    raw = fuzz_stack.stack_raw(stack)
    counts: Counter[str] = Counter()
    problems: list[str] = []

    @seed(start)
    @settings(max_examples=cases, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(fuzz_stack.changes(raw))
    def one_change(change: Change) -> None:
        outcome = run_cli(["preview", str(write_stack(folder, "fuzz", change.apply(raw)))])
        problem = verdict(change, outcome)
        if problem is not None:
            counts["went wrong"] += 1
            problems.append(f"{change}: {problem}")
        else:
            counts["refused (exit 2)" if outcome.code == 2 else f"previewed (exit {outcome.code})"] += 1

    one_change()
    return counts, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000, help="cases per stack (default 1000)")
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--stacks", nargs="+", default=["dev", "staging", "prod"])
    args = parser.parse_args()
    wrong = 0
    with tempfile.TemporaryDirectory() as tmp:
        for stack in args.stacks:
            started = time.monotonic()
            counts, problems = fuzz(stack, args.cases, args.seed, Path(tmp))
            seconds = time.monotonic() - started
            shown = ", ".join(f"{n} {what}" for what, n in sorted(counts.items()))
            print(f"{stack}: {sum(counts.values())} cases in {seconds:.0f} s: {shown or 'none'}")
            distinct = {problem.split(": ", 1)[1]: problem for problem in problems}  # one per problem text
            for problem in list(distinct.values())[:10]:
                print(f"  {problem}")
            wrong += len(problems)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
