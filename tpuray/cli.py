"""The `tpuray` command. Each subcommand lives in tpuray/commands/<name>.py and exposes
`register(subparsers)`; this module finds them, parses, and turns expected errors into
one clear line and a non-zero exit (never a traceback)."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from tpuray import commands, terminal
from tpuray.errors import EXIT_USAGE, TpurayError, UserError

EXIT_CONFIG = EXIT_USAGE
EXIT_OS = 1  # the machine refused: a path that cannot be read or written (not what was asked for)
__all__ = ["UserError", "build_parser", "main"]


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """Every subcommand, or only the one argv names: each command module is named after its
    command, and importing all of them (CEL, checkov, Prometheus helpers...) would cost a
    `tpuray preview` about a second it does not need."""
    parser = argparse.ArgumentParser(prog="tpuray", description="Ray workloads on GKE TPU slices.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    names = sorted(info.name for info in pkgutil.iter_modules(commands.__path__))
    first = next((arg for arg in argv or [] if not arg.startswith("-")), None)
    for name in [first] if first in names else names:
        importlib.import_module(f"{commands.__name__}.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    err = terminal.console(stderr=True, soft_wrap=True)
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except TpurayError as exc:  # ConfigError, CatalogError, UserError, ...: one line per problem
        for line in exc.lines:
            err.print(terminal.styled(("error:", "bold red"), f" {line}"))
        return exc.code
    except OSError as exc:  # a file or folder the command was given that cannot be read or written
        where = f"{exc.filename}: " if exc.filename else ""
        err.print(terminal.styled(("error:", "bold red"), f" {where}{exc.strerror or exc}"))
        return EXIT_OS
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130


if __name__ == "__main__":
    # Run through the imported module: as __main__ this file would define a second
    # UserError class that commands (which import tpuray.cli) never raise.
    from tpuray.cli import main as imported_main

    sys.exit(imported_main())
