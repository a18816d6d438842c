"""tpuray/errors.py: every expected error carries its exit code, and library code raises it
without importing the CLI."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tpuray import errors
from tpuray.catalog import CatalogError
from tpuray.cli import main
from tpuray.config.terraform import TerraformStateError

TPURAY = Path(errors.__file__).parent


@pytest.mark.parametrize(
    "error",
    [
        errors.ConfigError(["tpuray:slicePools[0].slices: 0 is invalid"]),
        errors.UserError("no emulated cluster"),
        errors.DiffError("unknown ref 'nope'"),
        errors.EmulatorError("no free port"),
        CatalogError("unknown TPU generation 'v9'"),
        TerraformStateError(["tpuray:terraform.state: not found"]),
    ],
)
def test_every_expected_error_is_a_tpuray_error_with_exit_code_2(error: Exception) -> None:
    assert isinstance(error, errors.TpurayError) and error.code == 2


def test_an_error_may_carry_its_own_exit_code() -> None:
    assert errors.UserError("the dev preview has mandatory policy violations", code=1).code == 1


def test_a_config_error_prints_one_line_per_problem(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.qa.yaml"
    stack.write_text("config:\n  tpuray:environment: qa\n")
    assert main(["preview", str(stack)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) > 1 and all(line.startswith("error: tpuray:") for line in lines)


def test_no_library_module_imports_the_cli() -> None:
    importers = []
    for path in sorted(TPURAY.rglob("*.py")):
        # Entry points; preview/fork.py's forked child runs a whole (other) tree's CLI.
        if path.name in ("cli.py", "__main__.py") or path.relative_to(TPURAY).as_posix() == "preview/fork.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "tpuray.cli":
                importers.append(str(path.relative_to(TPURAY)))
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "tpuray"
                and any(a.name == "cli" for a in node.names)
            ):
                importers.append(str(path.relative_to(TPURAY)))
    assert importers == []


def test_a_config_errors_text_is_its_lines_one_per_line() -> None:
    assert str(errors.ConfigError(["tpuray:gcp.project: missing", "tpuray:ray.python: '3.12' is invalid"])) == (
        "tpuray:gcp.project: missing\ntpuray:ray.python: '3.12' is invalid"
    )
