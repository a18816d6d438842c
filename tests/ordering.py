"""Longest test modules first, so two xdist workers finish together (`make test`).

`make test` runs whole modules per worker (`--dist loadfile`). xdist's default order is
by test count, which starts the 124 quick policy tests first and leaves the few long
emulated-cluster modules (a 2-4 minute cluster each) for the end, where one worker then
runs alone. Here the modules are ordered by their measured seconds, longest first (the
classic longest-processing-time rule); `make test` passes `--no-loadscope-reorder` so xdist
keeps this order. Tests inside a module keep their file order (some modules' tests build on
each other, e.g. test_chain_emulated takes hosts away as it goes). A module missing from
the table runs after the measured ones, in collection order.

Only xdist workers reorder. A single-process run keeps the order it was given: mutmut
passes each mutant's tests fastest first, so that a killed mutant stops after its quickest
failing test (`make mutation`); sorting them longest module first would run the slowest
policy tests first for every mutant.

Refresh the table from a JUnit report of a full run:

    python -m pytest -n 2 --dist loadfile --no-loadscope-reorder --junitxml=/tmp/run.xml
    python tests/ordering.py /tmp/run.xml
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

TABLE = Path(__file__).with_name("module_seconds.json")


def module_seconds() -> dict[str, float]:
    return json.loads(TABLE.read_text()) if TABLE.exists() else {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # not an xdist worker: keep the given order
        return
    seconds = module_seconds()
    # A stable sort: ties and unmeasured modules keep collection order, tests keep file order.
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::", 1)[0], 0.0))


def record(junit_xml: Path) -> dict[str, float]:
    """Seconds per test module (setup, call and teardown of each test) from a JUnit report."""
    total: Counter[str] = Counter()
    for case in ET.parse(junit_xml).iter("testcase"):
        module = case.get("classname", "").split(".")
        path = "/".join(module[: next(i for i, p in enumerate(module) if p.startswith("test_")) + 1]) + ".py"
        total[path] += float(case.get("time", 0))
    return {path: round(s, 1) for path, s in total.most_common()}


if __name__ == "__main__":
    TABLE.write_text(json.dumps(record(Path(sys.argv[1])), indent=1) + "\n")
    print(f"wrote {TABLE}")
