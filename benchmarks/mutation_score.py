"""Score per module of the last `mutmut run` (read from mutants/**/*.meta), checked against
the equivalent-mutant list, written to benchmarks/mutation.json.

    python benchmarks/mutation_score.py [--min 80] [--run .mutation/run.json] [MUTANTS_DIR ...]

MUTANTS_DIR: mutmut trees (default: .mutation/*, what benchmarks/mutation_run.py leaves, or
mutants/). Modules scored now replace their entries in benchmarks/mutation.json; the others
stay, with the run that measured them.

killed: a fast test failed, or the mutant ran past mutmut's time limit (also listed as
"timeout": on a loaded machine some of those are the load, not the mutant). survived: every test passed. no tests: no fast test runs that code.
Score = killed / (killed + survived + no tests + other), per module.
A survivor listed in benchmarks/mutation-equivalent.txt (one `name  # why` per line) is
equivalent: it counts as survived in the score but is explained. Exit 1 when a module is
below --min or a survivor is neither killed nor explained.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import write_results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT = ROOT / "benchmarks" / "mutation-equivalent.txt"
KILLED = {1, 3, 37}  # mutmut stats.py: a test failed (or pytest errored), type check
TIMEOUT = {36, 24, -24, 152, 255}  # mutmut stats.py: past its time limit (SIGXCPU); counted as killed
SURVIVED = {0}
NO_TESTS = {5, 33}


def equivalent_mutants(path: Path = EQUIVALENT) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        name, _, why = line.partition("#")
        if name.strip():
            out[name.strip()] = why.strip()
    return out


def scores(mutants: Path) -> dict[str, dict[str, object]]:
    per_module: dict[str, dict[str, object]] = {}
    for meta in sorted(mutants.rglob("*.py.meta")):
        module = str(meta.relative_to(mutants)).removesuffix(".meta")
        codes = json.loads(meta.read_text()).get("exit_code_by_key", {})
        if not codes:
            continue
        counts: Counter[str] = Counter()
        survivors = []
        for name, code in codes.items():
            if code in KILLED:
                counts["killed"] += 1
            elif code in TIMEOUT:
                counts["killed"] += 1
                counts["timeout"] += 1
            elif code in SURVIVED:
                counts["survived"] += 1
                survivors.append(name)
            elif code in NO_TESTS:
                counts["no tests"] += 1
                survivors.append(name)
            elif code is None:
                counts["not checked"] += 1
            else:
                counts["other"] += 1
                survivors.append(name)
        checked = sum(counts.values()) - counts["not checked"]
        per_module[module] = {
            "mutants": len(codes),
            **dict(sorted(counts.items())),
            "score": round(100 * counts["killed"] / checked, 1) if checked else None,
            "survivors": sorted(survivors),
        }
    return per_module


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--min", type=float, default=80.0, help="minimum score per module, in %%")
    parser.add_argument("mutants", type=Path, nargs="*")
    parser.add_argument("--run", type=Path, help="timings written by mutation_run.py")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "mutation.json")
    args = parser.parse_args()
    trees = args.mutants or sorted(p for p in (ROOT / ".mutation").glob("*") if p.is_dir()) or [ROOT / "mutants"]
    run = json.loads(args.run.read_text()) if args.run else {}
    per_module: dict[str, dict[str, object]] = {}
    for tree in trees:
        for module, row in scores(tree).items():
            per_module[module] = {"group": tree.name, **row}
    if not per_module:
        print(f"no mutmut results under {', '.join(map(str, trees))}: run `make mutation` first")
        return 1
    explained = equivalent_mutants()
    failed = False
    for module, row in per_module.items():
        unexplained = [s for s in row["survivors"] if s not in explained]  # type: ignore[union-attr]
        row["unexplained"] = unexplained
        low = row["score"] is None or row["score"] < args.min  # type: ignore[operator]
        failed |= low or bool(unexplained)
        flag = "LOW" if low else "ok"
        print(f"{flag:3} {module}: {row['score']} % killed of {row['mutants']} ({len(unexplained)} unexplained)")
        for name in unexplained:
            print(f"      survivor: {name}   (mutmut show {name})")
    old = json.loads(args.out.read_text()) if args.out.exists() else {}
    common = {k: run[k] for k in ("date", "max_children", "cpus", "timeout_multiplier") if k in run}
    groups = {**old.get("groups", {}), **{g: {**common, **t} for g, t in run.get("per_group", {}).items()}}
    total = {k: v for k, v in run.items() if k != "per_group"} or old.get("last_run", {})
    modules = {**old.get("modules", {}), **per_module}
    results = {"minimum": args.min, "last_run": total, "groups": groups, "modules": dict(sorted(modules.items()))}
    write_results(results, args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
