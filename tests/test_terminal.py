"""What reaches the terminal is text, never Rich markup (tpuray/terminal.py).

A message that holds `[...]` (a `gs://BUCKET[/PREFIX]` hint, a Secret Manager name pattern, a
user's value) once made Rich raise MarkupError mid-print: a traceback and exit 1 instead of one
`error:` line and exit 2. These tests send every message the config checks and the policy
fixtures produce through the real printing path (`tpuray.cli.main`), and user values that look
like markup through every kind of output (error lines, check findings, preview's tables).
"""

from __future__ import annotations

import ast
import copy
import io
from pathlib import Path

import pytest
import yaml

from tests import test_config_checks
from tests.fuzz_stack import run_cli, write_stack
from tests.test_policy_branches import MESSAGES
from tests.test_policy_modules import fixtures, run_only
from tpuray import terminal
from tpuray.commands.preview import print_violations
from tpuray.policies.analyzer import InProcessAnalyzer, Violation

PACKAGE = Path(terminal.__file__).resolve().parent
MARKUP_VALUES = ("[bold]", "[/x]", "gs://BUCKET[/PREFIX]", "projects/[P]/secrets/[NAME]", "[red]x[/red]", ":smile:")


def _markup_uses(path: Path) -> list[str]:
    """The calls in a module that build a console or read markup, as `line: what`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "rich.markup":
            found.append(f"{node.lineno}: imports rich.markup")
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name in ("Console", "TextColumn", "from_markup", "render_markup"):
            found.append(f"{node.lineno}: calls {name}")
        for keyword in node.keywords:
            if keyword.arg == "markup" and not (
                isinstance(keyword.value, ast.Constant) and keyword.value.value is False
            ):
                found.append(f"{node.lineno}: passes markup={ast.unparse(keyword.value)}")
    return sorted(found, key=lambda use: (int(use.split(":")[0]), use))


def test_only_the_terminal_module_builds_consoles_and_nothing_asks_for_markup() -> None:
    uses = {
        str(path.relative_to(PACKAGE.parent)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != Path(terminal.__file__).resolve() and (found := _markup_uses(path))
    }
    assert uses == {}


def test_the_markup_check_sees_each_way_in(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from rich.markup import escape\nfrom rich.console import Console\n"
        "Console().print('x', markup=True)\nText.from_markup('[b]')\nTextColumn('{task.description}')\n"
    )
    assert _markup_uses(module) == [
        "1: imports rich.markup",
        "3: calls Console",
        "3: passes markup=True",
        "4: calls from_markup",
        "5: calls TextColumn",
    ]


@pytest.mark.parametrize("value", MARKUP_VALUES)
def test_a_console_prints_markup_lookalikes_as_written(value: str) -> None:
    out = io.StringIO()
    console = terminal.console(file=out, width=200)
    console.print(f"error: {value}")
    console.print(terminal.styled(("error:", "bold red"), f" {value}"))
    with console.status(terminal.text(f"serving: {value}")):
        pass
    assert out.getvalue() == f"error: {value}\nerror: {value}\n"


@pytest.mark.parametrize(
    ("edit", "line"), [c[1:] for c in test_config_checks.CASES], ids=[c[0] for c in test_config_checks.CASES]
)
def test_every_config_check_line_is_printed_by_the_cli_as_one_error_line(
    edit: test_config_checks.Edit, line: str, tmp_path: Path
) -> None:
    raw = copy.deepcopy(test_config_checks.DEV)
    edit(raw)
    outcome = run_cli(["preview", str(write_stack(tmp_path, "dev", raw))])
    assert (outcome.code, outcome.stderr, outcome.escaped) == (2, f"error: {line}\n", None)


def test_a_bundle_uri_without_gs_prints_its_line_not_a_markup_traceback(tmp_path: Path) -> None:
    raw = copy.deepcopy(test_config_checks.DEV)
    raw["workloads"]["bundleUri"] = "acme-ml-dev-ray/bundles"
    outcome = run_cli(["preview", str(write_stack(tmp_path, "dev", raw))])
    assert (outcome.code, outcome.stderr, outcome.escaped) == (
        2,
        "error: tpuray:workloads.bundleUri: 'acme-ml-dev-ray/bundles' is invalid; use gs://BUCKET[/PREFIX], the "
        "folder the deploy workflow uploads bundles to (tpuray adds the tpuray-apps-<sha256>.zip name)\n",
        None,
    )


@pytest.mark.parametrize("value", MARKUP_VALUES)
def test_a_user_value_that_looks_like_markup_is_echoed_as_written(value: str, tmp_path: Path) -> None:
    raw = copy.deepcopy(test_config_checks.DEV)
    raw["slicePools"][0]["topolgy"] = value
    outcome = run_cli(["preview", str(write_stack(tmp_path, "dev", raw))])
    assert (outcome.code, outcome.stderr, outcome.escaped) == (
        2,
        f"error: tpuray:slicePools[0].topolgy: unknown key (value {value!r}); check the spelling in "
        "docs/configuration.md\n",
        None,
    )


KUBERNETES_FIXTURES = [f for f in fixtures() if not f.stack and f.key in MESSAGES]
STACK_FIXTURES = [f for f in fixtures() if f.stack and f.key in MESSAGES]


@pytest.mark.parametrize("fixture", KUBERNETES_FIXTURES, ids=[f.key for f in KUBERNETES_FIXTURES])
def test_every_recorded_check_finding_is_printed_as_written(fixture) -> None:
    outcome = run_cli(["check", str(fixture.path)])
    assert (outcome.code in (0, 1), outcome.escaped) == (True, None)
    printed = outcome.stdout.splitlines()
    assert [m for m in MESSAGES[fixture.key] if f"  {m}" not in printed] == []


def test_every_recorded_stack_finding_is_printed_in_previews_table_as_written() -> None:
    client, missing = InProcessAnalyzer(), []
    for fixture in STACK_FIXTURES:
        violations = run_only(client, set(fixture.fires), fixture)
        out = io.StringIO()
        print_violations(violations, terminal.console(file=out, width=4000))
        missing += [m for m in MESSAGES[fixture.key] if m not in out.getvalue()]
    assert (len(STACK_FIXTURES) > 20, missing) == (True, [])


@pytest.mark.parametrize("value", MARKUP_VALUES)
def test_a_finding_and_resource_that_look_like_markup_print_as_written_in_previews_table(value: str) -> None:
    out = io.StringIO()
    violation = Violation(policy="tpu-topology", level="mandatory", resource=f"RayJob/{value}", message=value)
    print_violations([violation], terminal.console(file=out, width=200))
    row = next(line for line in out.getvalue().splitlines() if "tpu-topology" in line)
    assert [cell.strip() for cell in row.strip("│").split("│")] == [
        "mandatory",
        "tpu-topology",
        f"RayJob/{value}",
        value,
    ]


def test_a_manifest_named_like_markup_is_named_as_written_by_check(tmp_path: Path) -> None:
    fixture = next(f for f in KUBERNETES_FIXTURES if f.key == "rule-file/tpu-num-of-hosts")
    doc = yaml.safe_load(fixture.path.read_text())
    doc["metadata"]["name"] = "train-[bold]v6e[/x]"
    path = tmp_path / "rayjob.yaml"
    path.write_text(yaml.safe_dump(doc))
    outcome = run_cli(["check", str(path)])
    assert (outcome.code, outcome.escaped) == (1, None)
    assert f"RayCluster/train-[bold]v6e[/x] ({path})" in outcome.stdout
