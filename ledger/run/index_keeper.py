"""The writer's index, kept in step with the log (REC-3, EV-12, EV-14, SC-4).

:func:`fold_index` folds the write index from the log, starting from a stored
index when one still holds (EV-14). :class:`IndexKeeper` holds a writer's index
and keeps it in step: the bodies it appends are folded when the index is next
read, and where other writers append to the same log (workers on PostgreSQL,
SC-4) it folds what they appended too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import msgspec

from ledger.errors import StorageError
from ledger.events import Event, Location
from ledger.run.write_index import (
    END_KINDS,
    INDEX_CODE_VERSION,
    INDEX_KINDS,
    FileEnd,
    WriteIndex,
)
from ledger.store.decode import decode_row
from ledger.store.port import EventRow, EventStore

__all__ = [
    "ENDS_VERSION",
    "IndexKeeper",
    "encode_ends",
    "fold_ends",
    "fold_index",
    "save_ends",
]

logger = logging.getLogger("ledger")


def fold_index(
    store: EventStore, where: str, *, save_every: int | None
) -> tuple[WriteIndex, int]:
    """The write index of the log, and the last seq folded into it.

    Starts from the stored index when its event is still in the log with the
    same hash, and folds only the events after it; with ``save_every``, a tail
    at least that long is stored as the new index (a restarting collector then
    reads the tail of a long log, not all of it).
    """
    index, start = _stored_index(store)
    last = fold_tail(store, where, index, start)
    if save_every is not None and last - start + 1 >= save_every:
        code = INDEX_CODE_VERSION
        store.save_snapshot(last, store.hash_at(last) or b"", code, "", index.encode())
    return index, last


#: The snapshot key of the file ends alone, stored apart from the index (P-8).
ENDS_VERSION = "ends-" + INDEX_CODE_VERSION
_ENDS = msgspec.msgpack.Decoder(list[tuple[str, int, int]])


def fold_ends(
    store: EventStore, where: str, *, save_every: int | None = None
) -> WriteIndex:
    """The log's write index for its file ends alone (P-8).

    From the newer of the stored index's ends and the stored ends, and the
    events after it that move an end; the rest of what it holds is unused.
    With ``save_every`` (a lock holder) and a tail at least that long, the
    ends it folded are stored, so the next open reads a short tail.
    """
    index, start = _stored_index(store, ends_only=True)
    ends, after = _stored_ends(store)
    if after > start:
        index, start = ends, after
    last = start - 1
    for row in store.rows(start, kinds=END_KINDS):  # only what moves an end
        _apply_end(index, row, where)
        last = row.seq
    if save_every is not None and store.head()[0] - start + 1 >= save_every:
        save_ends(store, index, store.head()[0] if last < start else last)
    return index


class _ResultWhere(msgspec.Struct, tag_field="kind", tag="result_saved"):
    location: Location


class _FailureWhere(msgspec.Struct, tag_field="kind", tag="failure_saved"):
    location: Location
    sidecar_line: int


class _OmissionWhere(msgspec.Struct, tag_field="kind", tag="omission_saved"):
    location: Location
    sidecar_line: int


#: An outcome event read for where its row is, its facts skipped (a third of
#: the time of a whole decode): the tag still refuses a body of another kind.
_Where = _ResultWhere | _FailureWhere | _OmissionWhere
_WHERE: dict[str, msgspec.json.Decoder[_Where]] = {
    "result_saved": msgspec.json.Decoder(_ResultWhere),
    "failure_saved": msgspec.json.Decoder(_FailureWhere),
    "omission_saved": msgspec.json.Decoder(_OmissionWhere),
}


def _apply_end(index: WriteIndex, row: EventRow, where: str) -> None:
    """Fold one row of ``END_KINDS`` into ``index``'s ends."""
    decoder = _WHERE.get(row.kind)
    if decoder is not None:
        try:
            found = decoder.decode(row.body)
        except (msgspec.DecodeError, RecursionError):
            pass  # decoded whole below, for the error that names it
        else:
            line = getattr(found, "sidecar_line", None)
            index.advance(found.location, line)
            return
    index.apply(decode_row(row, path=where).body)


def encode_ends(index: WriteIndex) -> bytes:
    """``index``'s file ends as stored under ``ENDS_VERSION``."""
    return msgspec.msgpack.encode(
        sorted((f, e.offset, e.lines) for f, e in index.ends.items())
    )


def save_ends(store: EventStore, index: WriteIndex, seq: int) -> None:
    """Store ``index``'s file ends as of ``seq`` (whose events it folded)."""
    data = encode_ends(index)
    store.save_snapshot(seq, store.hash_at(seq) or b"", ENDS_VERSION, "", data)


def _stored_ends(store: EventStore) -> tuple[WriteIndex, int]:
    found = store.load_snapshot(ENDS_VERSION, "")
    if found is None or store.hash_at(found[0]) != found[1]:
        return WriteIndex(), 1
    try:
        ends = _ENDS.decode(found[2])
    except (msgspec.DecodeError, RecursionError):
        return WriteIndex(), 1  # a damaged snapshot is ignored, never trusted
    index = WriteIndex(ends={f: FileEnd(offset, lines) for f, offset, lines in ends})
    return index, found[0] + 1


