"""Decoding stored rows into :class:`StoredEvent` values (EV-3)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from ledger.errors import CorruptLedger, UnknownEvent
from ledger.events import KINDS, Event, StoredEvent, decode_body, kind_of
from ledger.store.port import EventRow

__all__ = ["decode_row", "stored_from_row"]


def decode_row(row: EventRow, *, path: Path | str | None = None) -> StoredEvent:
    """Decode one stored row; an unknown kind raises :class:`UnknownEvent` (EV-3)."""
    if row.kind not in KINDS:
        raise UnknownEvent(seq=row.seq, kind=row.kind, path=path)
    try:
        body = decode_body(bytes(row.body))
    except (msgspec.DecodeError, RecursionError) as exc:
        raise CorruptLedger(
            f"event seq {row.seq} ({row.kind}) does not decode: {exc}; "
            "run `rollout-ledger verify` to see what changed",
            seq=row.seq,
            path=path,
        ) from exc
    if kind_of(body) != row.kind:
        raise CorruptLedger(
            f"event seq {row.seq} is stored as {row.kind!r} but its body is "
            f"{kind_of(body)!r}",
            seq=row.seq,
            path=path,
        )
    return StoredEvent(
        seq=row.seq,
        kind=row.kind,
        at=row.at,
        actor=row.actor,
        body=body,
        prev_hash=bytes(row.prev_hash),
        hash=bytes(row.hash),
    )


def stored_from_row(row: EventRow, body: Event) -> StoredEvent:
    return StoredEvent(
        seq=row.seq,
        kind=row.kind,
        at=row.at,
        actor=row.actor,
        body=body,  # type: ignore[arg-type]
        prev_hash=row.prev_hash,
        hash=row.hash,
    )
