"""The help's layout: as wide as the terminal, and no word split at a hyphen.

click wraps help at a width of its own (at most 80, whatever ``COLUMNS``
says), and lets textwrap break a word after a hyphen, so ``rollout-`` could
end one line and ``ledger record`` start the next. Here the help is as wide as
``COLUMNS`` (else the terminal, else 80), kept within 40..200, less the margin
of 2 columns click and argparse leave; and a hyphen never ends a line.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable

import click
from click import formatting

__all__ = ["HelpContext", "HelpFormatter", "help_width"]

#: The narrowest and widest help, in columns, whatever ``COLUMNS`` says.
COLUMNS_RANGE = (40, 200)
#: Columns when neither ``COLUMNS`` nor a terminal says (a pipe, a file, CI).
DEFAULT_COLUMNS = 80
#: Columns left free at the right, as click and argparse leave them.
MARGIN = 2
#: Stands for "-" while click wraps: textwrap may break after "-", never after
#: this character (one of Unicode's private use, so never in a help text).
_HYPHEN = "\ue000"


def help_width() -> int:
    """The help's width: ``COLUMNS``, else the terminal's, else 80; less the margin.

    click's test runner pretends to be an 80-column terminal: ``COLUMNS`` given
    to it still wins, as it does over a real terminal.
    """
    given = os.environ.get("COLUMNS", "")
    if given.isdecimal() and int(given) > 0:
        columns = int(given)
    elif formatting.FORCED_WIDTH is not None:
        columns = formatting.FORCED_WIDTH
    else:
        columns = shutil.get_terminal_size((DEFAULT_COLUMNS, 24)).columns
    low, high = COLUMNS_RANGE
    return min(max(columns, low), high) - MARGIN


def _keep(text: str) -> str:
    """``text`` whose hyphens do not break a line."""
    return text.replace("-", _HYPHEN)


class HelpFormatter(click.HelpFormatter):
    """click's formatter at ``help_width()``, wrapping only at spaces.

    A width given explicitly (``terminal_width``, as the CLI reference and
    tests give it) is used as it is.
    """

    def __init__(
        self,
        indent_increment: int = 2,
        width: int | None = None,
        max_width: int | None = None,
    ) -> None:
        super().__init__(indent_increment, width or help_width(), max_width)

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        super().write_usage(_keep(prog), _keep(args), prefix)

    def write_text(self, text: str) -> None:
        super().write_text(_keep(text))

    def write_dl(
        self,
        rows: Iterable[tuple[str, str]],
        col_max: int = 30,
        col_spacing: int = 2,
    ) -> None:
        kept = [(_keep(term), _keep(words)) for term, words in rows]
        # click gives the options' names 30 columns at any width; narrower than
        # 80 columns, a third of the width, so their help keeps room (a longer
        # name has a line of its own).
        if self.width < DEFAULT_COLUMNS - MARGIN:
            col_max = min(col_max, self.width // 3)
        super().write_dl(kept, col_max, col_spacing)

    def getvalue(self) -> str:
        return super().getvalue().replace(_HYPHEN, "-")


class HelpContext(click.Context):
    """A click context whose help is laid out by ``HelpFormatter``."""

    formatter_class = HelpFormatter
