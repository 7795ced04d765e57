"""``Ledger``: one run's event log, opened as a writer (with the lock) or a reader."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import msgspec

from ledger.clock import Clock
from ledger.errors import CorruptLedger, LedgerError
from ledger.events import (
    KINDS,
    AttemptReserved,
    Event,
    StoredEvent,
    decode_body,
    encode_body,
    kind_of,
)
from ledger.paths import RunPaths
from ledger.postgres.url import is_run_url, require_postgres
from ledger.run.create import (
    ManifestLike,
    PolicyLike,
    build_database,
    refuse_existing_run,
    run_created_body,
)
from ledger.run.index_mixin import IndexMixin
from ledger.run.lock import RunLock
from ledger.run.materialize import write_materialized
from ledger.run.reading import ReadingMixin
from ledger.run.recorder import Recorder
from ledger.run.recording import RecordingMixin
from ledger.run.repair import repair
from ledger.store.port import EventStore
from ledger.store.run_files import FolderFiles, RunFiles, RunNames
from ledger.store.sqlite import NewEvent, SQLiteStore

__all__ = ["Ledger", "ManifestLike", "PolicyLike"]

#: What a worker of a run on PostgreSQL may append without the run lock (SC-4).
WORKER_KINDS = frozenset(
    {
        "attempt_reserved",
        "result_saved",
        "failure_saved",
        "omission_saved",
        "judge_admitted",
        "judge_outcome_saved",
    }
)

log = logging.getLogger("ledger")


class Ledger(ReadingMixin, IndexMixin, RecordingMixin):
    """One run's event log (EV-10..EV-14).

    ``Ledger.create`` starts a run; ``Ledger.open`` opens one, as a writer when
    given the held :class:`RunLock`, else read-only (a reader never modifies
    anything, EV-12).
    """

    def __init__(
        self,
        store: EventStore,
        paths: RunPaths | None,
        *,
        lock: RunLock | None,
        clock: Clock,
        files: RunFiles | None = None,
        where: str | None = None,
    ) -> None:
        self._store = store
        self._paths = paths
        self.lock = lock
        self.clock = clock
        if paths is not None:
            files = files or FolderFiles(paths)
            where = where or str(paths.db)
        assert files is not None, "a run without a folder needs its files"
        assert where is not None, "a run without a folder needs its URL"
        #: Where the run's rows are read and its published files written.
        self.files: RunFiles = files
        #: The run's log, for messages: ``ledger.db``'s path, or the run URL.
        self.where = where
        #: The run: ``OUT``'s absolute path, or the run URL (what a lock names).
        self.target = str(paths.out) if paths is not None else where
        # One writer thread at a time: AsyncRecorder commits from a worker thread.
        self._write_lock = threading.Lock()
        self._recorder: Recorder | None = None
        self._check_head_on_open = True
        #: On PostgreSQL, others append too: the write index follows the log.
        self._shared_log = paths is None
        self._index_seq = 0
        #: False for a worker of a run on PostgreSQL (no run lock, SC-4).
        self._coordinator = True

    @property
    def paths(self) -> RunPaths:
        """The run's files beside ``OUT`` (a run on PostgreSQL has none, SC-2)."""
        if self._paths is None:
            raise LedgerError(
                f"{self.where} is a run on PostgreSQL: its rows are in the store; "
                "use `rollout-ledger export --files DIR` for files"
            )
        return self._paths

    @property
    def on_postgres(self) -> bool:
        """Whether the run lives on PostgreSQL (SC-1) rather than beside ``OUT``."""
        return self._paths is None

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
    ) -> Ledger:
        """Start a run: materialized inputs, ``ledger.db`` with ``run_created``.

        ``out`` may be a run URL (SC-1): the run is then created on PostgreSQL,
        its materialized inputs stored with ``run_created``.
        """
        if isinstance(out, str) and is_run_url(out):
            require_postgres()
            from ledger.postgres.run import create_pg_run

            return create_pg_run(cls, out, manifest, rows, lock, policy, clock)
        paths = RunPaths.of(out)
        _require_lock(lock, paths)
        refuse_existing_run(paths)
        inputs = write_materialized(paths, rows, manifest.materialized_digest)
        clock = clock or Clock()
        build_database(
            paths, run_created_body(manifest, policy, inputs), clock, journal_mode
        )
        led = cls.open(paths.out, lock=lock, clock=clock)
        try:
            manifest.write(paths.manifest)
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
    ) -> Ledger:
        """Open a run: a writer with the held lock, else a read-only reader.

        ``check_head=False`` (readers only) skips the head's chain check, for
        ``verify``, which checks the whole chain and names the first bad seq.

        ``out`` may be a run URL (SC-1): with the held lock the ledger is the
        coordinator; without it, a worker that may reserve, record and admit
        judgments (SC-4) and otherwise only reads.
        """
        if isinstance(out, str) and is_run_url(out):
            require_postgres()
            from ledger.postgres.run import open_pg_run

            return open_pg_run(cls, out, lock, clock or Clock(), check_head)
        paths = RunPaths.of(out)
        if lock is not None:
            _require_lock(lock, paths)
        _refuse_files_without_ledger(paths)
        store = SQLiteStore.open(paths.db, writable=lock is not None)
        led = cls(store, paths, lock=lock, clock=clock or Clock())
        led._check_head_on_open = check_head or lock is not None
        try:
            led._check_saved_work()
            if led.writable:
                led._start_recorder()
        except BaseException:
            led.close()
            raise
        return led

    def _start_recorder(self) -> None:
        index = self.write_index()
        self._recorder = Recorder(
            self.paths.folder,
            RunNames(self.paths.stem),
            index,
            self._append_as,
            self.clock.new_id,
            rebuild=self._rebuild_index,
        )
        repair(self.paths, self._recorder, self._locations)  # EV-12, first

    def _append_as(self, bodies: Sequence[Event], actor: str) -> list[StoredEvent]:
        # The recorder's own appends: its reservations are valid by
        # construction (P-7, see _checked_from_recorder).
        return self._append_bodies(bodies, None, actor, _checked_from_recorder)

    # -- writing -------------------------------------------------------------

    @property
    def writable(self) -> bool:
        """Whether this ledger was opened with the run lock (a writer)."""
        return self._store.writable and self._coordinator

    @property
    def role(self) -> str:
        """``writer`` (with the run lock), ``worker`` (SC-4) or ``reader``."""
        if self.writable:
            return "writer"
        return "worker" if self._store.writable else "reader"

    def _refuse_for_worker(self, bodies: Sequence[Event]) -> None:
        # SC-4: without the run lock a worker reserves, records and admits
        # judgments; releases, resumes and operator actions are the
        # coordinator's.
        if not self._store.writable:
            self._require_writer()
        if self._coordinator:
            return
        for body in bodies:
            kind = _kind(body)
            if kind not in WORKER_KINDS:
                raise LedgerError(
                    f"{self.where}: a worker (without the run lock) may reserve, "
                    f"record and admit judgments, not append {kind}; take the run "
                    "lock (RunLock(url)) to act as the coordinator"
                )

    def append(
        self, body: Event, *, expected_seq: int | None = None, actor: str = "collector"
    ) -> StoredEvent:
        """Append one event durably (EV-11); returns it as stored."""
        if not self._store.writable or not self._coordinator:
            self._refuse_for_worker((body,))
        at = self.clock.now()
        new = NewEvent(_kind(body), at, actor, _checked(body))
        with self._write_lock:
            row = self._store.append_many((new,), expected_seq=expected_seq)[0]
            if self._recorder is not None:
                self._follow_index((body,))
        return StoredEvent(
            seq=row.seq,
            kind=row.kind,
            at=at,
            actor=actor,
            body=body,  # type: ignore[arg-type]
            prev_hash=row.prev_hash,
            hash=row.hash,
        )

    def append_many(
        self,
        bodies: Sequence[Event],
        *,
        expected_seq: int | None = None,
        actor: str = "collector",
    ) -> list[StoredEvent]:
        """Append ``bodies`` in one transaction (group commit, EV-11)."""
        return self._append_bodies(bodies, expected_seq, actor, _checked)

    def _append_bodies(
        self,
        bodies: Sequence[Event],
        expected_seq: int | None,
        actor: str,
        check: Callable[[Event], bytes],
    ) -> list[StoredEvent]:
        if not self._store.writable or not self._coordinator:
            self._refuse_for_worker(bodies)
        at = self.clock.now()  # one instant per transaction: its events land together
        make = tuple.__new__  # a NewEvent without its Python-level __new__ (P-2)
        new = [make(NewEvent, (_kind(b), at, actor, check(b))) for b in bodies]
        with self._write_lock:
            rows = self._store.append_many(new, expected_seq=expected_seq)
            if self._recorder is not None:
                self._follow_index(bodies)
        return [
            StoredEvent(
                seq=row.seq,
                kind=row.kind,
                at=at,
                actor=actor,
                body=body,  # type: ignore[arg-type]
                prev_hash=row.prev_hash,
                hash=row.hash,
            )
            for row, body in zip(rows, bodies, strict=True)
        ]

    def _follow_index(self, bodies: Sequence[Event]) -> None:
        # Keep the write index in step with the log: the bodies just appended,
        # or, where other writers append too, the log itself (SC-4).
        if self._shared_log:
            self._sync_index()
            return
        self._recorder.follow(bodies)  # type: ignore[union-attr]

    def _require_writer(self) -> None:
        if not self._store.writable or not self._coordinator:
            raise LedgerError(
                f"{self.where} is open read-only; open it with the held RunLock "
                "to append"
            )

    def save_snapshot(
        self,
        seq: int,
        head_hash: bytes,
        code_version: str,
        policy_digest: str,
        state: bytes,
    ) -> None:
        """Store a projection snapshot (EV-14: an optimization, never the truth)."""
        self._require_writer()
        with self._write_lock:
            self._store.save_snapshot(
                seq, head_hash, code_version, policy_digest, state
            )

    # -- closing -------------------------------------------------------------

    def close(self) -> None:
        """Close the database and the collector files (the lock stays held)."""
        if self._recorder is not None:
            self._recorder.close()
        self._store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _require_lock(lock: RunLock, paths: RunPaths | str) -> None:
    target = paths if isinstance(paths, str) else str(paths.out)
    if not lock.held:
        raise LedgerError(
            f"the RunLock for {lock.target} is not held; acquire it first"
        )
    if lock.target != target:
        raise LedgerError(f"the RunLock held is for {lock.target}, not for {target}")


