"""Runs kept in this process's memory, ``memory://NAME``: a backend for fast tests.

It holds everything a run on disk holds (the chained log, the rows at their
places in their files, the published files, snapshots and the run lock) in
plain Python objects, and keeps the store contract (SC-6): gap-free ``seq``,
one hash chain computed as SQLite computes it, a transaction that commits
whole or not at all. Rows are stored with their events, located under the
run's lock, as on PostgreSQL. Nothing survives the process: it is for tests
and demonstrations, never for a collection.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ledger.errors import (
    ConcurrencyConflict,
    ConfigError,
    CorruptLedger,
    LockHeld,
    Refused,
)
from ledger.events import ZERO_HASH, Event
from ledger.store.chain import chained_rows
from ledger.store.materialize import MaterializedInputs
from ledger.store.port import EventRow, NewEvent, OpenRun, Prepared, RowReader, locate
from ledger.store.run_files import RunNames

__all__ = ["SCHEME", "MemoryHome", "MemoryStore", "forget_all", "is_memory_url"]

SCHEME = "memory://"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def is_memory_url(text: str | os.PathLike[str]) -> bool:
    """Whether ``text`` names a run kept in memory (``memory://NAME``)."""
    return isinstance(text, str) and text.startswith(SCHEME)


@dataclass
class _Run:
    """One run's state; every change happens under ``guard``."""

    events: list[EventRow] = field(default_factory=list)
    files: dict[str, bytearray] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    published: dict[str, bytes] = field(default_factory=dict)
    snapshots: dict[tuple[str, str], tuple[int, bytes, bytes]] = field(
        default_factory=dict
    )
    guard: threading.RLock = field(default_factory=threading.RLock)
    holder: str | None = None
    #: Commits made, for tests that count transactions.
    commits: int = 0
    #: A seq whose insert fails inside its transaction, for tests of rollback.
    fail_at: int | None = None


_RUNS: dict[str, _Run] = {}
_RUNS_GUARD = threading.Lock()


def forget_all() -> None:
    """Drop every run kept in memory (tests call it between cases)."""
    with _RUNS_GUARD:
        _RUNS.clear()


def _name_of(url: str) -> str:
    name = url[len(SCHEME) :]
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"{url!r} is not a memory run name: use memory://NAME with letters, "
            "digits, '.', '_' and '-'",
            key="run",
        )
    return name