def _stored_index(
    store: EventStore, *, ends_only: bool = False
) -> tuple[WriteIndex, int]:
    found = store.load_snapshot(INDEX_CODE_VERSION, "")
    if found is None or store.hash_at(found[0]) != found[1]:
        return WriteIndex(), 1
    try:
        decode = WriteIndex.decode_ends if ends_only else WriteIndex.decode
        return decode(found[2]), found[0] + 1
    except (msgspec.DecodeError, RecursionError):
        return WriteIndex(), 1  # a damaged snapshot is ignored, never trusted


def fold_tail(store: EventStore, where: str, index: WriteIndex, from_seq: int) -> int:
    """Fold the index kinds from ``from_seq``; the last seq folded (or before)."""
    last = from_seq - 1
    for row in store.rows(from_seq, kinds=INDEX_KINDS):
        index.apply(decode_row(row, path=where).body)
        last = row.seq
    return last


class IndexKeeper:
    """A writer's write index: folded at open, then kept in step with the log."""

    #: Appended bodies kept unfolded at most; past this the index is folded
    #: again from the log when next read, rather than holding them all.
    max_unfolded = 4096

    def __init__(
        self,
        store: EventStore,
        where: str,
        *,
        shared: bool,
        save_every: int | None,
        guard: threading.RLock,
    ) -> None:
        self._store = store
        self._where = where
        self._shared = shared
        self._save_every = save_every
        #: Held around appends and refolds: no append lands between a refold's
        #: read of the log and its use, on any thread.
        self.guard = guard
        # Folded when first read (P-8): a writer that only appends (a resume,
        # an operator action) never reads the index of every rollout.
        self._folded: tuple[WriteIndex, int] | None = None
        # Bodies appended but not yet folded into the index: folded when the
        # index is next read, so appends that nobody records after (operator
        # actions, P-2's group commits) do not pay for it. Guarded, because
        # appends may come from another thread than the one that records.
        self._unfolded: list[Event] = []
        self._unfolded_guard = threading.Lock()
        self._stale = False
        self._appended = 0  # events appended since the file ends were stored

    @property
    def _index(self) -> WriteIndex:
        return self._fold()[0]

    @property
    def _seq(self) -> int:
        return self._fold()[1]

    def _fold(self) -> tuple[WriteIndex, int]:
        folded = self._folded
        if folded is None:
            with self.guard:
                folded = self._folded
                if folded is None:
                    # The log's fold holds every body appended so far.
                    with self._unfolded_guard:
                        self._unfolded, self._stale = [], False
                    folded = fold_index(
                        self._store, self._where, save_every=self._save_every
                    )
                    self._folded = folded
        return folded

    @property
    def index(self) -> WriteIndex:
        """The write index, with every appended body folded in."""
        self._fold()
        if self._unfolded or self._stale:
            with self._unfolded_guard:
                bodies, self._unfolded = self._unfolded, []
                stale, self._stale = self._stale, False
            if stale:
                self._refold()  # the log's fold: always exact
            else:
                apply = self._index.apply
                for body in bodies:
                    apply(body)
        return self._index

    def follow(self, bodies: Sequence[Event], head: int | None = None) -> None:
        """Keep in step with ``bodies`` just appended (called under ``guard``).

        ``head``: the seq of the last of them, for keeping the file ends.
        """
        if self._shared:
            self.catch_up()  # others append too: fold the log itself (SC-4)
            return
        with self._unfolded_guard:
            if self._stale or len(self._unfolded) + len(bodies) > self.max_unfolded:
                self._stale = True  # many appends and no recording: refold later
                self._unfolded = []
            else:
                self._unfolded.extend(bodies)
        if head is not None:
            self._keep_ends(head, len(bodies))

    def _keep_ends(self, head: int, appended: int) -> None:
        """Store the file ends once every ``save_every`` events appended (P-8).

        A lock holder recording a long round leaves them close to its last
        append, also when it is killed: the next open (a resume's check for
        rows waiting, a writer's repair) folds a short tail, not the round.
        Only an index already folded and current is stored; a failed save
        loses nothing (EV-14), the append it follows has committed.
        """
        if self._save_every is None or self._folded is None:
            return
        self._appended += appended
        if self._appended < self._save_every or self._stale:
            return
        self._appended = 0
        try:
            save_ends(self._store, self.index, head)
        except StorageError as exc:
            logger.debug("the file ends were not stored: %s", exc)

    def catch_up(self) -> bool:
        """Fold what other writers appended, now; whether anyone else appends."""
        if not self._shared:
            return False
        with self.guard:
            index, seq = self._fold()
            self._folded = (index, fold_tail(self._store, self._where, index, seq + 1))
        return True

    def _refold(self) -> None:
        with self.guard:
            self._folded = fold_index(
                self._store, self._where, save_every=self._save_every
            )
