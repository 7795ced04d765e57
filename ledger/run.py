"""``Ledger``: one run's event log, opened as a writer (with the lock) or a reader."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

import msgspec

from ledger.chain import ChainBreak, first_chain_break
from ledger.clock import Clock
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
from ledger.files import fsync_dir
from ledger.lock import RunLock
from ledger.materialize import MaterializedInputs, write_materialized
from ledger.paths import RunPaths
from ledger.store import EventRow, NewEvent, SQLiteStore

__all__ = ["Ledger", "ManifestLike", "PolicyLike"]

log = logging.getLogger("ledger")


class ManifestLike(Protocol):
    """What ``Ledger.create`` needs of a manifest (``RunManifest`` provides it)."""

    @property
    def materialized_digest(self) -> str: ...

    @property
    def identity(self) -> Mapping[str, Any] | None: ...

    def model_dump(self, *, mode: str = ...) -> dict[str, Any]: ...

    def write(self, path: Path) -> None: ...


class PolicyLike(Protocol):
    """What ``Ledger.create`` needs of a policy (``RecoveryPolicy`` provides it)."""

    def model_dump(self, *, mode: str = ...) -> dict[str, Any]: ...


def decode_row(row: EventRow, *, path: Path | None = None) -> StoredEvent:
    """Decode one stored row; an unknown kind raises :class:`UnknownEvent` (EV-3)."""
    if row.kind not in KINDS:
        raise UnknownEvent(seq=row.seq, kind=row.kind, path=path)
    try:
        body = decode_body(bytes(row.body))
    except msgspec.DecodeError as exc:
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


class Ledger:
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
        _refuse_existing_run(paths)
        inputs = write_materialized(paths, rows, manifest.materialized_digest)
        clock = clock or Clock()
        _build_database(
            paths, _run_created(manifest, policy, inputs), clock, journal_mode
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
        cls, out: Path | str, *, lock: RunLock | None = None, clock: Clock | None = None
    ) -> Ledger:
        """Open a run: a writer with the held lock, else a read-only reader."""
        paths = RunPaths.of(out)
        if lock is not None:
            _require_lock(lock, paths)
        store = SQLiteStore.open(paths.db, writable=lock is not None)
        led = cls(store, paths, lock=lock, clock=clock or Clock())
        try:
            led._check_saved_work()
        except BaseException:
            led.close()
            raise
        return led

    def _check_saved_work(self) -> None:
        # EV-12 / REC-51: refuse unknown or corrupt saved work before anything.
        unknown = sorted(self._store.distinct_kinds() - KINDS.keys())
        if unknown:
            first = next(self._store.rows(kinds=unknown))
            raise UnknownEvent(seq=first.seq, kind=first.kind, path=self.paths.db)
        self._check_head()

    def _check_head(self) -> None:
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
        return self.append_many([body], expected_seq=expected_seq, actor=actor)[0]

    def append_many(
        self,
        bodies: Sequence[Event],
        *,
        expected_seq: int | None = None,
        actor: str = "collector",
    ) -> list[StoredEvent]:
        """Append ``bodies`` in one transaction (group commit, EV-11)."""
        self._require_writer()
        new = [self._new_event(body, actor) for body in bodies]
        rows = self._store.append_many(new, expected_seq=expected_seq)
        return [_stored(row, body) for row, body in zip(rows, bodies, strict=True)]

    def _new_event(self, body: Event, actor: str) -> NewEvent:
        return NewEvent(kind_of(body), self.clock.now(), actor, encode_body(body))

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
        for row in self._store.rows(from_seq, kinds=kinds):
            yield decode_row(row, path=self.paths.db)

    def raw_events(self, from_seq: int = 1) -> Iterator[EventRow]:
        """Stored rows, undecoded, for chain checks and exports."""
        return self._store.rows(from_seq)

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

    @property
    def journal_mode(self) -> str:
        """``wal`` or ``delete`` (EV-42)."""
        return self._store.journal_mode()

    # -- closing -------------------------------------------------------------

    def close(self) -> None:
        """Close the database (the lock stays with its owner)."""
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


def _stored(row: EventRow, body: Event) -> StoredEvent:
    return StoredEvent(
        seq=row.seq,
        kind=row.kind,
        at=row.at,
        actor=row.actor,
        body=body,  # type: ignore[arg-type]
        prev_hash=row.prev_hash,
        hash=row.hash,
    )


def _require_lock(lock: RunLock, paths: RunPaths) -> None:
    if not lock.held:
        raise LedgerError(
            f"the RunLock for {lock.paths.out} is not held; acquire it first"
        )
    if lock.paths.out != paths.out:
        raise LedgerError(
            f"the RunLock held is for {lock.paths.out}, not for {paths.out}"
        )


def _refuse_existing_run(paths: RunPaths) -> None:
    # A lock file alone does not count (CLI-2); the materialized inputs may
    # exist from a create that died before its database (write_materialized
    # accepts them only when byte-identical).
    for path in (paths.db, paths.out, paths.sidecar):
        if path.exists():
            raise LedgerError(
                f"{path} exists: this run was started already; continue it with "
                "`rollout-ledger resume`, or bring an older run in with "
                "`rollout-ledger import`"
            )


def _build_database(
    paths: RunPaths, first: RunCreated, clock: Clock, journal_mode: str
) -> None:
    # The database appears under its name only once it holds run_created, so a
    # create killed at any instant leaves either no run or a whole one.
    building = paths.db.with_name(paths.db.name + ".creating")
    for leftover in (building, *_sidecars_of(building)):
        leftover.unlink(missing_ok=True)  # a create that died; we hold the lock
    store = SQLiteStore.create(building, journal_mode=journal_mode)
    try:
        store.append_many(
            [NewEvent("run_created", clock.now(), "create", encode_body(first))]
        )
    finally:
        store.close()  # the last connection checkpoints and removes the WAL
    try:
        os.replace(building, paths.db)
        fsync_dir(paths.ledger_dir)
    except OSError as exc:
        raise LedgerError(f"could not create {paths.db}: {exc.strerror}") from exc


def _sidecars_of(db: Path) -> tuple[Path, ...]:
    return tuple(
        db.with_name(db.name + suffix) for suffix in ("-wal", "-shm", "-journal")
    )


def _run_created(
    manifest: ManifestLike, policy: PolicyLike | None, inputs: MaterializedInputs
) -> RunCreated:
    fields = manifest.model_dump(mode="json")
    known = set(RunCreated.__struct_fields__)
    body = {key: value for key, value in fields.items() if key in known}
    body["identity"] = None if manifest.identity is None else dict(manifest.identity)
    body["policy"] = {} if policy is None else policy.model_dump(mode="json")
    body["index"] = inputs.entries
    return msgspec.convert(body, RunCreated)


def sha256_hex(data: bytes) -> str:
    """The sha256 of ``data`` as lowercase hex."""
    return hashlib.sha256(data).hexdigest()
