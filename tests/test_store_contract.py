"""SC-6: one store contract, run against SQLite and a real PostgreSQL server alike.

The ``store`` fixture yields a new, empty run on each backend; every contract
test runs on both. PostgreSQL-only tests follow (SC-1..SC-4). The server is the
one at ``ROLLOUT_LEDGER_TEST_PG`` (default: the local server's ``test``
database as ``postgres``); without one, these tests fail in CI and are skipped
elsewhere, with the reason.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import (
    ConcurrencyConflict,
    ConfigError,
    CorruptLedger,
    LedgerError,
    LockHeld,
)
from ledger.events import (
    EVENT_TYPES,
    ZERO_HASH,
    AttemptReserved,
    AttemptsReleased,
    Event,
    RerunApproved,
    ResumeStarted,
    chain_hash,
    decode_body,
    encode_body,
    kind_of,
)
from tests.internals import (
    MIGRATIONS,
    PG_SCHEMA_VERSION,
    SCHEMA,
    SCHEMA_VERSION,
    STORE_ENV,
    MemoryStore,
    NewEvent,
    NewRow,
    PostgresStore,
    RunUrl,
    SQLiteStore,
    acquire_run_lock,
    decode_row,
    first_chain_break,
    forget_all,
    is_postgres_url,
    migrate,
    resolve_run,
)
from tests.pg_server import PG_ENV, require_server
from tests.strategies import event_of

Store = SQLiteStore | PostgresStore | MemoryStore

AT = "2026-01-01T00:00:00.000000Z"


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[PostgresStore]:
    """A new run in the test's own database (``pg_url``, tests/conftest.py)."""
    url = resolve_run(f"t-{uuid.uuid4().hex[:12]}", environ={STORE_ENV: pg_url})
    store = PostgresStore.create(url)
    yield store
    store.close()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore.create(tmp_path / "ledger.db")
    yield store
    store.close()


@pytest.fixture
def memory_store() -> Iterator[MemoryStore]:
    """A new run kept in this process's memory (the backend for fast tests)."""
    store = MemoryStore.create(f"t-{uuid.uuid4().hex[:12]}")
    yield store
    forget_all()


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def store(request: pytest.FixtureRequest) -> Store:
    """An empty run on each backend: the contract holds for all (SC-6)."""
    found: Store = request.getfixturevalue(
        f"{request.param.replace('postgres', 'pg')}_store"
    )
    return found


# -- helpers: what differs between the backends, in one place --------------------


def reopen(store: Store, *, writable: bool) -> Store:
    if isinstance(store, SQLiteStore):
        return SQLiteStore.open(store.path, writable=writable)
    if isinstance(store, MemoryStore):
        return MemoryStore.open(store.name, writable=writable)
    return PostgresStore.open(store.url, writable=writable)


def schema_version(store: Store) -> int:
    """The schema version this rollout-ledger writes on the store's backend."""
    if isinstance(store, SQLiteStore):
        return SCHEMA_VERSION
    if isinstance(store, MemoryStore):
        return 1  # a memory run is as new as its process
    return PG_SCHEMA_VERSION


def open_missing(store: Store) -> Store:
    if isinstance(store, SQLiteStore):
        return SQLiteStore.open(store.path.with_name("missing.db"), writable=False)
    if isinstance(store, MemoryStore):
        return MemoryStore.open("missing-run", writable=False)
    return PostgresStore.open(store.url.with_run("missing-run"), writable=False)


def flip(value: bytes | str) -> bytes | str:
    if isinstance(value, bytes):
        return bytes([value[0] ^ 1]) + value[1:]
    return chr(ord(value[0]) ^ 1) + value[1:]


def tamper(store: Store, seq: int, column: str) -> None:
    """Flip one byte of a stored column, behind the store's back."""
    if isinstance(store, MemoryStore):
        row = store.run.events[seq - 1]
        store.run.events[seq - 1] = row._replace(**{column: flip(getattr(row, column))})
        return
    if isinstance(store, SQLiteStore):
        with closing(sqlite3.connect(store.path, isolation_level=None)) as conn:
            (value,) = conn.execute(
                f"SELECT {column} FROM events WHERE seq = ?", (seq,)
            ).fetchone()
            conn.execute(
                f"UPDATE events SET {column} = ? WHERE seq = ?", (flip(value), seq)
            )
        return
    with psycopg.connect(store.url.conninfo, autocommit=True) as conn:
        found = conn.execute(
            f"SELECT {column} FROM {SCHEMA}.events WHERE run = %s AND seq = %s",
            (store.run, seq),
        ).fetchone()
        assert found is not None
        conn.execute(
            f"UPDATE {SCHEMA}.events SET {column} = %s WHERE run = %s AND seq = %s",
            (flip(found[0]), store.run, seq),
        )