def _refuse_files_without_ledger(paths: RunPaths) -> None:
    # REC-51: collector files with no ledger are an older run: import it.
    if paths.db.exists():
        return
    found = [p for p in (paths.out, paths.sidecar) if p.exists()]
    if found:
        raise CorruptLedger(
            f"{found[0]} exists but {paths.db} does not: this run was saved without "
            f"a ledger; bring it in with `rollout-ledger import {paths.out}`",
            path=paths.db,
        )


_KIND_OF_TYPE: dict[type, str] = {cls: kind for kind, cls in KINDS.items()}


def _kind(body: Event) -> str:
    # A dict lookup per event instead of two attribute reads (P-2).
    kind = _KIND_OF_TYPE.get(type(body))
    return kind_of(body) if kind is None else kind


#: One decoder per event type: the full check of ``_checked``.
_CHECKERS: dict[type, msgspec.json.Decoder[Any]] = {
    cls: msgspec.json.Decoder(cls) for cls in KINDS.values()
}


def _checked(body: Event) -> bytes:
    # A Struct built in code skips its Meta constraints and field types; what
    # is stored must decode, or every later replay would stop at it (REC-12).
    # Decoding with the body's own type is the whole check (its tag included)
    # at about half the union decoder's cost (1.2 against 2.1 us an event on
    # the P-2 stream, measured 2026-11-29); msgspec.convert would pass a
    # Struct instance through unchecked.
    data = encode_body(body)
    checker = _CHECKERS.get(type(body))
    try:
        if checker is None:  # a subclass of an event type: the union decides
            decode_body(data)
        else:
            checker.decode(data)
    except msgspec.ValidationError as exc:
        raise LedgerError(f"refusing to append a {kind_of(body)} event: {exc}") from exc
    return data


def _checked_from_recorder(body: Event) -> bytes:
    # Recorder.prepare_reserve builds an AttemptReserved only from an attempt
    # the write index holds as released (whose task, rollout and attempt came
    # from validated events) and the run's own id: it is valid by
    # construction, and decoding it again would only cost (P-7). Every other
    # body the recorder appends carries row-derived facts: checked in full.
    if type(body) is AttemptReserved:
        return encode_body(body)
    return _checked(body)
