"""tests/ordering.py: the longest test modules run first under `make test`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests import ordering

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.test_policies" name="test_a" time="0.5"/>
<testcase classname="tests.test_chain_emulated" name="test_gang" time="60.0"/>
<testcase classname="tests.test_chain_emulated" name="test_fallback" time="40.25"/>
<testcase classname="tests.test_policies" name="test_b" time="1.0"/>
</testsuite></testsuites>
"""


def test_record_sums_each_modules_tests_longest_first(tmp_path: Path) -> None:
    report = tmp_path / "run.xml"
    report.write_text(JUNIT)
    assert list(ordering.record(report).items()) == [
        ("tests/test_chain_emulated.py", 100.2),
        ("tests/test_policies.py", 1.5),
    ]


def test_modules_are_ordered_longest_first_keeping_file_order_and_unmeasured_last(monkeypatch) -> None:
    seconds = {"tests/test_chain_emulated.py": 300.0, "tests/test_policies.py": 30.0}
    monkeypatch.setattr(ordering, "module_seconds", lambda: seconds)
    ids = [
        "tests/test_new.py::test_x",
        "tests/test_policies.py::test_a",
        "tests/test_chain_emulated.py::test_gang",
        "tests/test_chain_emulated.py::test_fallback",
        "tests/test_policies.py::test_b",
    ]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    xdist_worker = SimpleNamespace(workerinput={"workerid": "gw0"})
    ordering.pytest_collection_modifyitems(xdist_worker, items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [
        "tests/test_chain_emulated.py::test_gang",
        "tests/test_chain_emulated.py::test_fallback",
        "tests/test_policies.py::test_a",
        "tests/test_policies.py::test_b",
        "tests/test_new.py::test_x",
    ]


def test_the_table_names_only_modules_that_exist() -> None:
    root = Path(ordering.__file__).resolve().parent.parent
    assert [m for m in ordering.module_seconds() if not (root / m).is_file()] == []


def test_a_run_without_xdist_keeps_the_order_it_was_given(monkeypatch) -> None:
    monkeypatch.setattr(ordering, "module_seconds", lambda: {"tests/test_chain_emulated.py": 300.0})
    ids = ["tests/test_policies.py::test_a", "tests/test_chain_emulated.py::test_gang"]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    ordering.pytest_collection_modifyitems(SimpleNamespace(), items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == ids
