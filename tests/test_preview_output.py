"""What `tpuray preview` prints, from a stack run and violations given to it (the Pulumi
program and the policy pack are not run here: test_exit_codes.py runs them): the JSON
document's keys and layout, the table path's width and wrapping, and the preview's help."""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
from typing import Any

import pytest

from tpuray import terminal
from tpuray.commands import preview as command
from tpuray.config.checks import load_stack
from tpuray.cost.table import stack_cost
from tpuray.policies.analyzer import Violation
from tpuray.preview.mockrun import MockedResource, StackRun

VIOLATION = Violation("tpu-image", "advisory", "RayCluster/train", "image rayproject/ray:latest is not pinned")


def fake_run() -> StackRun:
    # A date is not JSON: the preview writes it as text (json.dumps' default=str).
    bucket = MockedResource("gcp:storage/bucket:Bucket", "data", {"name": "d", "created": dt.date(2026, 1, 2)})
    return StackRun(stack="dev", config=load_stack("dev"), resources=[bucket])


@pytest.fixture
def previewed(monkeypatch: pytest.MonkeyPatch) -> StackRun:
    run = fake_run()
    monkeypatch.setattr(command, "run_stack", lambda stack: run)
    monkeypatch.setattr(command, "check_stack", lambda stack_run: [VIOLATION])
    return run


def test_preview_document_holds_stack_resources_cost_and_violations() -> None:
    run = fake_run()
    doc = command.preview_document(run, [VIOLATION])
    assert list(doc) == ["stack", "resources", "cost", "queues", "violations"]  # dev has tpuray:queues
    assert doc["stack"] == "dev"
    assert doc["resources"] == [
        {"type": "gcp:storage/bucket:Bucket", "name": "data", "inputs": run.resources[0].inputs}
    ]
    assert doc["cost"] == stack_cost(run.config).as_json()
    assert doc["violations"] == [VIOLATION.as_json()]


def test_preview_document_without_violations_has_no_violations_key() -> None:
    assert list(command.preview_document(fake_run())) == ["stack", "resources", "cost", "queues"]


def test_json_preview_is_indented_by_two_and_writes_dates_as_text(previewed, capsys) -> None:
    assert command.preview("dev", as_json=True) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:8] == [
        "{",
        '  "stack": "dev",',
        '  "resources": [',
        "    {",
        '      "type": "gcp:storage/bucket:Bucket",',
        '      "name": "data",',
        '      "inputs": {',
        '        "name": "d",',
    ]
    assert out.splitlines()[8] == '        "created": "2026-01-02"'
    assert json.loads(out)["violations"] == [VIOLATION.as_json()]


def test_table_preview_wraps_long_lines_at_200_columns(previewed, monkeypatch, capsys) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(command, "age_text", lambda: "prices: " + "x" * 250)
    assert command.preview("dev") == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("prices: ")
    assert lines[start + 1 : start + 3] == ["x" * 200, "x" * 50]
    assert max(len(line) for line in lines) == 200


def test_table_preview_prints_the_cost_table_and_the_price_age_unhighlighted(previewed, monkeypatch) -> None:
    out = io.StringIO()

    class Terminal(terminal.Console):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**{**kwargs, "file": out, "force_terminal": True, "color_system": "standard"})

    monkeypatch.setattr(terminal, "Console", Terminal)
    monkeypatch.setattr(command, "age_text", lambda: "prices: snapshot 2024-12-20 (710 days old)")
    assert command.preview("dev") == 0
    text = out.getvalue()
    assert "\nprices: snapshot 2024-12-20 (710 days old)\n" in text
    assert "cost" in text.lower() and "\nNone\n" not in text


def test_preview_help_says_what_each_argument_is(monkeypatch, capsys) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    parser = argparse.ArgumentParser(prog="tpuray")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    command.register(sub)
    assert "    preview   offline preview: run the Pulumi program under mocks, no credentials" in parser.format_help()
    with pytest.raises(SystemExit):
        parser.parse_args(["preview", "--help"])
    assert capsys.readouterr().out.splitlines()[-6:] == [
        "positional arguments:",
        "  stack       a stack name in stacks/ or a path to a Pulumi.<name>.yaml",
        "",
        "options:",
        "  -h, --help  show this help message and exit",
        "  --json      print {stack, resources, cost, violations} as JSON",
    ]


def test_table_preview_prints_the_tpu_zone_snapshots_age_after_the_prices(previewed, monkeypatch, capsys) -> None:
    monkeypatch.setattr(command, "age_text", lambda: "prices: snapshot 2024-12-20 (710 days old)")
    monkeypatch.setattr(command.tpu_zones, "age_text", lambda: "tpu zones: snapshot 2026-12-02 (0 days old)")
    assert command.preview("dev") == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("prices: snapshot 2024-12-20 (710 days old)")
    assert lines[at + 1] == "tpu zones: snapshot 2026-12-02 (0 days old)"
