"""The PostgreSQL store's schema (SC-1..SC-3): one schema, named migrations.

Every run of a database lives in the tables of one schema, ``rollout_ledger``,
keyed by the run's name. Migrations are applied in order, each recorded by
name, under a transaction-scoped advisory lock so that two processes opening a
fresh database at once do not race to create it.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import errors as pg_errors

from ledger.errors import CorruptLedger, LedgerError, Refused, StorageError

__all__ = [
    "LOCK_NAMESPACE",
    "MIGRATIONS",
    "PG_SCHEMA_VERSION",
    "SCHEMA",
    "WORKER_NAMESPACE",
    "migrate",
]

SCHEMA = "rollout_ledger"
PACKAGE_VERSION = "0.1.0"
#: The first key of every advisory lock rollout-ledger takes (the second is 0
#: for migrations, or derived from the run name for the run lock, SC-4), so
#: they never collide with another application's single-key advisory locks.
LOCK_NAMESPACE = 0x526C6472  # "Rldr"
#: The first key of a worker's own advisory lock (issue 29); the second is
#: derived from the run and the worker's name.
WORKER_NAMESPACE = 0x526C6477  # "Rldw"

_RUNS_EVENTS_META = (
    f"CREATE TABLE {SCHEMA}.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # SC-3: the row every append locks FOR UPDATE; the head it holds is what
    # the next append chains on. release_epoch is the seq of the newest
    # resume_started: a release older than it no longer holds (REC-3).
    f"""CREATE TABLE {SCHEMA}.runs (
        run TEXT PRIMARY KEY,
        head_seq BIGINT NOT NULL,
        head_hash BYTEA NOT NULL,
        release_epoch BIGINT NOT NULL DEFAULT 0,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        package_version TEXT NOT NULL)""",
    # EV-10, keyed by run. No foreign key to runs: the append holds the runs
    # row already, and a per-row key check would only cost throughput.
    f"""CREATE TABLE {SCHEMA}.events (
        run TEXT NOT NULL,
        seq BIGINT NOT NULL,
        kind TEXT NOT NULL,
        at TEXT NOT NULL,
        actor TEXT NOT NULL,
        body BYTEA NOT NULL,
        prev_hash BYTEA NOT NULL,
        hash BYTEA NOT NULL,
        PRIMARY KEY (run, seq))""",
    # Projections read some kinds first and cheaply (REC-60), as on SQLite.
    f"CREATE INDEX events_by_kind ON {SCHEMA}.events (run, kind, seq)",
)
_SNAPSHOTS = (
    f"""CREATE TABLE {SCHEMA}.snapshots (
        run TEXT NOT NULL,
        code_version TEXT NOT NULL,
        policy_digest TEXT NOT NULL,
        seq BIGINT NOT NULL,
        head_hash BYTEA NOT NULL,
        state BYTEA NOT NULL,
        PRIMARY KEY (run, code_version, policy_digest))""",
)
_ROWS = (
    # SC-2: each outcome row's bytes, stored in the transaction of its event.
    f"""CREATE TABLE {SCHEMA}.rows (
        run TEXT NOT NULL,
        seq BIGINT NOT NULL,
        file TEXT NOT NULL,
        "offset" BIGINT NOT NULL,
        sha256 TEXT NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (run, seq))""",
)
_RESERVATIONS = (
    # SC-3: what the appending transaction checks a reservation against.
    f"""CREATE TABLE {SCHEMA}.releases (
        run TEXT NOT NULL,
        task BIGINT NOT NULL,
        rollout BIGINT NOT NULL,
        attempt BIGINT NOT NULL,
        released_seq BIGINT NOT NULL,
        PRIMARY KEY (run, task, rollout, attempt))""",
    f"""CREATE TABLE {SCHEMA}.reservations (
        run TEXT NOT NULL,
        task BIGINT NOT NULL,
        rollout BIGINT NOT NULL,
        attempt BIGINT NOT NULL,
        seq BIGINT NOT NULL,
        PRIMARY KEY (run, task, rollout, attempt))""",
)
_RUN_LOCKS = (
    # SC-4: who holds a run's advisory lock, for the next one's LockHeld.
    f"""CREATE TABLE {SCHEMA}.run_locks (
        run TEXT PRIMARY KEY,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        started TEXT NOT NULL,
        backend_pid INTEGER NOT NULL)""",
)
_RUN_FILES = (
    # SC-2: a run on PostgreSQL keeps no files. The names its events locate
    # rows in derive from ``stem`` (the run name, or the stem of the
    # file-based run it was imported from, so imported events keep their
    # hashes). ``file_bytes`` holds the bytes of those files that are not an
    # event's row (the materialized inputs, one line each, and whatever an
    # imported file held besides its recorded rows); ``file_ends`` is where
    # each file's bytes end, advanced in the appending transaction so two
    # workers never locate two rows at one offset; ``published`` holds the
    # published files (EV-31), which a file-based run keeps in its folder.
    f"ALTER TABLE {SCHEMA}.runs ADD COLUMN stem TEXT NOT NULL DEFAULT ''",
    f"""CREATE TABLE {SCHEMA}.file_bytes (
        run TEXT NOT NULL,
        file TEXT NOT NULL,
        "offset" BIGINT NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (run, file, "offset"))""",
    f"""CREATE TABLE {SCHEMA}.file_ends (
        run TEXT NOT NULL,
        file TEXT NOT NULL,
        end_offset BIGINT NOT NULL,
        lines BIGINT NOT NULL,
        PRIMARY KEY (run, file))""",
    f"""CREATE TABLE {SCHEMA}.published (
        run TEXT NOT NULL,
        name TEXT NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (run, name))""",
    f'CREATE INDEX rows_by_place ON {SCHEMA}.rows (run, file, "offset")',
)
_RUN_FENCES = (
    # SC-4: the run lock's fencing token. Each acquirer of a run's advisory
    # lock bumps ``epoch`` (never reset: the row outlives its holders); each
    # append of a coordinator reads it FOR SHARE in its own transaction and
    # stops unless it is still the epoch it took, and its lock session still
    # holds the lock. The bump waits for an append in flight, so no append of
    # a holder that lost its lock commits after the next holder took it.
    f"""CREATE TABLE {SCHEMA}.run_fences (
        run TEXT PRIMARY KEY,
        epoch BIGINT NOT NULL)""",
)

_STAGE_RESERVATIONS = (
    # ROW-64, SC-3: a later stage of a multistage attempt, reserved once (a
    # continuation reserves its attempt again, at the stage it goes on at).
    f"""CREATE TABLE {SCHEMA}.stage_reservations (
        run TEXT NOT NULL,
        task BIGINT NOT NULL,
        rollout BIGINT NOT NULL,
        attempt BIGINT NOT NULL,
        stage BIGINT NOT NULL,
        seq BIGINT NOT NULL,
        PRIMARY KEY (run, task, rollout, attempt, stage))""",
)

_WORKERS = (
    # Issue 29: the workers of a run and the work its coordinator offers them.
    # Neither is part of the log (nothing here is hashed or exported): the
    # log holds what was released, reserved and recorded; these say who works
    # on what now. A worker holds a session advisory lock of its own
    # (``lock_key`` under WORKER_NAMESPACE) while it lives; ``backend_pid``
    # is its session's server process, so its lock is found in pg_locks.
    f"""CREATE TABLE {SCHEMA}.workers (
        run TEXT NOT NULL,
        worker TEXT NOT NULL,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        started TIMESTAMPTZ NOT NULL DEFAULT now(),
        last_heard TIMESTAMPTZ NOT NULL DEFAULT now(),
        backend_pid INTEGER NOT NULL,
        lock_key INTEGER NOT NULL,
        rows_recorded BIGINT NOT NULL DEFAULT 0,
        state TEXT NOT NULL,
        ended TIMESTAMPTZ,
        PRIMARY KEY (run, worker))""",
    # One row per released attempt (kind ``dispatch``) or re-judgment
    # (``rejudge``) offered in the release epoch ``epoch``; ``worker`` is who
    # claimed it (NULL: claimable), ``done`` once its batch ended.
    f"""CREATE TABLE {SCHEMA}.work (
        run TEXT NOT NULL,
        kind TEXT NOT NULL,
        task BIGINT NOT NULL,
        rollout BIGINT NOT NULL,
        attempt BIGINT NOT NULL,
        epoch BIGINT NOT NULL,
        worker TEXT,
        claimed_at TIMESTAMPTZ,
        done BOOLEAN NOT NULL DEFAULT false,
        PRIMARY KEY (run, kind, task, rollout, attempt))""",
    f"CREATE INDEX work_by_worker ON {SCHEMA}.work (run, worker)",
)

#: Named migrations, applied in order and recorded; never edit or reorder one.
MIGRATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("0001_runs_events_and_meta", _RUNS_EVENTS_META),
    ("0002_snapshots", _SNAPSHOTS),
    ("0003_rows", _ROWS),
    ("0004_releases_and_reservations", _RESERVATIONS),
    ("0005_run_locks", _RUN_LOCKS),
    ("0006_run_files", _RUN_FILES),
    ("0007_run_fences", _RUN_FENCES),
    ("0008_stage_reservations", _STAGE_RESERVATIONS),
    ("0009_workers", _WORKERS),
)
PG_SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: psycopg.Connection[Any]) -> None:
    """Apply the migrations this database lacks, in order, in one transaction."""
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_NAMESPACE,))
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        cur.execute(
            f"CREATE TABLE IF NOT EXISTS {SCHEMA}.migrations "
            "(name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        cur.execute(f"SELECT name FROM {SCHEMA}.migrations")
        applied = {row[0] for row in cur.fetchall()}
        pending = [(name, sql) for name, sql in MIGRATIONS if name not in applied]
        for name, statements in pending:
            for statement in statements:
                cur.execute(statement)
            cur.execute(f"INSERT INTO {SCHEMA}.migrations(name) VALUES (%s)", (name,))
        if pending:
            for key, value in (
                ("schema_version", str(PG_SCHEMA_VERSION)),
                ("package_version", PACKAGE_VERSION),
            ):
                cur.execute(
                    f"INSERT INTO {SCHEMA}.meta(key, value) VALUES (%s, %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (key, value),
                )


def translate(exc: psycopg.Error, where: str, doing: str) -> LedgerError:
    """The ledger error for a psycopg error, with what to do about it."""
    if isinstance(exc, pg_errors.UndefinedTable | pg_errors.InvalidSchemaName):
        return CorruptLedger(
            f"{where}: the database has no rollout-ledger schema (while {doing}); "
            "create a run there first with `rollout-ledger create`",
            path=where,
        )
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
        return Refused(
            f"{where} is open read-only (while {doing}); open it as a writer"
        )
    if isinstance(exc, psycopg.InterfaceError):
        return StorageError(
            f"{where}: {exc} (while {doing}); open the run again", path=where
        )
    if isinstance(
        exc,
        psycopg.OperationalError
        | pg_errors.SerializationFailure
        | pg_errors.DeadlockDetected,
    ):
        return StorageError(
            f"{where}: PostgreSQL is unavailable or busy while {doing}: "
            f"{_first_line(exc)}; check the server and try again",
            path=where,
        )
    return CorruptLedger(
        f"{where}: PostgreSQL error while {doing}: {_first_line(exc)}", path=where
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
