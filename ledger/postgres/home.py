"""A run on PostgreSQL (SC-1, SC-2, SC-4): its home, files, write path and lock.

The run's materialized inputs are stored with ``run_created`` in the
transaction that creates it; outcome rows are stored with their events, located
in their files under the run's head lock (``PostgresStore.append_built``), so
any number of workers record into one run without a shared filesystem.

Roles (SC-4): with the held ``RunLock`` (the session advisory lock) a ledger is
the coordinator and may append anything; without it, a worker: it may reserve,
record, admit and save judgments, each checked by the database against what
the coordinator released, and otherwise only reads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from ledger.errors import Refused
from ledger.postgres.advisory import AdvisoryRunLock, acquire_run_lock
from ledger.postgres.schema import migrate, translate
from ledger.postgres.store import PostgresStore
from ledger.postgres.url import RunUrl
from ledger.store.materialize import MaterializedInputs
from ledger.store.port import (
    LockPart,
    NewEvent,
    OpenRun,
    RowReader,
    RunNames,
)
from ledger.store.row_store_sink import RowStoreSink

__all__ = ["AdvisoryLock", "PostgresHome", "StoreFiles"]


@dataclass(frozen=True)
class PostgresHome:
    """The home of the run a run URL names."""

    url: RunUrl

    @property
    def target(self) -> str:
        """The run URL (never with a password)."""
        return str(self.url)

    @property
    def where(self) -> str:
        """The run URL."""
        return str(self.url)

    @property
    def folder(self) -> Path | None:
        """``None``: a run on PostgreSQL has no folder (SC-2)."""
        return None

    def refuse_existing(self) -> None:
        """Nothing to check first: creating the run refuses an existing one."""

    def create(
        self, first: NewEvent, inputs: MaterializedInputs, *, journal_mode: str
    ) -> None:
        """``run_created`` and the materialized inputs, in one transaction."""

        def fill(store: PostgresStore) -> None:
            name = RunNames(self.url.run).materialized
            data = inputs.data
            store.put_file_bytes(
                name,
                (
                    (entry[2], data[entry[2] : entry[2] + entry[3]])
                    for entry in inputs.entries
                ),
            )
            store.set_file_ends({name: [len(data), len(inputs.entries)]})

        PostgresStore.create(
            self.url, events=[first], stem=self.url.run, fill=fill
        ).close()

    def open(self, *, lock: LockPart | None = None) -> OpenRun:
        """A session that may append: the coordinator's, or a worker's (SC-4).

        The coordinator's appends are fenced on its held advisory lock: once
        that lock's session ended, its next append raises ``LockLost``.
        """
        store = PostgresStore.open(self.url, writable=True)
        try:
            if isinstance(lock, AdvisoryLock):
                store.fence_on(lock.advisory())
            files = StoreFiles(store, RunNames(store.stem()))
        except BaseException:
            store.close()
            raise
        return OpenRun(
            store=store, files=files, writable=True, shared_log=True, folder=None
        )

    def check_opened(self, opened: OpenRun) -> None:
        """Nothing more: the inputs are stored with ``run_created`` (SC-2)."""

    def sink(self, opened: OpenRun) -> RowStoreSink:
        """Rows stored with their events, located under the head lock (SC-2)."""
        assert isinstance(opened.store, PostgresStore)
        return RowStoreSink(opened.store)

    def lock_part(self) -> AdvisoryLock:
        """The run's session advisory lock, on a connection of its own (SC-4)."""
        return AdvisoryLock(self.url)


class StoreFiles:
    """The files of a run on PostgreSQL, kept in its tables (SC-2)."""

    def __init__(self, store: PostgresStore, names: RunNames) -> None:
        self.store = store
        self.names = names

    def describe(self, file: str) -> str:
        """The run's URL (never with a password) and the file's name."""
        return f"{self.store.path} ({file})"

    @contextlib.contextmanager
    def reader(self) -> Iterator[RowReader]:
        """One query per batch of rows read."""
        yield _StoreReader(self.store)

    def chunks(self, file: str) -> Iterator[bytes]:
        """The file's pieces in offset order (absent: ``FileNotFoundError``)."""
        found = False
        for _, data in self.store.file_pieces(file):
            found = True
            yield data
        if not found and file == self.names.materialized:
            raise FileNotFoundError(file)

    def read_published(self, name: str) -> bytes | None:
        """From the run's ``published`` table."""
        return self.store.read_published(name)

    def publish(self, name: str, data: bytes) -> None:
        """Into the run's ``published`` table, in one transaction."""
        self.store.put_published(name, data)


class _StoreReader:
    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def read_at(self, file: str, offset: int, length: int) -> bytes | None:
        return self.read_many([(file, offset, length)])[0]

    def read_many(self, places: Sequence[tuple[str, int, int]]) -> list[bytes | None]:
        found = self._store.pieces_at([(file, offset) for file, offset, _ in places])
        return [
            None if data is None else data[:length]
            for data, (_, _, length) in zip(found, places, strict=True)
        ]


class AdvisoryLock:
    """The run lock of a run on PostgreSQL: a session advisory lock (SC-4).

    Its own connection holds the run's advisory lock for as long as the lock
    is held; the server releases it when that session dies, however the
    process ended, as the kernel releases a dead holder's ``flock`` (EV-40).
    """

    def __init__(self, url: RunUrl) -> None:
        self.url = url
        self._conn: psycopg.Connection[Any] | None = None
        self._advisory: AdvisoryRunLock | None = None

    @property
    def name(self) -> str:
        """The run URL."""
        return str(self.url)

    @property
    def held(self) -> bool:
        """Whether this object holds the advisory lock."""
        return self._advisory is not None and self._advisory.held

    def acquire(self) -> None:
        """Connect and take the run's advisory lock, or raise ``LockHeld``."""
        where = str(self.url)
        try:
            conn = psycopg.connect(
                self.url.conninfo,
                autocommit=True,
                application_name="rollout-ledger lock",
                connect_timeout=10,
            )
        except psycopg.Error as exc:
            raise translate(exc, where, "connecting for the run lock") from exc
        try:
            try:
                migrate(conn)  # the lock's holder table, before the run exists
            except psycopg.Error as exc:
                raise translate(exc, where, "creating the schema") from exc
            self._advisory = acquire_run_lock(conn, self.url.run)
        except BaseException:
            self._advisory = None
            conn.close()
            raise
        self._conn = conn

    def advisory(self) -> AdvisoryRunLock:
        """The held advisory lock (its session, epoch and state)."""
        if self._advisory is None:
            raise Refused(f"the run lock for {self.url} is not held; acquire it first")
        return self._advisory

    def check(self) -> None:
        """Raise ``LockLost`` once this process knows the lock session ended.

        No round trip: a session terminated by the server is noticed by the
        fenced append itself (``PostgresStore.fence_on``), in its transaction.
        """
        advisory = self._advisory
        if advisory is None:
            return
        if advisory.lost is None and advisory.session_gone:
            advisory.lost = "the PostgreSQL session holding the run lock was closed"
        if advisory.lost is not None:
            raise advisory.lost_error()

    def release(self) -> None:
        """Release the advisory lock and close its session (idempotent)."""
        try:
            if self._advisory is not None:
                self._advisory.release()
        finally:
            self._advisory = None
            if self._conn is not None:
                with contextlib.suppress(psycopg.Error):
                    self._conn.close()
                self._conn = None