@contextmanager
def failing_insert(store: Store, seq: int) -> Iterator[None]:
    """A trigger that makes the insert of event ``seq`` fail inside its transaction."""
    if isinstance(store, MemoryStore):
        store.run.fail_at = seq
        try:
            yield
        finally:
            store.run.fail_at = None
        return
    if isinstance(store, SQLiteStore):
        with closing(sqlite3.connect(store.path, isolation_level=None)) as conn:
            conn.execute(
                f"CREATE TRIGGER fail BEFORE INSERT ON events WHEN NEW.seq = {seq} "
                "BEGIN SELECT RAISE(ABORT, 'injected'); END"
            )
            yield
            conn.execute("DROP TRIGGER fail")
        return
    name = f"fail_{store.run.replace('-', '_')}"
    with psycopg.connect(store.url.conninfo, autocommit=True) as conn:
        conn.execute(
            f"CREATE FUNCTION public.{name}() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN IF NEW.run = '{store.run}' AND NEW.seq = {seq} THEN "
            "RAISE EXCEPTION 'injected'; END IF; RETURN NEW; END $$"
        )
        conn.execute(
            f"CREATE TRIGGER {name} BEFORE INSERT ON {SCHEMA}.events "
            f"FOR EACH ROW EXECUTE FUNCTION public.{name}()"
        )
        try:
            yield
        finally:
            conn.execute(f"DROP TRIGGER {name} ON {SCHEMA}.events")
            conn.execute(f"DROP FUNCTION public.{name}()")


def transactions_of(store: Store, append: Callable[[], object]) -> int:
    """How many transactions ``append`` committed its events in."""
    if isinstance(store, MemoryStore):
        before = store.run.commits
        append()
        return store.run.commits - before
    if isinstance(store, SQLiteStore):
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        append()
        store._conn.set_trace_callback(None)
        return statements.count("COMMIT")
    before = store.head()[0]
    append()
    # xmin is the id of the transaction that wrote a row version.
    with psycopg.connect(store.url.conninfo) as conn:
        found = conn.execute(
            f"SELECT count(DISTINCT x) FROM (SELECT xmin::text AS x FROM "
            f"{SCHEMA}.events WHERE run = %s AND seq > %s UNION ALL SELECT "
            f"xmin::text FROM {SCHEMA}.runs WHERE run = %s) AS t",
            (store.run, before, store.run),
        ).fetchone()
    assert found is not None
    return int(found[0])


def new(body: Event, *, actor: str = "collector") -> NewEvent:
    return NewEvent(kind_of(body), AT, actor, encode_body(body))


def approvals(count: int, *, start: int = 0) -> list[NewEvent]:
    return [
        new(RerunApproved(task=0, rollout=0, attempt=i, reason="r"))
        for i in range(start, start + count)
    ]


# -- EV-11: appends ---------------------------------------------------------------


def test_ev_11_append_returns_the_chained_rows_and_moves_the_head(
    store: Store,
) -> None:
    assert store.head() == (0, ZERO_HASH)
    batch = approvals(3)
    rows = store.append_many(batch)
    prev = ZERO_HASH
    for seq, (row, event) in enumerate(zip(rows, batch, strict=True), 1):
        assert row[:5] == (seq, *event)
        assert row.prev_hash == prev
        assert row.hash == chain_hash(prev, seq, *event)
        prev = row.hash
    assert store.head() == (3, prev)
    assert store.hash_at(2) == rows[1].hash


def test_ev_11_seq_is_gap_free_and_chained_across_appends(store: Store) -> None:
    for size in (1, 4, 2):
        store.append_many(approvals(size))
    stored = list(store.rows())
    assert [row.seq for row in stored] == list(range(1, 8))
    assert first_chain_break(stored) is None
    assert store.head() == (7, stored[-1].hash)


