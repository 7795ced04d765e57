"""The write index half of ``Ledger``: the writer's bookkeeping, kept in step.

The write index (REC-3, EV-12) is folded from the log at a writer's open,
starting from a stored index when one still holds (EV-14), kept in step with
appends, caught up with other writers' appends on PostgreSQL (SC-4), and read
by EV-12's repair and by ``pending_repairs``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import msgspec

from ledger.paths import RunPaths
from ledger.run.recorder import Recorder
from ledger.run.repair import PendingRepair, pending_repairs
from ledger.run.write_index import INDEX_CODE_VERSION, INDEX_KINDS, WriteIndex
from ledger.store.port import EventStore

if TYPE_CHECKING:
    from ledger.events import StoredEvent

__all__ = ["IndexMixin"]


class IndexMixin:
    """Folding, storing and following the write index of one run's log."""

    _store: EventStore
    _recorder: Recorder | None
    _write_lock: threading.Lock
    _index_seq: int

    @property
    def paths(self) -> RunPaths:
        raise NotImplementedError

    @property
    def on_postgres(self) -> bool:
        raise NotImplementedError

    @property
    def writable(self) -> bool:
        raise NotImplementedError

    def events(
        self, from_seq: int = 1, *, kinds: tuple[str, ...] = ()
    ) -> Iterator[StoredEvent]:
        raise NotImplementedError

    def load_snapshot(
        self, code_version: str, policy_digest: str
    ) -> tuple[int, bytes, bytes] | None:
        raise NotImplementedError

    #: A writer's open stores its write index once this many events were
    #: folded past the stored one (EV-14: an optimization, never the truth).
    index_snapshot_every = 10_000

    def write_index(self) -> WriteIndex:
        """Fold the bookkeeping of releases, reservations and file ends (REC-3).

        Starts from the stored index when its event is still in the log with
        the same hash, and folds only the events after it; a writer stores a
        new one when that tail was long (a restarting collector then reads
        the tail of a long log, not all of it).
        """
        index, start = self._stored_index()
        last = self._index_seq = self._fold_index(index, start)
        if self.writable and last - start + 1 >= self.index_snapshot_every:
            self._store.save_snapshot(
                last,
                self._store.hash_at(last) or b"",
                INDEX_CODE_VERSION,
                "",
                index.encode(),
            )
        return index

    def _rebuild_index(self) -> WriteIndex:
        with self._write_lock:  # no append in between, on any thread
            return self.write_index()

    def _stored_index(self) -> tuple[WriteIndex, int]:
        found = self.load_snapshot(INDEX_CODE_VERSION, "")
        if found is None:
            return WriteIndex(), 1
        try:
            return WriteIndex.decode(found[2]), found[0] + 1
        except msgspec.DecodeError:
            return WriteIndex(), 1  # a damaged snapshot is ignored, never trusted

    def _fold_index(self, index: WriteIndex, from_seq: int) -> int:
        """Fold the index kinds from ``from_seq``; the last seq folded (or before)."""
        last = from_seq - 1
        for event in self.events(from_seq, kinds=INDEX_KINDS):
            index.apply(event.body)
            last = event.seq
        return last

    def _sync_index(self) -> None:
        """Catch the write index up with what other writers appended (SC-4)."""
        if self._recorder is not None:
            self._index_seq = self._fold_index(
                self._recorder.index, self._index_seq + 1
            )

    def pending_repairs(self) -> list[PendingRepair]:
        """Unrecorded rows and torn lines a writer's open would repair (EV-12).

        None on PostgreSQL: rows commit with their events there (SC-2).
        """
        if self.on_postgres:
            return []
        return pending_repairs(self.paths, self.write_index(), self._locations)

    def _locations(self, file: str) -> Iterator[tuple[int, int, str]]:
        """Every recorded row of ``file``: offset, length, sha256, in log order."""
        for event in self.events():
            where = getattr(event.body, "location", None)
            if where is not None and where.file == file:
                yield where.offset, where.length, where.row_sha256
