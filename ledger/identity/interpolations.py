"""A small brace-matching scanner for ``${...}`` interpolations inside strings (ID-8).

OmegaConf's grammar parser is private, so finding and rewriting interpolations
(ID-5 connection references, ID-12 credential interpolations) uses this scanner,
which follows the same lexical rules: ``\\${`` escapes an interpolation (an even
run of backslashes before ``${`` does not); inside an interpolation, a backslash
escapes the next character, ``{``/``}`` nest, and a quote opens a quoted string
that ends at the same quote and may itself hold interpolations. A ``${`` without
its closing brace is no interpolation (OmegaConf refuses to resolve it).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "Interpolation",
    "find_interpolations",
    "has_interpolation",
    "replace_interpolations",
]

_QUOTES = "'\""


@dataclass(frozen=True)
class Interpolation:
    """One top-level ``${...}`` of a string: its span and what it names."""

    start: int
    end: int
    body: str

    @property
    def resolver(self) -> str | None:
        """The resolver name (``oc.env``), or ``None`` for a plain key reference."""
        colon = _top_level_index(self.body, ":")
        return None if colon < 0 else self.body[:colon].strip()

    @property
    def args(self) -> tuple[str, ...]:
        """The resolver's arguments (split at top-level commas, stripped)."""
        colon = _top_level_index(self.body, ":")
        if colon < 0:
            return ()
        return tuple(arg.strip() for arg in _split_top_level(self.body[colon + 1 :]))

    @property
    def name(self) -> str:
        """The key a reference names, or a resolver's first argument, unquoted."""
        if self.resolver is None:
            return self.body.strip()
        first = self.args[0] if self.args else ""
        return (
            first[1:-1]
            if len(first) > 1 and first[0] == first[-1] in _QUOTES
            else first
        )

    @property
    def nested(self) -> tuple[Interpolation, ...]:
        """The interpolations inside this one's body, at any depth."""
        inner = find_interpolations(self.body)
        return tuple(inner) + tuple(deep for one in inner for deep in one.nested)


def _escaped(text: str, index: int) -> bool:
    # A character is escaped by an odd run of backslashes before it.
    run = 0
    while index - run - 1 >= 0 and text[index - run - 1] == "\\":
        run += 1
    return run % 2 == 1


def _close_quote(text: str, index: int, quote: str) -> int:
    """The index after the quoted string opening at ``index``, or -1."""
    i = index + 1
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
        elif char == quote:
            return i + 1
        elif text.startswith("${", i):
            i = _close_interpolation(text, i)
            if i < 0:
                return -1
        else:
            i += 1
    return -1


def _close_interpolation(text: str, index: int) -> int:
    """The index after the interpolation opening at ``index`` (``${``), or -1."""
    depth = 0
    i = index + 2
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char in _QUOTES:
            i = _close_quote(text, i, char)
            if i < 0:
                return -1
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            if depth == 0:
                return i + 1
            depth -= 1
        i += 1
    return -1


def find_interpolations(text: str) -> list[Interpolation]:
    """The top-level interpolations of a string, in order."""
    found: list[Interpolation] = []
    i = text.find("${")
    while i >= 0:
        end = -1 if _escaped(text, i) else _close_interpolation(text, i)
        if end < 0:
            i = text.find("${", i + 2)
            continue
        found.append(Interpolation(i, end, text[i + 2 : end - 1]))
        i = text.find("${", end)
    return found


def has_interpolation(text: str) -> bool:
    """Whether a string holds at least one interpolation."""
    return "${" in text and bool(find_interpolations(text))


def replace_interpolations(
    text: str, replace: Callable[[Interpolation], str | None]
) -> str:
    """The string with each top-level interpolation replaced (``None`` keeps it)."""
    if "${" not in text:
        return text
    parts: list[str] = []
    last = 0
    for one in find_interpolations(text):
        replacement = replace(one)
        if replacement is not None:
            parts.extend((text[last : one.start], replacement))
            last = one.end
    parts.append(text[last:])
    return "".join(parts)


def _top_level_positions(text: str) -> list[tuple[int, str]]:
    """``(index, char)`` of every character outside quotes, brackets and nesting."""
    positions: list[tuple[int, str]] = []
    depth = 0
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char in _QUOTES:
            end = _close_quote(text, i, char)
            i = len(text) if end < 0 else end
            continue
        if text.startswith("${", i):
            end = _close_interpolation(text, i)
            i = len(text) if end < 0 else end
            continue
        depth += (char in "[{") - (char in "]}")
        if depth == 0:
            positions.append((i, char))
        i += 1
    return positions


def _top_level_index(text: str, char: str) -> int:
    return next((i for i, c in _top_level_positions(text) if c == char), -1)


def _split_top_level(text: str) -> list[str]:
    cuts = [i for i, c in _top_level_positions(text) if c == ","]
    bounds = [-1, *cuts, len(text)]
    return [text[a + 1 : b] for a, b in itertools.pairwise(bounds)]
