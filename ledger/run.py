"""``Ledger``: one run's event log, opened as a writer (with the lock) or a reader."""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import msgspec

from ledger.chain import ChainBreak, first_chain_break
from ledger.clock import Clock
from ledger.create import (
    ManifestLike,
    PolicyLike,
    build_database,
    refuse_existing_run,
    run_created_body,
)
from ledger.errors import CorruptLedger, LedgerError, UnknownEvent
from ledger.events import (
    KINDS,
    Event,
    RunCreated,
    StoredEvent,
    decode_body,
    encode_body,
    kind_of,
)
from ledger.lock import RunLock
from ledger.materialize import write_materialized
from ledger.paths import RunPaths
from ledger.recorder import Recorder
from ledger.recording import RecordingMixin
from ledger.repair import PendingRepair, pending_repairs, repair
from ledger.store import EventRow, NewEvent, SQLiteStore
from ledger.stored import decode_row
from ledger.write_index import INDEX_KINDS, WriteIndex

__all__ = ["Ledger", "ManifestLike", "PolicyLike"]

log = logging.getLogger("ledger")


class Ledger(RecordingMixin):
    """One run's event log (EV-10..EV-14).

    ``Ledger.create`` starts a run; ``Ledger.open`` opens one, as a writer when
    given the held :class:`RunLock`, else read-only (a reader never modifies
    anything, EV-12).
    """

    def __init__(
        self, store: SQLiteStore, paths: RunPaths, *, lock: RunLock | None, clock: Clock
    ) -> None:
        self._store = store
        self.paths = paths
        self.lock = lock
        self.clock = clock
        # One writer thread at a time: AsyncRecorder commits from a worker thread.
        self._write_lock = threading.Lock()
        self._recorder: Recorder | None = None
        self._check_head_on_open = True

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
        """Start a run: materialized inputs, ``ledger.db`` with ``run_created``."""
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
        """
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
        self._recorder = Recorder(self.paths, index, self._append_as, self.clock.new_id)
        repair(self.paths, self._recorder, self._locations)  # EV-12, first

    def _append_as(self, bodies: Sequence[Event], actor: str) -> list[StoredEvent]:
        return self.append_many(bodies, actor=actor)

    def write_index(self) -> WriteIndex:
        """Fold the bookkeeping of releases, reservations and file ends (REC-3)."""
        return WriteIndex.build(self.events(1, kinds=INDEX_KINDS))

    def pending_repairs(self) -> list[PendingRepair]:
        """Unrecorded rows and torn lines a writer's open would repair (EV-12)."""
        return pending_repairs(self.paths, self.write_index(), self._locations)

    def _locations(self, file: str) -> Iterator[tuple[int, int, str]]:
        """Every recorded row of ``file``: offset, length, sha256, in log order."""
        for event in self.events():
            where = getattr(event.body, "location", None)
            if where is not None and where.file == file:
                yield where.offset, where.length, where.row_sha256

    def _check_saved_work(self) -> None:
        # EV-12 / REC-51: refuse unknown or corrupt saved work before anything.
        unknown = sorted(self._store.distinct_kinds() - KINDS.keys())
        if unknown:
            # Scan rather than filter by kind: a kind that is not valid UTF-8
            # reads back changed and would match no stored text.
            first = next(row for row in self._store.rows() if row.kind not in KINDS)
            raise UnknownEvent(seq=first.seq, kind=first.kind, path=self.paths.db)
        if self._check_head_on_open:  # verify opens without it, to report all
            self._check_head()
        if not self.paths.materialized.is_file():
            raise CorruptLedger(  # REC-51: a ledger whose collector files are missing
                f"{self.paths.materialized} is missing; the run cannot be resumed "
                "without its materialized inputs",
                path=self.paths.materialized,
            )

    def _check_head(self) -> None:
        # EV-12: the newest event must match its bytes and link to the one
        # before it; the full chain is `verify`'s (EV-2).
        tail = self._store.last_rows(2)
        if not tail:
            raise CorruptLedger(f"{self.paths.db} holds no events", path=self.paths.db)
        prev = bytes(tail[0].prev_hash) if len(tail) == 1 else bytes(tail[0].hash)
        start = tail[0].seq if len(tail) == 1 else tail[1].seq
        broken = first_chain_break(tail[-1:], from_seq=start, prev_hash=prev)
        if broken is not None:
            raise CorruptLedger(
                f"{self.paths.db}: event seq {broken.seq}: {broken.reason}; "
                "run `rollout-ledger verify` for the full check",
                seq=broken.seq,
                path=self.paths.db,
            )

    # -- writing -------------------------------------------------------------

    @property
    def writable(self) -> bool:
        """Whether this ledger was opened with the run lock (a writer)."""
        return self._store.writable

    def append(
        self, body: Event, *, expected_seq: int | None = None, actor: str = "collector"
    ) -> StoredEvent:
        """Append one event durably (EV-11); returns it as stored."""
        if not self._store.writable:
            self._require_writer()
        at = self.clock.now()
        new = NewEvent(_kind(body), at, actor, _checked(body))
        with self._write_lock:
            row = self._store.append_many((new,), expected_seq=expected_seq)[0]
            if self._recorder is not None:
                self._recorder.index.apply(body)
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
        if not self._store.writable:
            self._require_writer()
        at = self.clock.now()  # one instant per transaction: its events land together
        make = tuple.__new__  # a NewEvent without its Python-level __new__ (P-2)
        new = [make(NewEvent, (_kind(b), at, actor, _checked(b))) for b in bodies]
        with self._write_lock:
            rows = self._store.append_many(new, expected_seq=expected_seq)
            if self._recorder is not None:
                apply = self._recorder.index.apply
                for body in bodies:  # keep the write index in step with the log
                    apply(body)
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

    def _require_writer(self) -> None:
        if not self.writable:
            raise LedgerError(
                f"{self.paths.db} is open read-only; open it with the held RunLock "
                "to append"
            )

    # -- reading -------------------------------------------------------------

    def events(
        self, from_seq: int = 1, *, kinds: Sequence[str] = ()
    ) -> Iterator[StoredEvent]:
        """Stored events in ``seq`` order from ``from_seq``, streamed (EV-13)."""
        db = self.paths.db  # once, not per row: replay reads millions (P-3)
        for row in self._store.rows(from_seq, kinds=kinds):
            yield decode_row(row, path=db)

    def events_at(self, seqs: Sequence[int]) -> Iterator[StoredEvent]:
        """The stored events of ``seqs`` (those that exist), in ``seq`` order."""
        db = self.paths.db
        for row in self.raw_events_at(seqs):
            yield decode_row(row, path=db)

    def raw_events_at(self, seqs: Sequence[int]) -> Iterator[EventRow]:
        """The stored rows of ``seqs`` (those that exist), undecoded, by ``seq``."""
        rows_at = getattr(self._store, "rows_at", None)
        if rows_at is not None:
            return rows_at(seqs)  # type: ignore[no-any-return]
        return (  # a store without point reads: one read per seq
            row
            for seq in sorted(set(seqs))
            for row in itertools.islice(self._store.rows(seq), 1)
            if row.seq == seq
        )

    def rows_for_fold(self, from_seq: int = 1) -> Iterator[tuple[int, str, bytes]]:
        """``(seq, kind, body)`` of the stored events from ``from_seq``, undecoded.

        Replay's fast read (P-3); ``projections.replay`` decodes and checks them.
        """
        fold_rows = getattr(self._store, "fold_rows", None)
        if fold_rows is not None:
            return fold_rows(from_seq)  # type: ignore[no-any-return]
        return (
            (row.seq, row.kind, bytes(row.body)) for row in self._store.rows(from_seq)
        )

    def raw_events(
        self, from_seq: int = 1, *, kinds: Sequence[str] = ()
    ) -> Iterator[EventRow]:
        """Stored rows, undecoded, for chain checks and exports."""
        return self._store.rows(from_seq, kinds=kinds)

    def head(self) -> tuple[int, bytes]:
        """``(seq, hash)`` of the newest event."""
        return self._store.head()

    def run_created(self) -> RunCreated:
        """The run's first event."""
        first = next(self.events(1, kinds=["run_created"]), None)
        if first is None or first.seq != 1 or not isinstance(first.body, RunCreated):
            raise CorruptLedger(
                f"{self.paths.db}: the first event is not run_created",
                seq=1,
                path=self.paths.db,
            )
        return first.body

    def verify_chain(self) -> ChainBreak | None:
        """Recompute the whole hash chain; the first break, or ``None`` (EV-2)."""
        return first_chain_break(self._store.rows(1))

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

    def load_snapshot(
        self, code_version: str, policy_digest: str
    ) -> tuple[int, bytes, bytes] | None:
        """The stored snapshot for this code version and policy, if its chain holds.

        A snapshot counts only when the log still has its head hash at its seq.
        """
        found = self._store.load_snapshot(code_version, policy_digest)
        if found is None or self._store.hash_at(found[0]) != found[1]:
            return None
        return found

    @property
    def journal_mode(self) -> str:
        """``wal`` or ``delete`` (EV-42)."""
        return self._store.journal_mode()

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


def _require_lock(lock: RunLock, paths: RunPaths) -> None:
    if not lock.held:
        raise LedgerError(
            f"the RunLock for {lock.paths.out} is not held; acquire it first"
        )
    if lock.paths.out != paths.out:
        raise LedgerError(
            f"the RunLock held is for {lock.paths.out}, not for {paths.out}"
        )


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


def _checked(body: Event) -> bytes:
    # A Struct built in code skips its Meta constraints and field types; what
    # is stored must decode, or every later replay would stop at it (REC-12).
    # The union decoder is the cheapest full check (~2 us an event, measured
    # against per-kind decoders and msgspec.convert, which passes a Struct
    # instance through unchecked).
    data = encode_body(body)
    try:
        decode_body(data)
    except msgspec.ValidationError as exc:
        raise LedgerError(f"refusing to append a {kind_of(body)} event: {exc}") from exc
    return data
