"""Differences between two identities and their classes (ID-20..ID-22).

:func:`diff_keys` lists the dotted keys whose values differ; :func:`classify_key`
calls each ``operational`` (timeouts, retries, transport, concurrency, health,
paths, tracking, collection control: a resume proceeds with a warning) or
``semantic`` (everything else: a resume refuses); :func:`drift` puts the two
together. The word tables live in :mod:`ledger.identity.key_tables`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal

import msgspec

from ledger.identity.key_tables import (
    FILE_SUFFIXES,
    OPERATIONAL_FIRST_WORDS,
    OPERATIONAL_LAST_WORDS,
    OPERATIONAL_SEGMENTS,
    OPERATIONAL_WORDS,
)
from ledger.identity.key_words import join_key, key_words, segment_form, split_key
from ledger.identity.secrets.redact import credential_named

__all__ = ["Drift", "KeyClass", "classify_key", "diff_keys", "drift"]

KeyClass = Literal["operational", "semantic"]


def _same(a: Any, b: Any) -> bool:
    # Compare as the digest does: 1, 1.0 and true are three different values.
    return msgspec.json.encode(a, order="sorted") == msgspec.json.encode(
        b, order="sorted"
    )


def _differing(a: Any, b: Any, path: tuple[str, ...]) -> Iterator[str]:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in a.keys() | b.keys():
            if key not in a or key not in b:
                yield join_key((*path, key))
            else:
                yield from _differing(a[key], b[key], (*path, key))
    elif not _same(a, b):
        yield join_key(path)


def diff_keys(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The sorted dotted keys whose values differ between two identities (ID-20).

    Mappings are compared key by key; a list is one value; a key present on one
    side only differs as a whole.
    """
    return sorted(_differing(a, b, ()))


def _settings_part(segments: tuple[str, ...]) -> tuple[str, ...]:
    # ID-21: a server's name, kind and implementation never matter.
    if segments[:1] == ("collection",):
        return segments[1:]
    if segments[:1] == ("servers",):
        return segments[4:]
    return segments


def _file_path_segment(segments: tuple[str, ...], index: int) -> bool:
    # ID-9/ID-21: the "path" of a {path, sha256} file value is where the file
    # lies, not what it holds.
    return (
        index > 0
        and segments[index] == "path"
        and segments[index - 1].endswith(FILE_SUFFIXES)
    )


def _operational_segment(segment: str) -> bool:
    words = key_words(segment)
    return bool(
        segment_form(segment) in OPERATIONAL_SEGMENTS
        or OPERATIONAL_WORDS.intersection(words)
        or (words and words[-1] in OPERATIONAL_LAST_WORDS)
        or (words and words[0] in OPERATIONAL_FIRST_WORDS)
        # ID-15: credentials are operational by construction, so adding or
        # removing one is not a change of what a run measures.
        or credential_named(segment)
    )


def classify_key(dotted_key: str) -> KeyClass:
    """``operational`` or ``semantic`` for a dotted identity key (ID-21).

    The settings part is what follows ``collection.`` or
    ``servers.<server>.<kind>.<implementation>.``; a key with neither prefix is
    classified whole. An unknown key, and a whole server, is semantic.
    """
    segments = _settings_part(split_key(dotted_key))
    operational = any(
        _operational_segment(segment) or _file_path_segment(segments, index)
        for index, segment in enumerate(segments)
    )
    return "operational" if operational else "semantic"


class Drift(msgspec.Struct, frozen=True, kw_only=True):
    """The differing keys of two identities, by class (ID-22)."""

    semantic: tuple[str, ...] = ()
    operational: tuple[str, ...] = ()


def drift(
    saved_identity: Mapping[str, Any] | None, current_identity: Mapping[str, Any]
) -> Drift | None:
    """The semantic and operational keys that differ, or None when nothing is saved.

    The caller passes ``None`` when no saved identity counts (ID-33).
    """
    if saved_identity is None:
        return None
    keys = diff_keys(saved_identity, current_identity)
    return Drift(
        semantic=tuple(key for key in keys if classify_key(key) == "semantic"),
        operational=tuple(key for key in keys if classify_key(key) == "operational"),
    )