def test_ev_11_stale_expected_seq_raises_and_writes_nothing(store: Store) -> None:
    store.append_many(approvals(2))
    before = store.head()
    with pytest.raises(ConcurrencyConflict) as caught:
        store.append_many(approvals(2), expected_seq=1)
    assert (caught.value.expected_seq, caught.value.actual_seq) == (1, 2)
    assert store.head() == before
    assert len(list(store.rows())) == 2
    store.append_many(approvals(1), expected_seq=2)  # the current head is accepted
    assert store.head()[0] == 3


def test_ev_11_group_commit_is_one_transaction(store: Store) -> None:
    store.append_many(approvals(1))
    assert transactions_of(store, lambda: store.append_many(approvals(500))) == 1
    assert store.head()[0] == 501


def test_ev_11_a_failed_group_commit_leaves_nothing(store: Store) -> None:
    store.append_many(approvals(1))
    with failing_insert(store, seq=4), pytest.raises(LedgerError, match="injected"):
        store.append_many(approvals(5))
    assert store.head()[0] == 1
    assert [row.seq for row in store.append_many(approvals(2))] == [2, 3]
    assert first_chain_break(store.rows()) is None


# -- EV-12: opening again ---------------------------------------------------------


def test_ev_12_reopening_reads_the_same_log_and_a_reader_cannot_append(
    store: Store,
) -> None:
    store.append_many(approvals(3))
    with closing(reopen(store, writable=False)) as reader:
        assert list(reader.rows()) == list(store.rows())
        assert reader.head() == store.head()
        assert reader.writable is False
        with pytest.raises(LedgerError, match="read-only"):
            reader.append_many(approvals(1))
    store.close()
    with closing(reopen(store, writable=True)) as writer:
        assert writer.check_schema() == schema_version(store)
        assert [row.seq for row in writer.append_many(approvals(1))] == [4]
        assert first_chain_break(writer.rows()) is None


def test_ev_12_opening_a_run_that_does_not_exist_is_corrupt_ledger(
    store: Store,
) -> None:
    with pytest.raises(CorruptLedger, match="create"):
        open_missing(store)


# -- EV-13: streamed reads --------------------------------------------------------


def test_ev_13_reads_stream_from_a_seq_while_appends_commit(store: Store) -> None:
    if isinstance(store, PostgresStore):
        store.read_batch = 100  # many pages; SQLite reads 1024 rows per batch
    store.append_many(approvals(1100))
    assert [row.seq for row in store.rows(1096)] == list(range(1096, 1101))
    reading = store.rows(5)
    assert next(reading).seq == 5
    # An append made while a read is open commits at once (EV-11), not when the
    # read ends: another connection sees it.
    store.append_many(approvals(1))
    with closing(reopen(store, writable=False)) as other:
        assert other.head()[0] == 1101
    rest = [row.seq for row in reading]
    assert rest[: 1100 - 5] == list(range(6, 1101))
    assert list(store.rows(2000)) == []


def test_ev_13_kinds_filter_reads_only_those_kinds_in_seq_order(store: Store) -> None:
    mixed = [
        new(RerunApproved(task=0, rollout=0, attempt=1, reason="r")),
        new(ResumeStarted(config_digest="c", counts={"a": 1})),
        new(AttemptsReleased(dispatch=((0, 0, 1),))),
        new(ResumeStarted(config_digest="d", counts={})),
        new(RerunApproved(task=0, rollout=1, attempt=1, reason="r")),
    ]
    store.append_many(mixed)
    assert [r.seq for r in store.rows(kinds=["resume_started"])] == [2, 4]
    picked = store.rows(2, kinds=["rerun_approved", "attempts_released"])
    assert [(r.seq, r.kind) for r in picked] == [
        (3, "attempts_released"),
        (5, "rerun_approved"),
    ]
    assert list(store.rows(kinds=["run_created"])) == []
    assert store.distinct_kinds() == {
        "rerun_approved",
        "resume_started",
        "attempts_released",
    }


def test_ev_13_last_rows_are_the_newest_oldest_first(store: Store) -> None:
    assert store.last_rows(2) == []
    stored = store.append_many(approvals(5))
    assert store.last_rows(2) == stored[3:]
    assert store.last_rows(9) == stored


