"""Every line tpuray prints to a terminal starts here: Rich consoles that never read markup.

Messages carry user values (a `gs://BUCKET[/PREFIX]` hint, a mistyped URI, a Secret Manager
name pattern, a stack name), and Rich reads `[...]` in a plain string as markup: a closing tag
it cannot match raises `rich.errors.MarkupError` mid-print, so a one-line config error became a
traceback and exit 1. So nothing here parses markup: a console prints strings, table cells,
rules and titles as the text they are, and colour is given as a style on `Text` pieces
(`styled`). A spinner (`Console.status`) and a progress column read markup whatever the
console says (rich `Spinner` and `TextColumn` call `Text.from_markup` on a str), so their
text goes in as `Text` (`text`) and progress columns come from `progress_text_column`.

tests/test_terminal.py keeps the rest of the package on this module: no other module builds a
`Console`, asks for markup, or calls `Text.from_markup`.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import TextColumn
from rich.text import Text


def console(*, stderr: bool = False, **options: Any) -> Console:
    """A console that prints text as text: no markup, no `:name:` emoji codes, no highlighting
    of numbers or paths."""
    return Console(stderr=stderr, markup=False, emoji=False, highlight=False, **options)


def text(value: str) -> Text:
    """`value` as plain text, for the renderables that would read a str as markup."""
    return Text(value)


def styled(*parts: str | tuple[str, str]) -> Text:
    """Pieces of text, each plain or (text, style): `styled(("error:", "bold red"), " ", line)`."""
    return Text.assemble(*parts)


def progress_text_column(template: str) -> TextColumn:
    """A progress column whose formatted text (a task description with user values) is plain."""
    return TextColumn(template, markup=False)
