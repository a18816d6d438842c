"""The errors tpuray expects: one base class carrying the exit code, so that the CLI turns any of
them into its message (one line per problem) and a non-zero exit, never a traceback, and so that
library code raises them without importing tpuray.cli."""

from __future__ import annotations

EXIT_USAGE = 2  # bad config, a bad argument, an unknown ref: what the user asked for is wrong


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