# -- EV-2: the hash chain -----------------------------------------------------------


@pytest.mark.parametrize("column", ["body", "prev_hash", "hash", "kind", "at", "actor"])
def test_ev_2_a_flipped_byte_breaks_the_chain_at_its_seq(
    store: Store, column: str
) -> None:
    store.append_many(approvals(5))
    assert first_chain_break(store.rows()) is None
    tamper(store, 3, column)
    broken = first_chain_break(store.rows())
    assert broken is not None
    assert broken.seq == 3


_ONE_OF_EACH = st.tuples(*(event_of(t) for t in EVENT_TYPES))


@settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bodies=_ONE_OF_EACH)
def test_ev_2_every_kind_round_trips_through_the_store(
    store: Store, bodies: tuple[Event, ...]
) -> None:
    batch = [_reservable(store, body) for body in bodies]
    stored = store.append_many([new(body) for body in batch])
    read = list(store.rows(stored[0].seq))
    assert read == stored
    for row, body in zip(read, batch, strict=True):
        assert decode_body(row.body) == body
        assert decode_row(row).body == body
        assert row.kind == kind_of(body)


_ATTEMPTS = itertools.count()


def _reservable(store: Store, body: Event) -> Event:
    # SC-3 holds on PostgreSQL: a reservation names a new, released attempt.
    if isinstance(body, AttemptReserved) and isinstance(store, PostgresStore):
        attempt = next(_ATTEMPTS)
        store.append_many([new(AttemptsReleased(dispatch=((0, 0, attempt),)))])
        return msgspec.structs.replace(body, task=0, rollout=0, attempt=attempt)
    return body


# -- EV-14: snapshots -----------------------------------------------------------------


def test_ev_14_snapshots_are_stored_per_code_version_and_policy(store: Store) -> None:
    rows = store.append_many(approvals(3))
    assert store.load_snapshot("v1", "p") is None
    store.save_snapshot(2, rows[1].hash, "v1", "p", b"state-2")
    store.save_snapshot(3, rows[2].hash, "v2", "p", b"state-3")
    assert store.load_snapshot("v1", "p") == (2, rows[1].hash, b"state-2")
    store.save_snapshot(3, rows[2].hash, "v1", "p", b"state-3b")  # replaces
    assert store.load_snapshot("v1", "p") == (3, rows[2].hash, b"state-3b")
    assert store.load_snapshot("v1", "other") is None
    assert store.hash_at(9) is None


# -- SC-5: the same bytes on both backends --------------------------------------------


def test_sc_5_the_same_events_give_the_same_rows_and_head_on_both_backends(
    sqlite_store: SQLiteStore, pg_store: PostgresStore
) -> None:
    batches = [approvals(2), [new(ResumeStarted(config_digest="c", counts={}))]]
    batches.append(approvals(3, start=2))
    for batch in batches:
        sqlite_store.append_many(batch)
        pg_store.append_many(batch)
    assert list(pg_store.rows()) == list(sqlite_store.rows())
    assert pg_store.head() == sqlite_store.head()
    assert pg_store.head()[0] == 6


# -- PostgreSQL only: schema (SC-1) ----------------------------------------------------


def test_sc_1_one_schema_holds_every_run_with_named_migrations(
    pg_admin: psycopg.Connection[Any], pg_store: PostgresStore
) -> None:
    names = [
        row[0]
        for row in pg_admin.execute(f"SELECT name FROM {SCHEMA}.migrations ORDER BY 1")
    ]
    assert names == [name for name, _ in MIGRATIONS]
    meta = dict(pg_admin.execute(f"SELECT key, value FROM {SCHEMA}.meta").fetchall())
    assert meta["schema_version"] == str(PG_SCHEMA_VERSION)
    columns = pg_admin.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name = 'events' ORDER BY ordinal_position",
        (SCHEMA,),
    ).fetchall()
    assert [name for name, _ in columns] == [
        "run", "seq", "kind", "at", "actor", "body", "prev_hash", "hash",
    ]  # fmt: skip
    assert dict(columns)["body"] == "bytea"
    migrate(pg_admin)  # applying again is a no-op
    assert pg_store.check_schema() == PG_SCHEMA_VERSION


