"""Hash-chain verification (EV-2): find the first stored event that does not match."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from ledger.events import ZERO_HASH, chain_hash
from ledger.store.sqlite import EventRow

__all__ = ["ChainBreak", "first_chain_break"]


class ChainBreak(msgspec.Struct, frozen=True, kw_only=True):
    """The first ``seq`` whose stored bytes break the chain, and how."""

    seq: int
    reason: str


def _check(row: EventRow, expected_seq: int, prev_hash: bytes) -> str | None:
    if row.seq != expected_seq:
        return (
            f"seq {row.seq} stands where seq {expected_seq} should (a gap or an edit)"
        )
    if bytes(row.prev_hash) != prev_hash:
        return "its prev_hash is not the hash of the event before it"
    digest = chain_hash(
        prev_hash, row.seq, row.kind, row.at, row.actor, bytes(row.body)
    )
    if bytes(row.hash) != digest:
        return "its stored hash does not match its seq, kind, at, actor and body bytes"
    return None


def first_chain_break(
    rows: Iterable[EventRow], *, from_seq: int = 1, prev_hash: bytes = ZERO_HASH
) -> ChainBreak | None:
    """Recompute the chain over ``rows`` (in seq order); ``None`` when it holds."""
    expected = from_seq
    for row in rows:
        reason = _check(row, expected, prev_hash)
        if reason is not None:
            return ChainBreak(seq=min(row.seq, expected), reason=reason)
        prev_hash = bytes(row.hash)
        expected += 1
    return None
