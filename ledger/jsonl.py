"""JSON Lines encoding shared by every file the ledger writes rows to."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

__all__ = ["encode_row", "encode_rows", "is_json_object"]

_ROW_ENCODER = msgspec.json.Encoder(order="deterministic")
_DECODER = msgspec.json.Decoder()


def encode_row(row: Mapping[str, Any]) -> bytes:
    """One row as deterministic JSON (sorted keys) and a newline."""
    return _ROW_ENCODER.encode(row) + b"\n"


def encode_rows(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """Rows as JSON Lines, one deterministic object a line (ID-30's digest input)."""
    return b"".join(encode_row(row) for row in rows)


def is_json_object(data: bytes) -> bool:
    """Whether ``data`` is one complete JSON object (whitespace around it allowed).

    REC-83: a last line without its newline is kept when this holds (its
    write finished but for the newline), and cut back when it does not.
    """
    try:
        return isinstance(_DECODER.decode(data), dict)
    except (msgspec.DecodeError, RecursionError):
        return False
