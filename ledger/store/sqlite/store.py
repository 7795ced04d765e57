"""The SQLite event store (EV-10, EV-11, EV-13): append and read, nothing else.

Appends use ``sqlite3`` directly inside our own ``BEGIN IMMEDIATE`` (the hot
path); sqlite-utils creates the schema through named migrations. Every
``sqlite3`` error is translated into a ledger error at this boundary, so
callers never see ``sqlite3`` types.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.errors import (
    ConcurrencyConflict,
    ConfigError,
    CorruptLedger,
    Refused,
    StorageError,
)
from ledger.events import ZERO_HASH
from ledger.store.chain import chained_rows
from ledger.store.port import EventRow, NewEvent
from ledger.store.sqlite.queries import SQLiteReads
from ledger.store.sqlite.reader import is_wal, reader_uri, unreadable_journal
from ledger.store.sqlite.schema import (
    MIGRATIONS,
    PACKAGE_VERSION,
    SCHEMA_VERSION,
    blob,
    translate,
)

if TYPE_CHECKING:
    import sqlite_utils

__all__ = ["SCHEMA_VERSION", "EventRow", "NewEvent", "SQLiteStore"]

_INSERT = (
    "INSERT INTO events(seq, kind, at, actor, body, prev_hash, hash) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def _lenient_text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


class _StaleHead(Exception):
    """The head this writer remembered is not the log's: read it and run again."""