def test_sc_1_creating_a_run_twice_is_refused(pg_store: PostgresStore) -> None:
    with pytest.raises(LedgerError, match="exists already"):
        PostgresStore.create(pg_store.url)


# -- PostgreSQL only: rows with their events (SC-2) ------------------------------------


def test_sc_2_rows_are_stored_with_their_events(pg_store: PostgresStore) -> None:
    rows = [NewRow("out.jsonl", 0, b'{"a":1}\n'), None, NewRow("out.jsonl", 8, b"{}\n")]
    stored = pg_store.append_with_rows(approvals(3), rows)
    found = list(pg_store.row_bytes())
    assert [(r.seq, r.file, r.offset, r.data) for r in found] == [
        (stored[0].seq, "out.jsonl", 0, b'{"a":1}\n'),
        (stored[2].seq, "out.jsonl", 8, b"{}\n"),
    ]
    assert found[0].sha256 == hashlib.sha256(b'{"a":1}\n').hexdigest()
    assert list(pg_store.row_bytes(stored[1].seq)) == found[1:]
    # A stale expected_seq stores neither the events nor their rows.
    with pytest.raises(ConcurrencyConflict):
        pg_store.append_with_rows(approvals(1), [NewRow("f", 0, b"x")], expected_seq=0)
    assert list(pg_store.row_bytes()) == found
    with pytest.raises(LedgerError, match="one per event"):
        pg_store.append_with_rows(approvals(2), [None])


# -- PostgreSQL only: reservations (SC-3) ----------------------------------------------


def reserve(task: int, rollout: int, attempt: int) -> NewEvent:
    return new(AttemptReserved(task=task, rollout=rollout, attempt=attempt, run_id="r"))


def release(*attempts: tuple[int, int, int]) -> NewEvent:
    return new(AttemptsReleased(dispatch=attempts))


def test_sc_3_a_reservation_names_a_released_attempt_once(
    pg_store: PostgresStore,
) -> None:
    with pytest.raises(ConfigError, match="attempt 1 of task 0, rollout 2 is not"):
        pg_store.append_many([reserve(0, 2, 1)])
    assert pg_store.head()[0] == 0  # nothing written
    pg_store.append_many([release((0, 2, 1), (0, 3, 0))])
    pg_store.append_many([reserve(0, 2, 1)])
    with pytest.raises(ConfigError, match="attempt 1 of task 0, rollout 2 is already"):
        pg_store.append_many([reserve(0, 2, 1)])
    with pytest.raises(ConfigError, match="rollout 3 is already reserved"):
        pg_store.append_many([reserve(0, 3, 0), reserve(0, 3, 0)])
    # A release and its reservation may share one transaction.
    pg_store.append_many([release((1, 0, 0)), reserve(1, 0, 0), reserve(0, 3, 0)])
    assert pg_store.head()[0] == 5


def test_sc_3_a_release_holds_until_the_next_resume(pg_store: PostgresStore) -> None:
    pg_store.append_many([release((0, 0, 0), (0, 1, 0))])
    pg_store.append_many([new(ResumeStarted(config_digest="c", counts={}))])
    with pytest.raises(ConfigError, match="attempt 0 of task 0, rollout 0 is not"):
        pg_store.append_many([reserve(0, 0, 0)])
    pg_store.append_many([release((0, 0, 0))])
    pg_store.append_many([reserve(0, 0, 0)])
    with pytest.raises(ConfigError, match="rollout 1 is not released"):
        pg_store.append_many([release((0, 1, 0)), _resume(), reserve(0, 1, 0)])


def _resume() -> NewEvent:
    return new(ResumeStarted(config_digest="c", counts={}))


def _race(
    url: RunUrl, workers: int, work: Callable[[PostgresStore, int], None]
) -> None:
    """Run ``work`` on ``workers`` threads, each with its own connection, at once."""
    start = threading.Barrier(workers)
    failures: list[BaseException] = []

    def run(worker: int) -> None:
        try:
            with closing(PostgresStore.open(url, writable=True)) as mine:
                start.wait()
                work(mine, worker)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []


