"""Configuration key names: their words (ID-11) and escaped dotted keys (ID-20).

A key splits into lowercase words on every character that is not a letter or a
digit (``_``, ``-``, ``.``, spaces, ...), on lower-to-upper case changes and at
the end of an acronym, so ``HFToken``, ``hf_token`` and ``HF-TOKEN`` all give
``("hf", "token")``. A dotted key joins the segments of a path with ``.``; a
segment holding ``.`` or ``\\`` escapes it with a backslash, so every dotted key
names exactly one place.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "escape_segment",
    "join_key",
    "key_words",
    "normalized_key",
    "segment_form",
    "split_key",
]

# ID-11: an acronym ends where an uppercase letter starts a lowercase word
# ("HFToken" is "HF", "Token"); digits are words of their own.
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_ESCAPE = re.compile(r"([\\.])")


def key_words(key: str) -> tuple[str, ...]:
    """The lowercase words of a key name (ID-11)."""
    return tuple(word.lower() for word in _WORD.findall(key))


def normalized_key(key: str) -> str:
    """The concatenation of a key's words: ``X-Api-Key`` is ``xapikey`` (ID-11)."""
    return "".join(key_words(key))


def segment_form(key: str) -> str:
    """A key's words joined by ``_``: ``baseUrl`` and ``BASE-URL`` are ``base_url``."""
    return "_".join(key_words(key))


def escape_segment(segment: str) -> str:
    """One path segment with ``.`` and ``\\`` escaped by a backslash (ID-20)."""
    return _ESCAPE.sub(r"\\\1", segment)


def join_key(segments: Iterable[str]) -> str:
    """The dotted key of a path of mapping keys (ID-20)."""
    return ".".join(escape_segment(segment) for segment in segments)


def split_key(dotted: str) -> tuple[str, ...]:
    """The segments of a dotted key, undoing :func:`join_key`."""
    segments: list[str] = []
    current: list[str] = []
    chars = iter(dotted)
    for char in chars:
        if char == "\\":
            current.append(next(chars, "\\"))
        elif char == ".":
            segments.append("".join(current))
            current = []
        else:
            current.append(char)
    segments.append("".join(current))
    return tuple(segments)
