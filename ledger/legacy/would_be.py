"""The log a dry run of an import would write, held in a nameless temporary file.

A dry run shows every event the import would record and the coverage that
would result, and writes nothing (REC-74). For a million rollouts those are a
million events: they are chained as the store would chain them (EV-2), each
timestamp taken once, and kept encoded in a temporary file with no name
(about a kilobyte each) instead of in memory (P-9); only their offsets stay
in memory. The log reads like a ledger's (``projections.fold.reading`` folds it on
its fast path) and like the sequence of its events (the report's
``events``). The file goes when the log is dropped.
"""

from __future__ import annotations

import os
import struct
import tempfile
import weakref
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import overload

from ledger.events import ZERO_HASH, StoredEvent, chain_hash
from ledger.store.decode import decode_row
from ledger.store.port import EventRow

__all__ = ["WouldBeLog"]

#: seq, the lengths of kind, at, actor and body, the previous hash, the hash.
_HEAD = struct.Struct("<QHHHI32s32s")


def _record(row: EventRow) -> bytes:
    kind, at, actor = row.kind.encode(), row.at.encode(), row.actor.encode()
    head = _HEAD.pack(
        row.seq, len(kind), len(at), len(actor), len(row.body), row.prev_hash, row.hash
    )
    return b"".join((head, kind, at, actor, row.body))


def _row(data: bytes) -> EventRow:
    seq, kind, at, actor, body, prev, digest = _HEAD.unpack_from(data)
    texts, start = [], _HEAD.size
    for length in (kind, at, actor):
        texts.append(data[start : start + length].decode())
        start += length
    kind_, at_, actor_ = texts
    return EventRow(seq, kind_, at_, actor_, data[start : start + body], prev, digest)


class WouldBeLog(Sequence[StoredEvent]):
    """A dry run's events: a sequence of them and a log ``replay`` reads."""

    where = "the log the dry run would write"

    def __init__(
        self, events: Iterable[tuple[str, bytes]], now: Callable[[], str], actor: str
    ) -> None:
        """Chain ``(kind, body)`` pairs from seq 1, stamped by ``now``."""
        handle = tempfile.TemporaryFile()  # noqa: SIM115 - closed by the finalizer
        self._close = weakref.finalize(self, handle.close)
        self._fd = handle.fileno()
        self._offsets = array("Q", [0])
        prev = ZERO_HASH
        for seq, (kind, body) in enumerate(events, start=1):
            at = now()
            digest = chain_hash(prev, seq, kind, at, actor, body)
            record = _record(EventRow(seq, kind, at, actor, body, prev, digest))
            handle.write(record)
            self._offsets.append(self._offsets[-1] + len(record))
            prev = digest
        handle.flush()

    def _raw(self, index: int) -> EventRow:
        start, end = self._offsets[index], self._offsets[index + 1]
        return _row(os.pread(self._fd, end - start, start))

    # The sequence of events (the report's ``events``).

    def __len__(self) -> int:
        return len(self._offsets) - 1

    @overload
    def __getitem__(self, index: int) -> StoredEvent: ...

    @overload
    def __getitem__(self, index: slice) -> list[StoredEvent]: ...

    def __getitem__(self, index: int | slice) -> StoredEvent | list[StoredEvent]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        number = index + len(self) if index < 0 else index
        if not 0 <= number < len(self):
            raise IndexError("would-be event index out of range")
        return decode_row(self._raw(number), path=self.where)

    def __iter__(self) -> Iterator[StoredEvent]:
        return self.events()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(other) == len(self) and all(
            a == b for a, b in zip(self, other, strict=True)
        )

    __hash__ = None  # type: ignore[assignment]  # equal to a list of its events

    # The log (what ``projections.fold.reading`` reads of a ledger).

    def raw_events(
        self, from_seq: int = 1, *, kinds: Sequence[str] = ()
    ) -> Iterator[EventRow]:
        """The rows from ``from_seq`` (of ``kinds`` only, if given), undecoded."""
        for index in range(max(from_seq, 1) - 1, len(self)):
            row = self._raw(index)
            if not kinds or row.kind in kinds:
                yield row

    def raw_events_at(self, seqs: Sequence[int]) -> Iterator[EventRow]:
        """The rows of ``seqs`` that exist, by ``seq``."""
        for seq in sorted(set(seqs)):
            if 1 <= seq <= len(self):
                yield self._raw(seq - 1)

    def rows_for_fold(self, from_seq: int = 1) -> Iterator[tuple[int, str, bytes]]:
        """``(seq, kind, body)`` from ``from_seq``, as replay's fast path reads them."""
        for row in self.raw_events(from_seq):
            yield row.seq, row.kind, row.body

    def events(
        self, from_seq: int = 1, *, kinds: Sequence[str] = ()
    ) -> Iterator[StoredEvent]:
        """The events from ``from_seq``, decoded."""
        for row in self.raw_events(from_seq, kinds=kinds):
            yield decode_row(row, path=self.where)

    def load_snapshot(
        self, code_version: str, policy_digest: str
    ) -> tuple[int, bytes, bytes] | None:
        """A dry run has no snapshot."""
        return None