def test_sc_3_two_writers_never_reserve_the_same_attempt(
    pg_store: PostgresStore,
) -> None:
    attempts = [(0, rollout, 0) for rollout in range(30)]
    pg_store.append_many([release(*attempts)])
    won: Counter[int] = Counter()
    refused: Counter[int] = Counter()

    def work(mine: PostgresStore, worker: int) -> None:
        for task, rollout, attempt in attempts:
            try:
                mine.append_many([reserve(task, rollout, attempt)])
                won[worker] += 1
            except ConfigError as exc:
                refused[worker] += "is already reserved" in str(exc)

    _race(pg_store.url, 2, work)
    assert sum(won.values()) == len(attempts)
    assert sum(refused.values()) == len(attempts)
    reserved = Counter(
        (body.task, body.rollout, body.attempt)
        for row in pg_store.rows(kinds=["attempt_reserved"])
        if isinstance(body := decode_body(row.body), AttemptReserved)
    )
    assert reserved == Counter(attempts)
    assert first_chain_break(pg_store.rows()) is None


def test_sc_3_appends_from_many_connections_stay_gap_free_and_chained(
    pg_store: PostgresStore,
) -> None:
    def work(mine: PostgresStore, worker: int) -> None:
        for _ in range(20):
            mine.append_many(approvals(3, start=worker))

    _race(pg_store.url, 3, work)
    stored = list(pg_store.rows())
    assert [row.seq for row in stored] == list(range(1, 181))
    assert first_chain_break(stored) is None


# -- PostgreSQL only: the run lock (SC-4) ----------------------------------------------

_HOLDER = """
import sys, time
from tests.internals import PostgresStore
store = PostgresStore.open(sys.argv[1], writable=True)
store.acquire_run_lock()
print("locked", flush=True)
time.sleep(120)
"""


def _try_lock(url: RunUrl) -> None:
    with closing(PostgresStore.open(url, writable=True)) as other:
        other.acquire_run_lock().release()


@pytest.mark.slow
def test_sc_4_a_second_coordinator_gets_lock_held_until_the_holder_dies(
    pg_store: PostgresStore,
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(pg_store.url)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],  # where ``tests`` imports from
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(LockHeld) as caught:
            pg_store.acquire_run_lock()
        assert f"pid {holder.pid} on host {socket.gethostname()}" in str(caught.value)
        assert caught.value.holder is not None
        holder.kill()  # SIGKILL: no release, the server ends the session
        holder.wait()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    deadline = time.monotonic() + 15
    while True:
        try:
            lock = pg_store.acquire_run_lock()
            break
        except LockHeld:
            assert time.monotonic() < deadline, "the killed holder's lock stayed"
            time.sleep(0.1)
    lock.release()


def test_sc_4_the_run_lock_excludes_other_sessions_and_does_not_nest(
    pg_store: PostgresStore,
) -> None:
    with pg_store.acquire_run_lock() as lock:
        with pytest.raises(LockHeld, match="do not nest"):
            pg_store.acquire_run_lock()
        with pytest.raises(LockHeld, match=f"pid {os.getpid()} on host"):
            _try_lock(pg_store.url)
    assert not lock.held
    _try_lock(pg_store.url)  # released: another session takes it
    with (
        closing(PostgresStore.open(pg_store.url, writable=False)) as reader,
        pytest.raises(LedgerError, match="read-only"),
    ):
        reader.acquire_run_lock()
    _try_lock(pg_store.url)  # the reader's failed attempt left nothing held
    # Another run's lock is another lock.
    other = pg_store.url.with_run(pg_store.run + "-other")
    with (
        pg_store.acquire_run_lock(),
        closing(psycopg.connect(other.conninfo, autocommit=True)) as conn,
    ):
        acquire_run_lock(conn, other.run).release()


# -- SC-1: run URLs (no server needed) -------------------------------------------------

SECRET = "Zq9-s3cr3t-Pa55"


