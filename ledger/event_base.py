"""The base of the event vocabulary: the ``Event`` Struct, where a row's bytes
are (``Location``), and the bounded field types every kind uses (EV-1).

``ledger.events`` re-exports each name; it holds the kinds and the union.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = [
    "AttemptKey",
    "Event",
    "IndexEntry",
    "Location",
    "NonNegative",
    "Positive",
    "Reason",
    "Sha256Hex",
]

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Positive = Annotated[int, msgspec.Meta(ge=1)]
Sha256Hex = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
Reason = Annotated[str, msgspec.Meta(max_length=2000)]

#: `[task, rollout, attempt]`, as stored in release lists.
AttemptKey = tuple[NonNegative, NonNegative, NonNegative]

#: One materialized row: `[task, rollout, offset, length, agent, rollout_id]`.
IndexEntry = tuple[
    NonNegative, NonNegative, NonNegative, NonNegative, str | None, str | None
]


class Location(msgspec.Struct, frozen=True, kw_only=True):
    """Where a row's bytes are: file (run-relative), offset, length, sha256."""

    file: str
    offset: NonNegative
    length: NonNegative
    row_sha256: Sha256Hex


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    """The base of every event body; the tag field ``kind`` names the kind."""
