"""``Ledger``: one run's event log, opened as a writer (with the lock) or a reader.

Where the run lives is its home's business (:mod:`ledger.store.registry` picks
it from ``OUT`` or a run URL); a ``Ledger`` holds what the home opened (the
log, the files, the write path) and never asks which backend it is.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import msgspec

from ledger.clock import Clock
from ledger.collector_files.changed_rows import changed_line
from ledger.collector_files.repair import (
    PendingRepair,
    Unrecorded,
    find_unrecorded,
    pending_repairs,
    refuse_changed_rows,
    repair,
)
from ledger.collector_files.rows_seen import (
    forget_rows_seen,
    rows_as_noted,
    save_rows_seen,
)
from ledger.collector_files.waiting import Waiting, group_waiting
from ledger.errors import ConfigError, Refused
from ledger.events import Event, StoredEvent, encode_body
from ledger.identity.secrets.patterns import redact_secrets
from ledger.paths import RunPaths
from ledger.run.create import ManifestLike, PolicyLike, manifest_files, run_created_body
from ledger.run.index_keeper import IndexKeeper, fold_ends, fold_index
from ledger.run.lock import RunLock
from ledger.run.reading import LogReader
from ledger.run.recorder import Recorder
from ledger.run.recording import RecordingMixin
from ledger.run.write_index import WriteIndex
from ledger.run.writer import Writer
from ledger.store.materialize import index_existing, materialize
from ledger.store.port import NewEvent, OpenRun, RunFiles, RunHome
from ledger.store.registry import home_for

__all__ = ["Ledger", "ManifestLike", "PolicyLike"]


class Ledger(LogReader, RecordingMixin):
    """One run's event log (EV-10..EV-14).

    ``Ledger.create`` starts a run; ``Ledger.open`` opens one, as a writer when
    given the held :class:`RunLock`, else read-only (a reader never modifies
    anything, EV-12). On a shared log (a run on PostgreSQL) a ledger opened
    without the lock is a worker: it may reserve, record and admit judgments.
    """

    #: A writer's open stores its write index once this many events were
    #: folded past the stored one (EV-14: an optimization, never the truth).
    index_snapshot_every = 10_000

    def __init__(
        self,
        home: RunHome,
        opened: OpenRun,
        *,
        lock: RunLock | None,
        clock: Clock,
        check_head: bool,
    ) -> None:
        super().__init__(opened.store, home.where, check_head=check_head)
        self._home = home
        self._opened = opened
        self.lock = lock
        self.clock = clock
        #: Where the run's rows are read and its published files written.
        self.files: RunFiles = opened.files
        #: The run: ``OUT``'s absolute path, or the run URL (what a lock names).
        self.target = home.target
        #: The folder the run's files live in; ``None`` for a run kept in a store.
        self.folder: Path | None = opened.folder
        self._writer: Writer | None = None
        self._recorder: Recorder | None = None
        #: Whether the collector files were as the last writer noted them when
        #: this writer opened (or held no recorded row): see ``close``.
        self._rows_trusted = True

    @property
    def paths(self) -> RunPaths:
        """The run's files beside ``OUT`` (a run kept in a store has none, SC-2)."""
        if self.folder is None:
            raise Refused(
                f"{self.where} is kept in a store: its rows are there; use "
                "`rollout-ledger export --files DIR` for files"
            )
        return RunPaths.of(self.target)

    # -- opening -----------------------------------------------------------

    @classmethod
    def create(
        cls,
        out: Path | str,
        manifest: ManifestLike,
        rows: Iterable[Mapping[str, Any]],
        *,
        lock: RunLock,
        policy: PolicyLike | None = None,
        clock: Clock | None = None,
        journal_mode: str = "wal",
        materialized: bytes | None = None,
    ) -> Ledger:
        """Start a run: materialized inputs, its log with ``run_created``, published.

        ``out`` may be a run URL (SC-1): the run is then created on PostgreSQL,
        its materialized inputs stored with ``run_created``. ``materialized``
        are inputs a collector wrote already, adopted as they are (REC-84).
        """
        home = home_for(out)
        lock.require_for(home.target)
        lock.check()  # a lock lost before the run exists: create nothing
        home.refuse_existing()
        inputs = (
            materialize(rows) if materialized is None else index_existing(materialized)
        )
        if inputs.digest != manifest.materialized_digest:
            raise ConfigError(
                "the manifest's materialized_digest does not match the rows given to "
                "create; build the manifest from the same rows",
                key="materialized_digest",
            )
        clock = clock or Clock()
        body = encode_body(run_created_body(manifest, policy, inputs))
        first = NewEvent("run_created", clock.now(), "create", body)
        home.create(first, inputs, journal_mode=journal_mode)
        led = cls.open(out, lock=lock, clock=clock)
        try:
            for name, data in manifest_files(manifest):
                led.files.publish(name, data)
        except BaseException:
            led.close()
            raise
        return led

    @classmethod
    def open(
        cls,
        out: Path | str,
        *,
        lock: RunLock | None = None,
        clock: Clock | None = None,
        check_head: bool = True,
        adopting: bool = False,
    ) -> Ledger:
        """Open a run: a writer with the held lock, else a read-only reader.

        ``check_head=False`` (readers only) skips the chain checks of the head
        and of each event read (R-5), for ``verify``, which checks the whole
        chain and names the first bad seq. ``adopting`` (the import that adopts
        rows another collector appended, REC-86) leaves the writer's repair of
        unrecorded rows (EV-12) to the next writer's open.

        ``out`` may be a run URL (SC-1): with the held lock the ledger is the
        coordinator; without it, a worker that may reserve, record and admit
        judgments (SC-4) and otherwise only reads.
        """
        home = home_for(out)
        if lock is not None:
            lock.require_for(home.target)
        opened = home.open(lock=None if lock is None else lock.home_part)
        led = cls(
            home,
            opened,
            lock=lock,
            clock=clock or Clock(),
            check_head=check_head or lock is not None,
        )
        try:
            led._check_saved_work()
            home.check_opened(opened)
            if opened.writable:
                led._start_writer(repair_files=not adopting)
        except BaseException:
            led.close()
            raise
        return led

    def _start_writer(self, *, repair_files: bool) -> None:
        opened = self._opened
        keeper = IndexKeeper(
            opened.store,
            self.where,
            shared=opened.shared_log,
            save_every=self._index_save_every(),
            guard=threading.RLock(),
        )
        self._writer = Writer(
            opened.store,
            self._home.sink(opened),
            keeper,
            self.clock,
            coordinator=self.lock is not None,
            where=self.where,
            fence=None if self.lock is None else self.lock.check,
        )
        self._recorder = Recorder(self._writer, self.files.names, self.clock)
        if self.folder is None:
            return
        # Only the recorded ends tell whether anything is past them; the
        # index of every rollout is read only if so (P-8).
        every = self._index_save_every()
        ends = fold_ends(opened.store, self.where, save_every=every)
        self._rows_trusted = rows_as_noted(self.paths) or not any(
            end.offset for end in ends.ends.values()
        )
        if repair_files and any(find_unrecorded(self.paths, ends, self._locations)):
            repair(self.paths, self._recorder, self._locations)  # EV-12, first

    # -- writing -------------------------------------------------------------

    @property
    def writable(self) -> bool:
        """Whether this ledger was opened with the run lock (a writer)."""
        return self._writer is not None and self.lock is not None

    @property
    def role(self) -> str:
        """``writer`` (with the run lock), ``worker`` (SC-4) or ``reader``."""
        if self.writable:
            return "writer"
        return "worker" if self._writer is not None else "reader"

    def _active_writer(self) -> Writer:
        if self._writer is None:
            raise Refused(
                f"{self.where} is open read-only; open it with the held RunLock "
                "to append"
            )
        return self._writer

    def append(
        self, body: Event, *, expected_seq: int | None = None, actor: str = "collector"
    ) -> StoredEvent:
        """Append one event durably (EV-11); returns it as stored."""
        writer = self._active_writer()
        bodies = (_safe_reason(body),)
        return writer.append(bodies, expected_seq=expected_seq, actor=actor)[0]

    def append_many(
        self,
        bodies: Sequence[Event],
        *,
        expected_seq: int | None = None,
        actor: str = "collector",
    ) -> list[StoredEvent]:
        """Append ``bodies`` in one transaction (group commit, EV-11).

        A free-text ``reason`` (an operator's, a resume's) is stored with every
        credential-shaped value redacted (ID-13).
        """
        writer = self._active_writer()
        safe = [_safe_reason(body) for body in bodies]
        return writer.append(safe, expected_seq=expected_seq, actor=actor)

    def save_snapshot(
        self,
        seq: int,
        head_hash: bytes,
        code_version: str,
        policy_digest: str,
        state: bytes,
    ) -> None:
        """Store a projection snapshot (EV-14: an optimization, never the truth)."""
        writer = self._active_writer()
        if not self.writable:  # a worker: snapshots are the coordinator's
            raise Refused(
                f"{self.where} is open without the run lock; open it with the "
                "held RunLock to append"
            )
        writer.check_lock()
        with writer.keeper.guard:
            self._store.save_snapshot(
                seq, head_hash, code_version, policy_digest, state
            )

    # -- the writer's index ------------------------------------------------

    def write_index(self) -> WriteIndex:
        """Fold the bookkeeping of releases, reservations and file ends (REC-3).

        Starts from the stored index when its event is still in the log with
        the same hash, and folds only the events after it.
        """
        return fold_index(self._store, self.where, save_every=self._index_save_every())[
            0
        ]

    def _index_save_every(self) -> int | None:
        # Only the lock holder stores an index (a worker's is its own view).
        return self.index_snapshot_every if self.lock is not None else None

    def pending_repairs(self) -> list[PendingRepair]:
        """Unrecorded rows and torn lines a writer's open would repair (EV-12).

        None where rows commit with their events (a run kept in a store, SC-2).
        """
        if self.folder is None:
            return []
        # Only the recorded ends are read: not the index of every rollout (P-8).
        ends = fold_ends(self._store, self.where)
        return pending_repairs(self.paths, ends, self._locations)

    def waiting(self) -> tuple[Waiting, ...]:
        """Rows another collector appended, waiting for ``import`` (REC-86)."""
        return group_waiting((p.file, p.line, p.what) for p in self.pending_repairs())

    def unrecorded(self) -> list[Unrecorded]:
        """The bytes of ``OUT`` and the sidecar past their recorded rows (REC-86).

        R-7 first: every recorded row must still be as recorded, or this
        raises ``CorruptLedger`` naming the first changed line.
        """
        paths, index = self.paths, self.write_index()
        for path in (paths.out, paths.sidecar):
            refuse_changed_rows(paths, paths.relative(path), self._locations)
        return list(find_unrecorded(paths, index, self._locations))

    def _locations(self, file: str) -> Iterator[tuple[int, int, str]]:
        """Every recorded row of ``file``: offset, length, sha256, in log order."""
        for event in self.events():
            where = getattr(event.body, "location", None)
            if where is not None and where.file == file:
                yield where.offset, where.length, where.row_sha256

    # -- closing -------------------------------------------------------------

    def close(self) -> None:
        """Close the log and the collector files (the lock stays held)."""
        try:
            if self._writer is not None:
                self._writer.close()  # a full disk may refuse buffered rows
                if self.folder is not None and self._writer.committed_rows:
                    self._note_rows()
        finally:
            self._store.close()

    def _note_rows(self) -> None:
        """Note the collector files for ``status``'s stat (issue 25).

        A writer that opened on files moved since the last note (an edit in
        place, a killed writer) notes them only once every recorded row's
        digest checks: else an edit followed by more rows would be trusted.
        """
        if self._rows_trusted or self._rows_as_recorded():
            save_rows_seen(self.paths)
        else:
            forget_rows_seen(self.paths)

    def _rows_as_recorded(self) -> bool:
        paths = self.paths
        try:
            for path in (paths.out, paths.sidecar):
                if path.exists():
                    size = path.stat().st_size
                    file = paths.relative(path)
                    if changed_line(path, file, size, self._locations) is not None:
                        return False
        except (OSError, ValueError):
            return False
        return True

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _safe_reason(body: Event) -> Event:
    """``body`` with its free-text ``reason`` redacted (ID-13), if it has one."""
    reason = getattr(body, "reason", None)
    if not isinstance(reason, str) or (safe := redact_secrets(reason)) == reason:
        return body
    return msgspec.structs.replace(body, reason=safe)
