"""The `tpuray` entry point itself (tpuray/cli.py): which command modules it loads, and how it
turns a command's expected error or an interrupt into an exit status and one line each."""

from __future__ import annotations

import argparse
import io
from typing import Any

import pytest

from tpuray import cli, terminal
from tpuray.config import ConfigError
from tpuray.errors import TpurayError

EVERY_COMMAND = [
    "bundle", "check", "cost", "demo", "diff", "doctor", "images", "local", "preview", "prices", "render", "topology",
]  # fmt: skip


def commands_of(parser: argparse.ArgumentParser) -> list[str]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(sub.choices)


def test_a_named_command_loads_only_its_own_module() -> None:
    assert commands_of(cli.build_parser(["preview", "dev", "--json"])) == ["preview"]


def test_options_before_the_command_do_not_hide_it() -> None:
    assert commands_of(cli.build_parser(["--verbose", "cost", "prod"])) == ["cost"]


def test_no_command_or_an_unknown_one_loads_every_command_for_the_usage_text() -> None:
    assert commands_of(cli.build_parser([])) == EVERY_COMMAND
    assert commands_of(cli.build_parser(["deploy"])) == EVERY_COMMAND


def test_an_unknown_command_exits_2_naming_the_valid_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["deploy"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "tpuray: error: argument COMMAND: invalid choice: 'deploy' (choose from 'bundle', 'check', 'cost', "
        "'demo', 'diff', 'doctor', 'images', 'local', 'preview', 'prices', 'render', 'topology')"
    )


def _parser_whose_command_raises(error: BaseException) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tpuray")
    sub = parser.add_subparsers(dest="command", required=True)

    def handler(args: argparse.Namespace) -> int:
        raise error

    sub.add_parser("boom").set_defaults(handler=handler)
    return parser


def test_an_expected_error_prints_each_line_and_exits_with_its_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    error = ConfigError(["tpuray:gcp.region: missing", "tpuray:slicePools[0].topology: '4x3' is invalid"])
    monkeypatch.setattr(cli, "build_parser", lambda argv: _parser_whose_command_raises(error))
    assert cli.main(["boom"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.splitlines() == [
        "error: tpuray:gcp.region: missing",
        "error: tpuray:slicePools[0].topology: '4x3' is invalid",
    ]


def test_an_error_with_its_own_code_exits_with_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "build_parser", lambda argv: _parser_whose_command_raises(TpurayError("slices down", 3)))
    assert cli.main(["boom"]) == 3
    assert capsys.readouterr().err == "error: slices down\n"


def test_an_interrupt_exits_130_with_one_word(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "build_parser", lambda argv: _parser_whose_command_raises(KeyboardInterrupt()))
    assert cli.main(["boom"]) == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_a_command_returning_none_exits_0(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = argparse.ArgumentParser(prog="tpuray")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("quiet").set_defaults(handler=lambda args: None)
    monkeypatch.setattr(cli, "build_parser", lambda argv: parser)
    assert cli.main(["quiet"]) == 0


def test_the_help_names_the_tool_its_purpose_and_the_command_slot(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.splitlines()[:4] == [
        "usage: tpuray [-h] COMMAND ...",
        "",
        "Ray workloads on GKE TPU slices.",
        "",
    ]


def test_no_command_exits_2_asking_for_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main([])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == "tpuray: error: the following arguments are required: COMMAND"


def test_without_arguments_main_reads_the_command_line_and_loads_only_its_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed: list[list[str] | None] = []

    def build_parser(argv: list[str] | None) -> argparse.ArgumentParser:
        parsed.append(argv)
        parser = argparse.ArgumentParser(prog="tpuray")
        parser.add_subparsers(dest="command", required=True).add_parser("quiet").set_defaults(handler=lambda a: 7)
        return parser

    monkeypatch.setattr(cli, "build_parser", build_parser)
    monkeypatch.setattr(cli.sys, "argv", ["tpuray", "quiet"])
    assert cli.main() == 7
    assert parsed == [["quiet"]]


def test_on_a_terminal_only_the_error_prefix_is_coloured(monkeypatch: pytest.MonkeyPatch) -> None:
    # rich's highlighter would colour the quoted value and the number of the line.
    out = io.StringIO()

    class Terminal(terminal.Console):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**{**kwargs, "file": out, "force_terminal": True, "color_system": "standard"})

    monkeypatch.setattr(terminal, "Console", Terminal)
    monkeypatch.setattr(
        cli, "build_parser", lambda argv: _parser_whose_command_raises(TpurayError("'4x3' is 12 chips"))
    )
    assert cli.main(["boom"]) == 2
    assert out.getvalue() == "\x1b[1;31merror:\x1b[0m '4x3' is 12 chips\n"
