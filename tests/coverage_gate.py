"""The branch-coverage gate of `make test`, run after pytest wrote .coverage.

tpuray/policies/ must stay at 100 % branch coverage: a rule's every path has a fixture (a
new rule, or a new branch, without one fails here, naming its lines). tpuray/config/ must
stay at 95 % or more: each validation has a row in tests/test_config_checks.py.
Usage: python -m pytest --cov --cov-report= && python tests/coverage_gate.py
"""

from __future__ import annotations

import io
import sys

import coverage

# (files, minimum branch coverage in %, what to add when below)
GATES = (
    (
        "tpuray/policies/*",
        100.0,
        "give each uncovered path a fixture: a bad (and, where it makes sense, a good) case in "
        "tests/fixtures/policies/make_fixtures.py (BAD_PATHS, GOOD_PATHS, STACK_BAD_PATHS, STACK_GOOD_PATHS), "
        "then run it; machinery outside the rules goes to tests/test_policy_internals.py",
    ),
    (
        "tpuray/config/*",
        95.0,
        "give each uncovered validation a row in tests/test_config_checks.py (CASES: id, edit, exact line)",
    ),
)


def main() -> int:
    cov = coverage.Coverage()
    cov.load()
    failed = 0
    for pattern, minimum, hint in GATES:
        table = io.StringIO()
        total = cov.report(include=[pattern], show_missing=True, skip_covered=True, file=table)
        verdict = "ok" if total >= minimum else "FAILED"
        print(f"coverage gate {verdict}: {pattern} at {total:.2f} % branch coverage (minimum {minimum:g} %)")
        if total < minimum:
            failed += 1
            print("  uncovered lines and branches (file, Missing column: lines, and 'a->b' branches never taken):")
            print("\n".join("    " + line for line in table.getvalue().rstrip().splitlines()))
            print(f"  to fix: {hint}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
