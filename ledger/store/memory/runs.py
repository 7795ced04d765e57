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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ledger.errors import (
    ConfigError,
    LockHeld,
)
from ledger.events import ZERO_HASH
from ledger.store.chain import chained_rows
from ledger.store.materialize import MaterializedInputs
from ledger.store.memory.log import (
    SCHEME,
    MemoryStore,
    forget_all,
    new_run,
    run_named,
    runs,
)
from ledger.store.port import (
    LockPart,
    NewEvent,
    OpenRun,
    RowReader,
    RunNames,
)
from ledger.store.row_store_sink import RowStoreSink

__all__ = ["SCHEME", "MemoryHome", "MemoryStore", "forget_all", "is_memory_url"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def is_memory_url(text: str | os.PathLike[str]) -> bool:
    """Whether ``text`` names a run kept in memory (``memory://NAME``)."""
    return isinstance(text, str) and text.startswith(SCHEME)


def _name_of(url: str) -> str:
    name = url[len(SCHEME) :]
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"{url!r} is not a memory run name: use memory://NAME with letters, "
            "digits, '.', '_' and '-'",
            key="run",
        )
    return name


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
        if run_named(self.name) is not None:
            raise ConfigError(f"{self.where} exists already: this run was started")

    def create(
        self, first: NewEvent, inputs: MaterializedInputs, *, journal_mode: str
    ) -> None:
        """The run with its first event and materialized inputs, at once."""
        run = new_run()
        names = RunNames(self.name)
        run.files[names.materialized] = bytearray(inputs.data)
        run.lines[names.materialized] = len(inputs.entries)
        run.events.extend(chained_rows([first], 0, ZERO_HASH))
        with runs() as table:
            if self.name in table:
                raise ConfigError(f"{self.where} exists already: this run was started")
            table[self.name] = run

    def open(self, *, lock: LockPart | None = None) -> OpenRun:
        """The run's log, files and write path: a writer with the lock held."""
        store = MemoryStore.open(self.name, writable=lock is not None)
        files = MemoryFiles(store, RunNames(self.name))
        return OpenRun(
            store=store,
            files=files,
            writable=lock is not None,
            shared_log=False,
            folder=None,
        )

    def check_opened(self, opened: OpenRun) -> None:
        """Nothing more: the inputs are kept with the run."""

    def sink(self, opened: OpenRun) -> RowStoreSink:
        """Rows kept with their events."""
        assert isinstance(opened.store, MemoryStore)
        return RowStoreSink(opened.store)

    def lock_part(self) -> MemoryLock:
        """A lock held by one object in this process at a time."""
        return MemoryLock(self.name)


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
        run = run_named(self._name)
        if run is not None:
            run.holder = f"pid {os.getpid()}"

    def check(self) -> None:
        """Nothing to check: only this process can take a lock kept in memory."""

    def release(self) -> None:
        """Release the lock (idempotent)."""
        with _HELD_GUARD:
            if _HELD.get(self._name) is self:
                del _HELD[self._name]
