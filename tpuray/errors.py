"""The errors tpuray expects: one base class carrying the exit code, so that the CLI turns any of
them into its message (one line per problem) and a non-zero exit, never a traceback, and so that
library code raises them without importing tpuray.cli."""

from __future__ import annotations

from typing import Any

EXIT_USAGE = 2  # bad config, a bad argument, an unknown ref: what the user asked for is wrong


def yaml_problem(err: Any) -> str:
    """A PyYAML error as the end of one line, to follow "not valid YAML": where it is and what is
    wrong (PyYAML's own text spans lines and quotes the input), e.g.
    ` at line 2, column 1: did not find expected node content`."""
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(err, "problem", None) or (str(err).splitlines() or [type(err).__name__])[0]
    return f"{where}: {problem}"


class TpurayError(Exception):
    """An expected problem; `code` is the process exit status the CLI returns for it."""

    code: int = EXIT_USAGE

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def lines(self) -> list[str]:
        """What the CLI prints, one `error:` line each."""
        return [str(self)]


class ConfigError(TpurayError):
    """Invalid stack config. `lines` holds one human-readable line per problem."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self._lines = list(lines)

    @property
    def lines(self) -> list[str]:
        return self._lines


class UserError(TpurayError):
    """A problem with what the user asked for; printed as is."""


class DiffError(TpurayError):
    """A problem with a `tpuray diff` request (unknown ref, not a git repository)."""


class EmulatorError(TpurayError, RuntimeError):
    """The emulated cluster cannot be planned, started or found."""
