"""Counts said in words: ``plural(1, "row")`` is "1 row", never "1 rows".

The one helper every message, table and text line uses to print a count with
its noun (the library's messages, ``projections``' summaries and the
commands' lines alike).
"""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``"1 row"``, ``"2 rows"``; ``many`` for an irregular plural ("entries")."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {many if many is not None else noun + 's'}"