class MemoryStore:
    """The log of one run kept in memory (the store contract, SC-6)."""

    def __init__(self, name: str, run: _Run, *, writable: bool) -> None:
        self.name = name
        self.path = SCHEME + name
        self.run = run
        self.writable = writable

    def check_schema(self) -> int:
        """Always 1: a memory run is as new as this process."""
        return 1

    @contextlib.contextmanager
    def transaction(self) -> Iterator[_Run]:
        """Every change inside commits whole, or is undone on any exception."""
        run = self.run
        with run.guard:
            events = len(run.events)
            files = {name: len(data) for name, data in run.files.items()}
            lines, published = dict(run.lines), dict(run.published)
            try:
                yield run
            except BaseException:
                del run.events[events:]
                for name in list(run.files):
                    if name not in files:
                        del run.files[name]
                    else:
                        del run.files[name][files[name] :]
                run.lines, run.published = lines, published
                raise
            run.commits += 1

    def head(self) -> tuple[int, bytes]:
        """``(seq, hash)`` of the newest event; ``(0, ZERO_HASH)`` when empty."""
        with self.run.guard:
            if not self.run.events:
                return 0, ZERO_HASH
            last = self.run.events[-1]
            return last.seq, last.hash

    def append_many(
        self, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[EventRow]:
        """Append ``events`` in one transaction, chained on the head (EV-11)."""
        self._require_writable()
        with self.transaction():
            return self.append_in_transaction(events, expected_seq=expected_seq)

    def append_in_transaction(
        self, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[EventRow]:
        """Append inside a transaction the caller already holds."""
        seq, prev = self.head()
        if expected_seq is not None and expected_seq != seq:
            raise ConcurrencyConflict(expected_seq=expected_seq, actual_seq=seq)
        rows = chained_rows(events, seq, prev)
        for row in rows:
            if row.seq == self.run.fail_at:
                raise CorruptLedger(f"{self.path}: injected failure at seq {row.seq}")
            self.run.events.append(row)
        return rows

    def append_rows(
        self, build: Callable[[dict[str, list[int]]], Sequence[NewEvent]]
    ) -> list[EventRow]:
        """Append what ``build`` makes of the files' ends, rows with their events."""
        self._require_writable()
        with self.transaction() as run:
            ends = {
                name: [len(data), run.lines.get(name, 0)]
                for name, data in run.files.items()
            }
            events = build(ends)
            return self.append_in_transaction(events)

    def put_row(self, file: str, offset: int, data: bytes) -> None:
        """Store a row's bytes at ``offset`` of ``file`` (inside a transaction)."""
        target = self.run.files.setdefault(file, bytearray())
        if len(target) != offset:
            raise CorruptLedger(
                f"{self.path}: {file} ends at {len(target)}, not {offset}"
            )
        target += data
        self.run.lines[file] = self.run.lines.get(file, 0) + 1

    def rows(
        self, from_seq: int = 1, *, kinds: Sequence[str] = ()
    ) -> Iterator[EventRow]:
        """Stored rows in ``seq`` order from ``from_seq``, streamed (EV-13)."""
        wanted = set(kinds)
        index = max(from_seq, 1) - 1
        while True:
            with self.run.guard:
                if index >= len(self.run.events):
                    return
                row = self.run.events[index]
            index += 1
            if not wanted or row.kind in wanted:
                yield row

    def rows_at(self, seqs: Sequence[int]) -> Iterator[EventRow]:
        """The stored rows of ``seqs`` (those that exist), in ``seq`` order."""
        with self.run.guard:
            events = list(self.run.events)
        for seq in sorted(set(seqs)):
            if 1 <= seq <= len(events):
                yield events[seq - 1]

    def fold_rows(self, from_seq: int = 1) -> Iterator[tuple[int, str, bytes]]:
        """``(seq, kind, body)`` of the rows from ``from_seq``: replay's read."""
        for row in self.rows(from_seq):
            yield row.seq, row.kind, row.body

    def distinct_kinds(self) -> set[str]:
        """Every kind stored in the log."""
        with self.run.guard:
            return {row.kind for row in self.run.events}

    def last_rows(self, count: int) -> list[EventRow]:
        """The newest ``count`` rows, oldest first."""
        with self.run.guard:
            return list(self.run.events[-count:]) if count > 0 else []

    def save_snapshot(
        self,
        seq: int,
        head_hash: bytes,
        code_version: str,
        policy_digest: str,
        state: bytes,
    ) -> None:
        """Store a projection snapshot (EV-14); one per code version and policy."""
        self._require_writable()
        with self.transaction() as run:
            run.snapshots[(code_version, policy_digest)] = (seq, head_hash, state)

    def load_snapshot(
        self, code_version: str, policy_digest: str
    ) -> tuple[int, bytes, bytes] | None:
        """``(seq, head_hash, state)`` of the stored snapshot, if any (EV-14)."""
        with self.run.guard:
            return self.run.snapshots.get((code_version, policy_digest))

    def hash_at(self, seq: int) -> bytes | None:
        """The stored hash of event ``seq``, if there is one."""
        with self.run.guard:
            if 1 <= seq <= len(self.run.events):
                return self.run.events[seq - 1].hash
        return None

    def journal_mode(self) -> str:
        """``memory``: nothing is durable beyond this process."""
        return "memory"

    def lock_holder(self) -> str | None:
        """Who holds the run lock in this process, or ``None``."""
        return self.run.holder

    def close(self) -> None:
        """Nothing to close: the run stays in memory for the process's life."""

    def _require_writable(self) -> None:
        if not self.writable:
            raise Refused(f"{self.path} is open read-only; appends need the run lock")


@dataclass(frozen=True)
class MemoryHome:
    """The home of a run kept in memory."""

    name: str

    @classmethod
    def of(cls, url: str) -> MemoryHome:
        """The home ``memory://NAME`` names."""
        return cls(_name_of(url))

    @property
    def target(self) -> str:
        """``memory://NAME``."""
        return SCHEME + self.name

    @property
    def where(self) -> str:
        """``memory://NAME``."""
        return SCHEME + self.name

    @property
    def folder(self) -> Path | None:
        """``None``: a run kept in memory has no folder."""
        return None

    def refuse_existing(self) -> None:
        """Refuse a name already taken."""
        with _RUNS_GUARD:
            if self.name in _RUNS:
                raise ConfigError(f"{self.where} exists already: this run was started")

    def create(
        self, first: NewEvent, inputs: MaterializedInputs, *, journal_mode: str
    ) -> None:
        """The run with its first event and materialized inputs, at once."""
        run = _Run()
        names = RunNames(self.name)
        run.files[names.materialized] = bytearray(inputs.data)
        run.lines[names.materialized] = len(inputs.entries)
        run.events.extend(chained_rows([first], 0, ZERO_HASH))
        with _RUNS_GUARD:
            if self.name in _RUNS:
                raise ConfigError(f"{self.where} exists already: this run was started")
            _RUNS[self.name] = run

    def open(self, *, lock_held: bool) -> OpenRun:
        """The run's log, files and write path: a writer with the lock held."""
        with _RUNS_GUARD:
            run = _RUNS.get(self.name)
        if run is None:
            raise CorruptLedger(
                f"{self.where}: there is no such run in this process", path=self.where
            )
        store = MemoryStore(self.name, run, writable=lock_held)
        files = MemoryFiles(store, RunNames(self.name))
        return OpenRun(
            store=store, files=files, writable=lock_held, shared_log=False, folder=None
        )

    def check_opened(self, opened: OpenRun) -> None:
        """Nothing more: the inputs are kept with the run."""

    def sink(self, opened: OpenRun) -> MemorySink:
        """Rows kept with their events."""
        assert isinstance(opened.store, MemoryStore)
        return MemorySink(opened.store)

    def lock_part(self) -> MemoryLock:
        """A lock held by one object in this process at a time."""
        return MemoryLock(self.name)


class MemorySink:
    """The write path of a run kept in memory: each row with its event."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def commit(
        self,
        ops: Sequence[Prepared],
        *,
        encode: Callable[[Event], NewEvent],
        recorded_ends: Mapping[str, tuple[int, int]],
        written: bool = False,
    ) -> tuple[list[EventRow], list[Event]]:
        """Locate each row where its file ends, store it, append the events."""
        bodies: list[Event] = []

        def build(ends: dict[str, list[int]]) -> list[NewEvent]:
            bodies[:] = locate(ops, ends)
            for op in ops:
                if op.file is not None and op.location is not None:
                    self._store.put_row(op.file, op.location.offset, op.data)
            return [encode(body) for body in bodies]

        return self._store.append_rows(build), bodies

    def close(self) -> None:
        """Nothing held."""


class MemoryFiles:
    """The files of a run kept in memory."""

    def __init__(self, store: MemoryStore, names: RunNames) -> None:
        self._store = store
        self.names = names

    def describe(self, file: str) -> str:
        """The run's name and the file's."""
        return f"{self._store.path} ({file})"

    @contextlib.contextmanager
    def reader(self) -> Iterator[RowReader]:
        """Reads straight from memory."""
        yield _MemoryReader(self._store)

    def chunks(self, file: str) -> Iterator[bytes]:
        """The file's bytes (``FileNotFoundError`` when it is absent)."""
        with self._store.run.guard:
            data = self._store.run.files.get(file)
            if data is None:
                raise FileNotFoundError(file)
            copy = bytes(data)
        yield copy

    def read_published(self, name: str) -> bytes | None:
        """A published file, or ``None``."""
        with self._store.run.guard:
            return self._store.run.published.get(name)

    def publish(self, name: str, data: bytes) -> None:
        """Replace a published file."""
        with self._store.run.guard:
            self._store.run.published[name] = bytes(data)


class _MemoryReader:
    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def read_at(self, file: str, offset: int, length: int) -> bytes | None:
        with self._store.run.guard:
            data = self._store.run.files.get(file)
            return None if data is None else bytes(data[offset : offset + length])

    def read_many(self, places: Sequence[tuple[str, int, int]]) -> list[bytes | None]:
        return [self.read_at(file, offset, length) for file, offset, length in places]


_HELD: dict[str, MemoryLock] = {}
_HELD_GUARD = threading.Lock()


class MemoryLock:
    """The run lock of a run kept in memory: one holder object at a time."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def name(self) -> str:
        """``memory://NAME``."""
        return SCHEME + self._name

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        with _HELD_GUARD:
            return _HELD.get(self._name) is self

    def acquire(self) -> None:
        """Take the lock, or raise ``LockHeld``."""
        with _HELD_GUARD:
            holder = _HELD.get(self._name)
            if holder is not None:
                raise LockHeld(self.name, holder=f"this process (pid {os.getpid()})")
            _HELD[self._name] = self
        with _RUNS_GUARD:
            run = _RUNS.get(self._name)
        if run is not None:
            run.holder = f"pid {os.getpid()}"

    def release(self) -> None:
        """Release the lock (idempotent)."""
        with _HELD_GUARD:
            if _HELD.get(self._name) is self:
                del _HELD[self._name]
