"""The hash chain (EV-2), in one place: chaining new rows and finding a break."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Sequence

import msgspec

from ledger.errors import CorruptLedger
from ledger.events import ZERO_HASH, chain_hash, header_tail
from ledger.store.port import EventRow, NewEvent

__all__ = [
    "ChainBreak",
    "chain_refusal",
    "chained_rows",
    "checked_fold_rows",
    "checked_rows",
    "first_chain_break",
    "fold_triples",
]


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


def chained_rows(events: Sequence[NewEvent], seq: int, prev: bytes) -> list[EventRow]:
    """``events`` as rows numbered and chained after ``(seq, prev)`` (EV-2).

    Each hash is ``chain_hash``'s, computed with the header's constant part
    (kind, at, actor) encoded once per kind while ``at`` and ``actor`` stay
    the same (one instant and actor per batch, P-2), and the hashed bytes
    formatted in one step.
    """
    sha256, make = hashlib.sha256, tuple.__new__  # an EventRow without its __new__
    rows = []
    tails: dict[str, bytes] = {}
    at_now = actor_now = None
    for kind, at, actor, body in events:
        seq += 1
        if at is not at_now or actor is not actor_now:  # the same objects, usually
            if at != at_now or actor != actor_now:
                tails = {}
            at_now, actor_now = at, actor
        tail = tails.get(kind)
        if tail is None:
            tail = tails[kind] = header_tail(kind, at, actor)
        digest = sha256(b"%s[%d%s%s" % (prev, seq, tail, body)).digest()
        rows.append(make(EventRow, (seq, kind, at, actor, body, prev, digest)))
        prev = digest
    return rows


#: Header tails kept while checking rows: rows of one batch share kind, at, actor.
_TAILS_KEPT = 4096


def checked_rows(
    rows: Iterable[EventRow],
    *,
    where: str,
    from_seq: int = 1,
    prev_hash: Callable[[], bytes | None] | None = None,
) -> Iterator[EventRow]:
    """``rows``, each checked as it is read (R-5); ``CorruptLedger`` names the seq.

    With ``prev_hash`` (the stored hash of the event before ``from_seq``,
    read only when a first row comes; ``None``: that event is missing), the
    rows must be the chain from ``from_seq`` on: no gap, each linked to the one
    before and matching its hash. Without, each row must match its own hash
    (rows read by kind or by seq, whose neighbours are not read).
    """
    sha256 = hashlib.sha256
    tails: dict[tuple[str, str, str], bytes] = {}
    expected, prev = from_seq, None
    for row in rows:
        seq, kind, at, actor, body, stored_prev, digest = row
        if prev_hash is None:
            prev, expected = stored_prev, seq
        elif prev is None:
            prev = ZERO_HASH if from_seq == 1 else prev_hash()
            if prev is None:
                _refuse(where, from_seq - 1, "it is missing (deleted, or lost)")
        key = (kind, at, actor)
        tail = tails.get(key)
        if tail is None:
            if len(tails) >= _TAILS_KEPT:
                tails.clear()
            tail = tails[key] = header_tail(kind, at, actor)
        if (
            seq != expected
            or stored_prev != prev
            or sha256(b"%s[%d%s%s" % (prev, seq, tail, body)).digest() != digest
        ):
            reason = _check(row, expected, bytes(prev))  # type: ignore[arg-type]
            _refuse(where, min(seq, expected), reason or "it does not match")
        yield row
        prev, expected = digest, expected + 1


def _refuse(where: str, seq: int, reason: str) -> None:
    raise chain_refusal(where, seq, reason)


def chain_refusal(where: str, seq: int, reason: str) -> CorruptLedger:
    """The refusal of a command that read a break of the chain at ``seq`` (R-5)."""
    return CorruptLedger(
        f"{where}: event seq {seq}: {reason}; run `rollout-ledger verify` for the "
        "full check, and restore ledger.db from a backup",
        seq=seq,
        path=where,
    )


#: A byte JSON would escape, or one that is not ASCII: such text goes the slow way.
_SPECIAL = re.compile(rb'[^\x20-\x7e]|["\\]')
_TEXT_ENCODER = msgspec.json.Encoder()


def _json_text(raw: bytes) -> bytes:
    """The JSON string ``chain_hash`` encodes for the stored text ``raw``."""
    if _SPECIAL.search(raw) is None:
        return b'"%s"' % raw
    return _TEXT_ENCODER.encode(raw.decode("utf-8", "replace"))


def checked_fold_rows(
    batches: Iterable[list[tuple[int, bytes, bytes, bytes, bytes, bytes, bytes]]],
    *,
    where: str,
    from_seq: int,
    prev_hash: bytes,
) -> Iterator[tuple[int, str, bytes]]:
    """Replay's ``(seq, kind, body)`` of raw rows, checked as the chain (R-5, P-3).

    ``batches`` of rows ``(seq, kind, body, at, actor, prev_hash, hash)``, the
    text columns as their stored bytes (no text conversion per value, which
    would cost replay a third of its rate): the header is formatted from them,
    each kind, actor and run of equal ``at`` encoded once. The first row that
    is not the next link after ``prev_hash`` is ``CorruptLedger`` naming it.
    """
    sha256 = hashlib.sha256
    heads: dict[tuple[bytes, bytes, bytes], tuple[bytes, str]] = {}
    expected, prev = from_seq, prev_hash
    try:
        for batch in batches:
            for seq, kind, body, at, actor, stored_prev, digest in batch:
                key = (kind, at, actor)
                head = heads.get(key)
                if head is None:
                    head = _head(heads, key)
                if (
                    seq != expected
                    or stored_prev != prev
                    or sha256(b"%s[%d%s%s" % (prev, seq, head[0], body)).digest()
                    != digest
                ):
                    break
                yield seq, head[1], body
                prev, expected = digest, expected + 1
            else:
                continue
            break
        else:
            return
    except TypeError:  # a column stored as text where bytes belong
        pass
    row = (seq, kind, body, at, actor, stored_prev, digest)
    raise chain_refusal(where, min(seq, expected), _why(row, expected, prev))


def _head(
    heads: dict[tuple[bytes, bytes, bytes], tuple[bytes, str]],
    key: tuple[bytes, bytes, bytes],
) -> tuple[bytes, str]:
    """The header's tail after the seq for ``key``, and the kind as text."""
    if len(heads) >= _TAILS_KEPT:
        heads.clear()
    kind, at, actor = key
    tail = b",%s,%s,%s]\n" % (_json_text(kind), _json_text(at), _json_text(actor))
    head = heads[key] = (tail, kind.decode("utf-8", "replace"))
    return head


def _why(
    row: tuple[int, bytes, bytes, bytes, bytes, bytes, bytes],
    expected: int,
    prev: bytes,
) -> str:
    seq, kind, body, at, actor, stored_prev, digest = row
    for column, value in (("body", body), ("prev_hash", stored_prev), ("hash", digest)):
        if type(value) is not bytes:
            return f"its {column} is stored as text, not as bytes"
    kind_text, at_text, actor_text = (
        value.decode("utf-8", "replace") for value in (kind, at, actor)
    )
    stored = EventRow(seq, kind_text, at_text, actor_text, body, stored_prev, digest)
    return _check(stored, expected, prev) or "it does not match its hash"


def fold_triples(
    rows: Iterable[EventRow], *, where: str, from_seq: int, after: bytes | None
) -> Iterator[tuple[int, str, bytes]]:
    """``(seq, kind, body)`` of stored ``rows``: replay's read for a store.

    With ``after`` (the hash of the event before ``from_seq``), the rows are
    checked as the chain that follows it (R-5).
    """
    if after is not None:
        rows = checked_rows(
            rows, where=where, from_seq=from_seq, prev_hash=lambda: after
        )
    for row in rows:
        yield row.seq, row.kind, bytes(row.body)