class SQLiteStore(SQLiteReads):
    """One run's ``ledger.db``: a writer (append and read) or a read-only reader."""

    def __init__(self, conn: sqlite3.Connection, path: Path, *, writable: bool) -> None:
        self._conn = conn
        self.path = path
        self.writable = writable
        #: ``(seq, hash)`` this writer committed last; ``None``: read it.
        self._head: tuple[int, bytes] | None = None

    # -- opening -----------------------------------------------------------

    @classmethod
    def create(cls, path: Path, *, journal_mode: str = "wal") -> SQLiteStore:
        """Create a new database at ``path`` (which must not exist) with the schema."""
        if journal_mode not in ("wal", "delete"):
            raise ConfigError(
                f"journal mode must be 'wal' or 'delete', not {journal_mode!r}",
                key="journal_mode",
            )
        if path.exists():
            raise Refused(f"{path} exists already")
        store = cls._connect(path, writable=True)
        try:
            with store._guard("creating the schema"):
                store._conn.execute(f"PRAGMA journal_mode={journal_mode}")
                store._migrate()
        except BaseException:
            store.close()  # the caller removes the half-made file
            raise
        return store

    @classmethod
    def open(cls, path: Path, *, writable: bool) -> SQLiteStore:
        """Open an existing database; a reader opens it read-only (EV-12)."""
        if not path.is_file():
            raise CorruptLedger(
                f"{path} does not exist: this is not a rollout-ledger run (create it "
                "with `rollout-ledger create` or `rollout-ledger import`)",
                path=path,
            )
        store = cls._connect(path, writable=writable)
        try:
            store.check_schema()
        except CorruptLedger as exc:
            store.close()
            raise (None if writable else unreadable_journal(path)) or exc from exc
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def _connect(cls, path: Path, *, writable: bool) -> SQLiteStore:
        target = str(path) if writable else reader_uri(path)
        try:
            conn = sqlite3.connect(
                target,
                uri=not writable,
                isolation_level=None,
                check_same_thread=False,
                timeout=30.0,
            )
            # EV-11: a returned append is durable after kill -9 or power loss.
            conn.execute("PRAGMA synchronous=FULL")
            # A byte flipped into invalid UTF-8 must read back as text that
            # breaks the chain at its seq, not as an error naming no event.
            conn.text_factory = _lenient_text
        except sqlite3.Error as exc:
            journal = None if writable else unreadable_journal(path)
            raise journal or translate(exc, path, "opening") from exc
        return cls(conn, path, writable=writable)

    def _migrate(self) -> None:
        # Imported here: only a migration needs it, and it costs a reader
        # ~10 MiB of peak RSS (P-3, P-4).
        import sqlite_utils

        db = sqlite_utils.Database(self._conn, execute_plugins=False)
        applied = self._applied_migrations(db)
        for name, migrate in MIGRATIONS:
            if name in applied:
                continue
            with self.transaction():
                migrate(db)
                db.table("migrations").insert({"name": name}, pk="name")
                self._set_meta("schema_version", str(SCHEMA_VERSION))
                self._set_meta("package_version", PACKAGE_VERSION)

    def _applied_migrations(self, db: sqlite_utils.Database) -> set[str]:
        if not db.table("migrations").exists():
            db.table("migrations").create({"name": str}, pk="name")
        return {row["name"] for row in db.table("migrations").rows}

    def _set_meta(self, key: str, value: str) -> None:
        self._conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def check_schema(self) -> int:
        """The stored schema version; a newer or missing one is ``CorruptLedger``."""
        with self._guard("reading the schema version"):
            row = self._conn.execute(
                "SELECT value FROM meta WHERE key = 'schema_version'"
            ).fetchone()
        if row is None or not str(row[0]).isdigit():
            raise CorruptLedger(f"{self.path} has no schema version", path=self.path)
        version = int(row[0])
        if version > SCHEMA_VERSION:
            raise CorruptLedger(
                f"{self.path} has schema version {version}, newer than this "
                f"rollout-ledger's {SCHEMA_VERSION}; upgrade rollout-ledger to read it",
                path=self.path,
            )
        if version < SCHEMA_VERSION and self.writable:
            self._migrate()
        return version

    # -- transactions ------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``; rollback on any exception, re-raised."""
        with self._guard("starting a transaction"):
            self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise
        with self._guard("committing"):
            self._conn.execute("COMMIT")

    # -- the log -----------------------------------------------------------

    def head(self) -> tuple[int, bytes]:
        """``(seq, hash)`` of the newest event; ``(0, ZERO_HASH)`` when empty."""
        with self._guard("reading the head"):
            row = self._conn.execute(
                "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        if row is None:
            return (0, ZERO_HASH)
        return (int(row[0]), blob(row[1], self.path, row[0], "hash"))

    def append_many(
        self, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[EventRow]:
        """Append ``events`` in one transaction, chained on the head (EV-11).

        The hot path (P-1, P-2): no generator context managers, and the head
        this writer committed last instead of a ``SELECT`` per transaction.
        That head can only be stale when another connection appended (the run
        lock makes this writer the only one); the stale seq is then taken by
        now, the ``INSERT`` fails on the primary key, and the transaction is
        run again on the head read from the log, so ``expected_seq`` is always
        compared with the log's own head.
        """
        if not self.writable:
            raise Refused(f"{self.path} is open read-only; appends need the run lock")
        conn = self._conn
        head = self._head
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise translate(exc, self.path, "starting a transaction") from exc
            try:
                rows = self._insert(events, expected_seq, head)
            except _StaleHead:
                conn.execute("ROLLBACK")
                head = self._head = None
                continue
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._head = None
                raise translate(exc, self.path, "committing") from exc
            if rows:
                last = rows[-1]
                self._head = (last.seq, last.hash)
            return rows

    def _insert(
        self,
        events: Sequence[NewEvent],
        expected_seq: int | None,
        cached: tuple[int, bytes] | None,
    ) -> list[EventRow]:
        seq, prev = self.head() if cached is None else cached
        if expected_seq is not None and expected_seq != seq:
            if cached is not None:
                raise _StaleHead  # compare with the log's head, never a cache
            raise ConcurrencyConflict(expected_seq=expected_seq, actual_seq=seq)
        rows = chained_rows(events, seq, prev)
        try:
            # Plain tuples: sqlite3 binds a tuple subclass (EventRow) through
            # the slower sequence protocol (~0.4 us a row, P-2).
            if len(rows) == 1:
                self._conn.execute(_INSERT, tuple(rows[0]))
            else:
                self._conn.executemany(_INSERT, map(tuple, rows))
        except sqlite3.IntegrityError as exc:
            if cached is not None and self.head() != cached:
                raise _StaleHead from exc
            raise translate(exc, self.path, "appending") from exc
        except sqlite3.Error as exc:
            raise translate(exc, self.path, "appending") from exc
        return rows

    def append_in_transaction(
        self, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[EventRow]:
        """Append inside a transaction the caller already holds."""
        self._head = None  # the caller may still roll back: read it next time
        return self._insert(events, expected_seq, None)

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
                "INSERT OR REPLACE INTO snapshots(seq, head_hash, code_version, "
                "policy_digest, state) VALUES (?, ?, ?, ?, ?)",
                (seq, head_hash, code_version, policy_digest, state),
            )

    def load_snapshot(
        self, code_version: str, policy_digest: str
    ) -> tuple[int, bytes, bytes] | None:
        """``(seq, head_hash, state)`` of the stored snapshot, if any (EV-14)."""
        with self._guard("reading a snapshot"):
            row = self._conn.execute(
                "SELECT seq, head_hash, state FROM snapshots "
                "WHERE code_version = ? AND policy_digest = ?",
                (code_version, policy_digest),
            ).fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]), bytes(row[2]))

    def lock_holder(self) -> str | None:
        """``None``: a run in a folder names its holder in its lock file (EV-40)."""
        return None

    def journal_mode(self) -> str:
        """The database's journal mode (``wal`` or ``delete``)."""
        with self._guard("reading the journal mode"):
            mode = str(self._conn.execute("PRAGMA journal_mode").fetchone()[0])
        # A reader opened ``immutable=1`` (a folder it cannot write) is told
        # ``delete``; the file's header keeps the mode it was made with.
        return "wal" if mode == "delete" and is_wal(self.path) else mode

    def finish(self) -> None:
        """Checkpoint the whole WAL, check the file, close (a database built aside).

        A checkpoint that copies less than the whole log (a full disk) or a
        file that does not check whole raises: it must not be renamed then.
        ``quick_check``: every page and record well formed, in O(size).
        """
        with self._guard("checkpointing"):
            sql = "PRAGMA wal_checkpoint(TRUNCATE)"
            busy, log, copied = self._conn.execute(sql).fetchone()
            found = [row[0] for row in self._conn.execute("PRAGMA quick_check")]
        if busy or log != copied or found != ["ok"]:
            raise StorageError(
                f"{self.path} is not whole after writing it: the checkpoint copied "
                f"{copied} of {log} log pages (busy: {busy}); check: {found[0]}",
                path=self.path,
            )
        self.close()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()
