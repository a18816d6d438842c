"""`tpuray doctor [STACK]`: can this machine run the demo and the tests? One line per check."""

from __future__ import annotations

import argparse

from rich.console import Console

from tpuray import doctor, terminal
from tpuray.errors import UserError

EXIT_BLOCKED = 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check what the demo and the tests need: ok, or a fix per line")
    p.add_argument("stack", nargs="?", default="dev", help="the stack whose emulated hosts must fit (default dev)")
    p.add_argument("--serve-port", type=int, default=None, help="the demo's Serve HTTP port to check (default 8000)")
    p.set_defaults(handler=run)


def report(checks: list[doctor.Check], console: Console) -> list[doctor.Check]:
    """Print one line per check; return the checks that block."""
    colour = {True: "green", False: "yellow"}
    for check in checks:
        style = "red" if check.blocks else colour[check.ok]
        word, _, rest = check.line().partition(" ")
        console.print(terminal.styled((word, style), f" {rest}"))
    return [c for c in checks if c.blocks]


def checks_for(stack: str, serve_port: int | None = None) -> list[doctor.Check]:
    from tpuray.local.localrun import SERVE_HTTP_PORT
    from tpuray.preview.mockrun import run_stack

    return doctor.run_checks(run_stack(stack), serve_port or SERVE_HTTP_PORT)


def run(args: argparse.Namespace) -> int:
    return check(args.stack, args.serve_port)


def check(stack: str, serve_port: int | None = None) -> int:
    """Print the checks for a stack (Serve's port: `serve_port`, default 8000); raise UserError
    (exit 1) when one blocks."""
    console = terminal.console(soft_wrap=True)
    blocking = report(checks_for(stack, serve_port), console)
    if blocking:
        raise UserError(
            f"{len(blocking)} check(s) block the demo: " + "; ".join(f"{c.name}: {c.fix}" for c in blocking),
            code=EXIT_BLOCKED,
        )
    return 0