@pytest.mark.parametrize(
    ("url", "conninfo", "run"),
    [
        (
            "postgresql://postgres@127.0.0.1:5432/test?run=r1",
            "postgresql://postgres@127.0.0.1:5432/test",
            "r1",
        ),
        ("postgres://u@db.example:6543/ledgers?run=a.b-c_d", None, "a.b-c_d"),
        (
            "postgresql://u@h/db?sslmode=require&run=r",
            "postgresql://u@h/db?sslmode=require",
            "r",
        ),
        ("postgresql:///db?run=r", "postgresql:///db", "r"),
    ],
)
def test_sc_1_a_run_url_parses_into_conninfo_and_run(
    url: str, conninfo: str | None, run: str
) -> None:
    parsed = RunUrl.parse(url)
    assert parsed.run == run
    if conninfo is not None:
        assert parsed.conninfo == conninfo
    assert RunUrl.parse(str(parsed)) == parsed


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://u@h:5432/db", "names no run"),
        ("postgresql://u@h:5432/?run=r", "names no database"),
        ("postgresql://u@h:5432/db?run=a&run=b", "more than one run"),
        ("postgresql://u@h:5432/db?run=../x", "is not a run name"),
        ("postgresql://u@h:5432/db?run=", "is not a run name"),
        ("postgresql://u@h:port/db?run=r", "not a valid URL"),
        ("mysql://u@h/db?run=r", "not a postgresql:// URL"),
        ("postgresql://u@h/db?run=r#frag", "fragment"),
    ],
)
def test_sc_1_a_bad_run_url_is_a_config_error(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RunUrl.parse(url)


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://postgres:{SECRET}@127.0.0.1:5432/test?run=r",
        f"postgresql://postgres:{SECRET}@127.0.0.1:5432/test",
        f"postgresql://postgres@127.0.0.1/test?password={SECRET}&run=r",
        f"postgresql://postgres@127.0.0.1/test?run=r&sslpassword={SECRET}",
        f"postgresql://postgres:{SECRET}@127.0.0.1:notaport/test?run=r",
        f"postgresql://postgres:{SECRET}/x@127.0.0.1/test?run=r",
        f"postgresql://postgres:5432/{SECRET}@127.0.0.1/test?run=r",
        "postgresql://postgres:@127.0.0.1/test?run=r",
    ],
)
def test_sc_1_a_password_in_the_url_is_refused_and_never_shown(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RunUrl.parse(url)
    shown: list[BaseException | None] = [caught.value]
    while shown[-1] is not None:
        error = shown[-1]
        assert SECRET not in str(error)
        assert SECRET not in repr(error.args)
        shown.append(error.__cause__ or error.__context__)
    assert "PGPASSWORD" in str(caught.value) or "not a valid URL" in str(caught.value)
    with pytest.raises(ConfigError) as from_env:
        resolve_run("r", environ={STORE_ENV: url})
    assert SECRET not in str(from_env.value)


def test_sc_1_a_run_name_resolves_through_rollout_ledger_store() -> None:
    store = "postgresql://postgres@127.0.0.1:5432/test"
    assert resolve_run("r2", environ={STORE_ENV: store}) == RunUrl(store, "r2")
    assert resolve_run("r2", environ={STORE_ENV: store + "?run=other"}).run == "r2"
    given_url = "postgresql://u@h/db?run=x"
    assert resolve_run(given_url, environ={}) == RunUrl.parse(given_url)
    with pytest.raises(ConfigError, match=f"{STORE_ENV} is not set"):
        resolve_run("r2", environ={})
    with pytest.raises(ConfigError, match="does not hold a postgresql"):
        resolve_run("r2", environ={STORE_ENV: "/tmp/somewhere"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("postgresql://u@h/db?run=r", True),
        ("POSTGRES://u@h/db?run=r", True),
        ("rollouts.jsonl", False),
        ("/data/postgresql/rollouts.jsonl", False),
        (Path("postgresql://u@h/db?run=r"), False),
    ],
)
def test_sc_1_is_run_url_tells_urls_from_paths(
    text: str | Path, expected: bool
) -> None:
    assert is_postgres_url(text) is expected


# -- SC-6: no server -------------------------------------------------------------------


def test_sc_6_without_a_server_the_tests_fail_in_ci_and_skip_elsewhere() -> None:
    nowhere = "postgresql://postgres@127.0.0.1:1/test"
    with pytest.raises(pytest.fail.Exception, match="no PostgreSQL server answers"):
        require_server(nowhere, environ={"CI": "true"})
    with pytest.raises(pytest.skip.Exception, match=PG_ENV):
        require_server(nowhere, environ={})
