"""The PostgreSQL event store (SC-1..SC-3): the SQLite store's contract, many writers.

``PostgresStore`` has the public methods of the SQLite store (``SQLiteStore``)
with the same meaning, rows and errors, so a ``Ledger`` can hold either. What
differs is how appends are serialized: each append locks its run's row in
``runs`` (``SELECT ... FOR UPDATE``) inside the transaction, so any number of
processes on any number of nodes append to one run with a gap-free ``seq`` and
one hash chain, computed over exactly the bytes SQLite hashes (EV-2). The same
transaction checks reservations (SC-3) and may store outcome rows (SC-2).
Every ``psycopg`` error is translated into a ledger error at this boundary.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from ledger.errors import (
    ConcurrencyConflict,
    ConfigError,
    CorruptLedger,
    Refused,
)
from ledger.postgres.advisory import (
    AdvisoryRunLock,
    acquire_run_lock,
    current_holder,
    fenced_head,
)
from ledger.postgres.files import (
    StoreFilesMixin,
    insert_rows,
    read_file_ends,
    write_file_ends,
)
from ledger.postgres.reading import COLUMNS, StoredRow, StoreReadingMixin
from ledger.postgres.reservations import apply_attempt_changes, attempt_changes
from ledger.postgres.schema import PACKAGE_VERSION, PG_SCHEMA_VERSION, SCHEMA, migrate
from ledger.postgres.schema import translate as _translate
from ledger.postgres.url import RunUrl
from ledger.store.chain import chained_rows
from ledger.store.port import Builder, EventRow, NewEvent, NewRow

__all__ = [
    "PG_SCHEMA_VERSION",
    "AdvisoryRunLock",
    "NewRow",
    "PostgresStore",
    "StoredRow",
    "acquire_run_lock",
]

_COLUMNS = COLUMNS
_INSERT_EVENT = (
    f"INSERT INTO {SCHEMA}.events (run, {_COLUMNS}) "
    "VALUES (%s, %s, %s, %s, %s, %b, %b, %b)"
)


class PostgresStore(StoreReadingMixin, StoreFilesMixin):
    """One run in a PostgreSQL database: a writer (append and read) or a reader."""

    #: Rows per page of a streamed read (EV-13).
    read_batch = 2000
    #: Events per statement of a read of some kinds only.
    kind_window = 20_000

    def __init__(
        self, conn: psycopg.Connection[Any], url: RunUrl, *, writable: bool
    ) -> None:
        self._conn = conn
        self.url = url
        self.run = url.run
        self.path = str(url)  # where, in messages: the URL never holds a password
        self.writable = writable
        #: The coordinator's run lock every append is fenced on (SC-4).
        self._fence: AdvisoryRunLock | None = None

    def fence_on(self, lock: AdvisoryRunLock) -> None:
        """Fence every later append on ``lock``: a coordinator's store (SC-4).

        Each append then checks, in its own transaction, that the run's
        fencing epoch is still ``lock``'s and that its session still holds
        the advisory lock; else it raises ``LockLost`` and appends nothing.
        """
        if lock.run != self.run:
            raise Refused(f"the run lock held is for {lock.where}, not {self.path}")
        self._fence = lock

    # -- opening -----------------------------------------------------------

    @classmethod
    def create(
        cls,
        url: RunUrl | str,
        *,
        events: Sequence[NewEvent] = (),
        stem: str | None = None,
        fill: Callable[[PostgresStore], None] | None = None,
    ) -> PostgresStore:
        """Create the run (which must not exist) with ``events``, in one transaction.

        The run appears with its first events or not at all, as the SQLite
        database appears under its name only once it holds ``run_created``.
        ``stem`` names its files (the run name by default, SC-2); ``fill``
        stores what else the run starts with (its materialized inputs) in the
        same transaction.
        """
        store = cls._connect(_as_url(url), writable=True)
        try:
            with store._guard("creating the schema"):
                migrate(store._conn)
            with store.transaction() as conn, store._guard("creating the run"):
                created = conn.execute(
                    f"INSERT INTO {SCHEMA}.runs (run, head_seq, head_hash, "
                    "package_version, stem) VALUES (%s, 0, %b, %s, %s) "
                    "ON CONFLICT (run) DO NOTHING RETURNING run",
                    (store.run, bytes(32), PACKAGE_VERSION, stem or store.run),
                ).fetchone()
                if created is None:
                    raise ConfigError(
                        f"{store.path} exists already: this run was started; "
                        "continue it with `rollout-ledger resume`"
                    )
                store.append_in_transaction(events)
                if fill is not None:
                    fill(store)
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def open(cls, url: RunUrl | str, *, writable: bool) -> PostgresStore:
        """Open an existing run; a reader's session is read-only (EV-12)."""
        store = cls._connect(_as_url(url), writable=writable)
        try:
            store.check_schema()
            store._require_run()
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def _connect(cls, url: RunUrl, *, writable: bool) -> PostgresStore:
        options: dict[str, Any] = {"autocommit": True}
        if "connect_timeout=" not in url.conninfo:
            options["connect_timeout"] = 10
        try:
            conn = psycopg.connect(
                url.conninfo, application_name="rollout-ledger", **options
            )
        except psycopg.Error as exc:
            raise _translate(exc, str(url), "connecting") from exc
        store = cls(conn, url, writable=writable)
        try:
            with store._guard("setting up the session"):
                # EV-11: a returned append is durable: the commit waits for the
                # server's WAL flush whatever the server's default.
                conn.execute("SET synchronous_commit = on")
                if not writable:
                    conn.execute("SET default_transaction_read_only = on")
        except BaseException:
            store.close()
            raise
        return store

    def _require_run(self) -> None:
        with self._guard("finding the run"):
            found = self._conn.execute(
                f"SELECT 1 FROM {SCHEMA}.runs WHERE run = %s", (self.run,)
            ).fetchone()
        if found is None:
            raise CorruptLedger(
                f"{self.path}: there is no run {self.run!r} in this database "
                "(create it with `rollout-ledger create`, or check ?run=)",
                path=self.path,
            )

    def check_schema(self) -> int:
        """The stored schema version; a newer or missing one is ``CorruptLedger``."""
        with self._guard("reading the schema version"):
            row = self._conn.execute(
                f"SELECT value FROM {SCHEMA}.meta WHERE key = 'schema_version'"
            ).fetchone()
        if row is None or not str(row[0]).isdigit():
            raise CorruptLedger(f"{self.path} has no schema version", path=self.path)
        version = int(row[0])
        if version > PG_SCHEMA_VERSION:
            raise CorruptLedger(
                f"{self.path} has schema version {version}, newer than this "
                f"rollout-ledger's {PG_SCHEMA_VERSION}; upgrade rollout-ledger to "
                "read it",
                path=self.path,
            )
        if version < PG_SCHEMA_VERSION and self.writable:
            with self._guard("migrating the schema"):
                migrate(self._conn)
        return version

    # -- transactions ------------------------------------------------------

    @contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        try:
            yield
        except psycopg.Error as exc:
            raise _translate(exc, self.path, doing) from exc

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """``BEGIN`` ... ``COMMIT``; rollback on any exception, re-raised."""
        with self._guard("committing"), self._conn.transaction():
            yield self._conn

    # -- the log -----------------------------------------------------------

    def head(self) -> tuple[int, bytes]:
        """``(seq, hash)`` of the newest event; ``(0, ZERO_HASH)`` when empty."""
        with self._guard("reading the head"), self._conn.cursor(binary=True) as cur:
            row = cur.execute(
                f"SELECT seq, hash FROM {SCHEMA}.events WHERE run = %s "
                "ORDER BY seq DESC LIMIT 1",
                (self.run,),
            ).fetchone()
        return (0, bytes(32)) if row is None else (int(row[0]), bytes(row[1]))

    def append_many(
        self, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[EventRow]:
        """Append ``events`` in one transaction, chained on the head (EV-11, SC-3)."""
        return self.append_with_rows(events, (), expected_seq=expected_seq)

    def append_with_rows(
        self,
        events: Sequence[NewEvent],
        rows: Sequence[NewRow | None],
        *,
        expected_seq: int | None = None,
    ) -> list[EventRow]:
        """Append ``events`` and store ``rows[i]`` with ``events[i]`` (SC-2).

        ``rows`` is empty, or as long as ``events`` with ``None`` for an event
        that has no row; the rows commit with their events or not at all.
        """
        if not self.writable:
            raise Refused(
                f"{self.path} is open read-only; open it as a writer to append"
            )
        with self.transaction():
            return self.append_in_transaction(
                events, expected_seq=expected_seq, rows=rows
            )

    def append_in_transaction(
        self,
        events: Sequence[NewEvent],
        *,
        expected_seq: int | None = None,
        rows: Sequence[NewRow | None] = (),
    ) -> list[EventRow]:
        """Append inside a transaction the caller already holds."""
        if rows and len(rows) != len(events):
            raise Refused(
                f"{len(rows)} rows for {len(events)} events: give one per event "
                "(None for an event without a row)"
            )
        if self._conn.info.transaction_status != TransactionStatus.INTRANS:
            raise Refused("append_in_transaction needs the store's transaction()")
        with self._guard("appending"), self._conn.cursor() as cur:
            head = self._lock_head(cur)
            return self._append_locked(cur, head, events, rows, expected_seq)

    def append_built(
        self, build: Builder, *, expected_seq: int | None = None
    ) -> list[EventRow]:
        """Append what ``build`` makes of the files' ends, under the head's lock.

        SC-2, SC-3: with many writers, where a row lands in its file is known
        only once the run's head is locked, so ``build`` receives the ends
        (``{file: [offset, lines]}``, which it advances) and returns the
        events and their rows; both commit with the advanced ends, or nothing.
        """
        if not self.writable:
            raise Refused(
                f"{self.path} is open read-only; open it as a writer to append"
            )
        with self.transaction(), self._guard("appending"), self._conn.cursor() as cur:
            head = self._lock_head(cur)
            ends = read_file_ends(cur, self.run)
            events, rows = build(ends)
            chained = self._append_locked(cur, head, events, rows, expected_seq)
            write_file_ends(cur, self.run, ends)
        return chained

    def _append_locked(
        self,
        cur: psycopg.Cursor[Any],
        head: tuple[int, bytes, int],
        events: Sequence[NewEvent],
        rows: Sequence[NewRow | None],
        expected_seq: int | None,
    ) -> list[EventRow]:
        seq, prev, epoch = head
        if expected_seq is not None and expected_seq != seq:
            raise ConcurrencyConflict(expected_seq=expected_seq, actual_seq=seq)
        chained = chained_rows(events, seq, prev)
        changes = attempt_changes(chained, epoch=epoch, where=self.path)
        apply_attempt_changes(cur, self.run, changes, where=self.path)
        if chained:
            cur.executemany(_INSERT_EVENT, [(self.run, *row) for row in chained])
            insert_rows(cur, self.run, chained, rows)
            cur.execute(
                f"UPDATE {SCHEMA}.runs SET head_seq = %s, head_hash = %b, "
                "release_epoch = %s WHERE run = %s",
                (chained[-1].seq, chained[-1].hash, changes.epoch, self.run),
            )
        return chained

    def _lock_head(self, cur: psycopg.Cursor[Any]) -> tuple[int, bytes, int]:
        # SC-3: this row lock serializes every append to the run, on any node;
        # a coordinator's also reads its fence (SC-4).
        if self._fence is not None:
            found = fenced_head(cur, self._fence)
        else:
            found = cur.execute(
                f"SELECT head_seq, head_hash, release_epoch FROM {SCHEMA}.runs "
                "WHERE run = %s FOR UPDATE",
                (self.run,),
            ).fetchone()
        if found is None:
            raise CorruptLedger(
                f"{self.path}: the run {self.run!r} is not in this database",
                path=self.path,
            )
        return int(found[0]), bytes(found[1]), int(found[2])

    def save_snapshot(
        self,
        seq: int,
        head_hash: bytes,
        code_version: str,
        policy_digest: str,
        state: bytes,
    ) -> None:
        """Store a projection snapshot (EV-14); one per code version and policy."""
        with self.transaction() as conn, self._guard("saving a snapshot"):
            conn.execute(
                f"INSERT INTO {SCHEMA}.snapshots (run, code_version, policy_digest, "
                "seq, head_hash, state) VALUES (%s, %s, %s, %s, %b, %b) "
                "ON CONFLICT (run, code_version, policy_digest) DO UPDATE SET "
                "seq = excluded.seq, head_hash = excluded.head_hash, "
                "state = excluded.state",
                (self.run, code_version, policy_digest, seq, head_hash, state),
            )

    def load_snapshot(
        self, code_version: str, policy_digest: str
    ) -> tuple[int, bytes, bytes] | None:
        """``(seq, head_hash, state)`` of the stored snapshot, if any (EV-14)."""
        with self._guard("reading a snapshot"), self._conn.cursor(binary=True) as cur:
            row = cur.execute(
                f"SELECT seq, head_hash, state FROM {SCHEMA}.snapshots "
                "WHERE run = %s AND code_version = %s AND policy_digest = %s",
                (self.run, code_version, policy_digest),
            ).fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]), bytes(row[2]))

    def journal_mode(self) -> str:
        """``postgresql``: durability is the server's commit (no SQLite journal)."""
        return "postgresql"

    def analyze(self) -> None:
        """Refresh the planner's statistics (after a bulk load such as an import)."""
        with self._guard("analyzing"):
            for table in ("events", "rows", "file_bytes"):
                self._conn.execute(f"ANALYZE {SCHEMA}.{table}")

    def lock_holder(self) -> str | None:
        """Who holds the run lock (SC-4), or ``None`` when it is free."""
        return current_holder(self._conn, self.run)

    def acquire_run_lock(self) -> AdvisoryRunLock:
        """Take the run's advisory lock on this store's session (SC-4)."""
        return acquire_run_lock(self._conn, self.run)

    def close(self) -> None:
        """Close the connection (idempotent; a held run lock goes with it)."""
        self._conn.close()


def _as_url(url: RunUrl | str) -> RunUrl:
    return url if isinstance(url, RunUrl) else RunUrl.parse(url)
