"""EV-10..EV-14: the SQLite store, appends, concurrency, the hash chain and opens."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from ledger import (
    Clock,
    ConcurrencyConflict,
    ConfigError,
    CorruptLedger,
    Ledger,
    LedgerError,
    RunLock,
    UnknownEvent,
)
from ledger.events import ZERO_HASH, AttemptReserved, chain_hash
from tests.conftest import MinimalManifest, RunFactory, input_rows
from tests.internals import SCHEMA_VERSION


def reserved(attempt: int) -> AttemptReserved:
    return AttemptReserved(task=0, rollout=0, attempt=attempt, run_id="r")


def fill(led: Ledger, count: int) -> None:
    led.append_many([reserved(i) for i in range(count)])


def file_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- EV-10: schema, pragmas, migrations -----------------------------------------


def test_ev_10_database_has_the_events_table_wal_and_a_schema_version(
    make_run: RunFactory,
) -> None:
    led = make_run()
    conn = sqlite3.connect(led.paths.db)
    columns = [row[1:3] for row in conn.execute("PRAGMA table_info(events)")]
    assert columns == [
        ("seq", "INTEGER"), ("kind", "TEXT"), ("at", "TEXT"), ("actor", "TEXT"),
        ("body", "BLOB"), ("prev_hash", "BLOB"), ("hash", "BLOB"),
    ]  # fmt: skip
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    assert meta["schema_version"] == str(SCHEMA_VERSION)
    assert "package_version" in meta
    migrations = [row[0] for row in conn.execute("SELECT name FROM migrations")]
    assert migrations == ["0001_events_and_meta", "0002_snapshots"]
    assert led.journal_mode == "wal"
    conn.close()


def test_ev_10_journal_mode_delete_is_honoured(make_run: RunFactory) -> None:
    led = make_run(journal_mode="delete")
    assert led.journal_mode == "delete"


def test_ev_10_synchronous_full_on_every_connection(make_run: RunFactory) -> None:
    led = make_run()
    # 2 is FULL; EV-11's durability promise rests on it.
    assert led._store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2


# -- EV-11: appends ---------------------------------------------------------------


def test_ev_11_seq_is_gap_free_and_chained(make_run: RunFactory) -> None:
    led = make_run()
    fill(led, 5)
    led.append(reserved(9))
    events = list(led.events())
    assert [e.seq for e in events] == list(range(1, 8))
    prev = ZERO_HASH
    for event in events:
        assert event.prev_hash == prev
        prev = event.hash
    assert led.head() == (7, prev)


def test_ev_11_stale_expected_seq_raises_and_writes_nothing(
    make_run: RunFactory,
) -> None:
    led = make_run()
    fill(led, 2)
    before = led.head()
    with pytest.raises(ConcurrencyConflict) as caught:
        led.append_many([reserved(7), reserved(8)], expected_seq=before[0] - 1)
    assert caught.value.expected_seq == before[0] - 1
    assert caught.value.actual_seq == before[0]
    assert "nothing was written" in str(caught.value)
    assert led.head() == before
    led.append(reserved(7), expected_seq=before[0])  # the current head is accepted
    assert led.head()[0] == before[0] + 1


def test_ev_11_group_commit_is_one_transaction(make_run: RunFactory) -> None:
    led = make_run()
    statements: list[str] = []
    led._store._conn.set_trace_callback(statements.append)
    led.append_many([reserved(i) for i in range(1000)])
    led._store._conn.set_trace_callback(None)
    assert statements.count("BEGIN IMMEDIATE") == 1
    assert statements.count("COMMIT") == 1
    assert led.head()[0] == 1001


def test_ev_11_a_failed_group_commit_leaves_nothing(make_run: RunFactory) -> None:
    led = make_run()
    conn = sqlite3.connect(led.paths.db, isolation_level=None)
    # A trigger makes the 3rd insert of the batch fail inside the transaction.
    conn.execute(
        "CREATE TRIGGER fail_third BEFORE INSERT ON events WHEN NEW.seq = 4 "
        "BEGIN SELECT RAISE(ABORT, 'injected'); END"
    )
    conn.close()
    with pytest.raises(LedgerError, match="injected"):
        led.append_many([reserved(i) for i in range(5)])
    assert led.head()[0] == 1


def test_ev_11_a_reader_cannot_append(make_run: RunFactory) -> None:
    led = make_run()
    with (
        Ledger.open(led.paths.out) as reader,
        pytest.raises(LedgerError, match="read-only"),
    ):
        reader.append(reserved(0))


# -- EV-2: the hash chain -----------------------------------------------------------


def test_ev_2_hash_is_sha256_of_prev_hash_header_and_stored_body(
    make_run: RunFactory,
) -> None:
    led = make_run()
    event = led.append(reserved(3), actor="collector")
    row = next(led.raw_events(event.seq))
    header = b'[%d,"attempt_reserved","%s","collector"]\n' % (
        event.seq,
        event.at.encode(),
    )
    assert row.hash == hashlib.sha256(row.prev_hash + header + row.body).digest()
    assert row.hash == chain_hash(
        row.prev_hash, row.seq, row.kind, row.at, row.actor, row.body
    )


COLUMNS = ["kind", "at", "actor", "body", "prev_hash", "hash"]


def flip_byte(db: Path, seq: int, column: str, position: int) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    value = conn.execute(
        f"SELECT {column} FROM events WHERE seq = ?", (seq,)
    ).fetchone()[0]
    data = bytearray(value.encode() if isinstance(value, str) else value)
    data[position % len(data)] ^= 0x01
    new = data.decode("latin-1") if isinstance(value, str) else bytes(data)
    conn.execute(f"UPDATE events SET {column} = ? WHERE seq = ?", (new, seq))
    conn.close()


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize("seq", [1, 3, 6])
@pytest.mark.parametrize("position", [0, 5, -1])
def test_ev_2_verify_names_the_first_seq_after_a_flipped_byte(
    make_run: RunFactory, column: str, seq: int, position: int
) -> None:
    led = make_run()
    fill(led, 5)
    assert led.verify_chain() is None
    flip_byte(led.paths.db, seq, column, position)
    broken = led.verify_chain()
    assert broken is not None
    assert broken.seq == seq
    assert broken.reason


def test_ev_2_verify_names_a_deleted_event(make_run: RunFactory) -> None:
    led = make_run()
    fill(led, 5)
    conn = sqlite3.connect(led.paths.db, isolation_level=None)
    conn.execute("DELETE FROM events WHERE seq = 3")
    conn.close()
    broken = led.verify_chain()
    assert broken is not None
    assert broken.seq == 3


def test_ev_2_verify_names_a_renumbered_event(make_run: RunFactory) -> None:
    led = make_run()
    fill(led, 3)
    conn = sqlite3.connect(led.paths.db, isolation_level=None)
    conn.execute("UPDATE events SET seq = 9 WHERE seq = 4")
    conn.close()
    broken = led.verify_chain()
    assert broken is not None
    assert broken.seq == 4


# -- EV-12 / EV-3: what an open refuses ---------------------------------------------


def test_ev_12_open_of_a_newer_schema_is_corrupt_ledger(make_run: RunFactory) -> None:
    led = make_run()
    conn = sqlite3.connect(led.paths.db, isolation_level=None)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.close()
    with pytest.raises(CorruptLedger, match="schema version 99") as caught:
        Ledger.open(led.paths.out)
    assert caught.value.path == str(led.paths.db)


@pytest.mark.parametrize("writer", [False, True])
def test_ev_3_open_with_an_unknown_kind_raises_unknown_event_naming_seq_and_kind(
    tmp_path: Path, writer: bool
) -> None:
    out = tmp_path / "r.jsonl"
    rows = input_rows(1, 1)
    with RunLock(out) as lock:
        with Ledger.create(out, MinimalManifest(rows), rows, lock=lock) as led:
            fill(led, 2)
            prev = led.head()[1]
        conn = sqlite3.connect(led.paths.db, isolation_level=None)
        body = b'{"kind":"teleported"}'
        at = "2026-01-01T00:00:00.000000Z"
        digest = chain_hash(prev, 4, "teleported", at, "future", body)
        conn.execute(
            "INSERT INTO events VALUES (4, 'teleported', ?, 'future', ?, ?, ?)",
            (at, body, prev, digest),
        )
        conn.close()
        with pytest.raises(UnknownEvent) as caught:
            Ledger.open(out, lock=lock if writer else None)
    assert caught.value.seq == 4
    assert caught.value.kind == "teleported"
    assert "seq 4" in str(caught.value)
    assert "teleported" in str(caught.value)


def test_ev_12_writer_open_refuses_a_broken_head(make_run: RunFactory) -> None:
    led = make_run()
    fill(led, 3)
    flip_byte(led.paths.db, 4, "body", 3)
    with pytest.raises(CorruptLedger, match="seq 4") as caught:
        Ledger.open(led.paths.out)
    assert caught.value.seq == 4


def test_ev_12_open_of_a_missing_run_says_how_to_create_one(tmp_path: Path) -> None:
    # Nothing is there: a mistyped path, not corrupt saved work (issue 16).
    with pytest.raises(ConfigError, match=r"no run at .*rollout-ledger create"):
        Ledger.open(tmp_path / "nothing.jsonl")


def test_ev_12_open_of_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    db = tmp_path / "r_ledger" / "ledger.db"
    db.parent.mkdir()
    db.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(CorruptLedger, match="not an SQLite database"):
        Ledger.open(out)


def test_ev_12_a_reader_never_modifies_anything(make_run: RunFactory) -> None:
    led = make_run()
    fill(led, 3)
    led.close()
    folder = led.paths.folder
    before = file_bytes(folder)
    with Ledger.open(led.paths.out) as reader:
        assert len(list(reader.events())) == 4
        assert reader.verify_chain() is None
    after = file_bytes(folder)
    assert after["ledger.db"] == before["ledger.db"]
    assert {k: v for k, v in after.items() if not k.startswith("ledger.db")} == {
        k: v for k, v in before.items() if not k.startswith("ledger.db")
    }


def test_ev_40_opening_a_writer_needs_the_held_lock_of_this_run(
    make_run: RunFactory, tmp_path: Path
) -> None:
    led = make_run()
    other = RunLock(tmp_path / "other.jsonl")
    with other, pytest.raises(LedgerError, match="not for"):
        Ledger.open(led.paths.out, lock=other)
    with pytest.raises(LedgerError, match="not held"):
        Ledger.open(led.paths.out, lock=RunLock(led.paths.out))


# -- EV-13: streaming reads -------------------------------------------------------


def test_ev_13_events_stream_from_a_seq(make_run: RunFactory) -> None:
    led = make_run()
    fill(led, 3000)
    stream = led.events(2500)
    first = next(stream)
    assert first.seq == 2500
    assert sum(1 for _ in stream) == 3001 - 2500
    assert [e.seq for e in led.events(1, kinds=["run_created"])] == [1]


# -- create ---------------------------------------------------------------------------


def test_create_writes_materialized_inputs_and_run_created_with_its_index(
    make_run: RunFactory,
) -> None:
    led = make_run()
    created = led.run_created()
    data = led.paths.materialized.read_bytes()
    assert created.materialized_digest == hashlib.sha256(data).hexdigest()
    assert len(created.index) == 6
    task, rollout, offset, length, agent, rollout_id = created.index[1]
    assert (task, rollout, agent, rollout_id) == (0, 1, "simple_agent", None)
    assert b'"_ng_rollout_index":1' in data[offset : offset + length]
    assert led.paths.manifest.is_file()


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"_ng_task_index": 0}], "_ng_rollout_index"),
        ([{"_ng_task_index": 0, "_ng_rollout_index": -1}], "_ng_rollout_index"),
        ([{"_ng_task_index": True, "_ng_rollout_index": 0}], "_ng_task_index"),
        ([{"_ng_task_index": 0, "_ng_rollout_index": 0}] * 2, "share the key"),
        (
            [
                {"_ng_task_index": 0, "_ng_rollout_index": 0, "_ng_rollout_id": "x"},
                {"_ng_task_index": 0, "_ng_rollout_index": 1, "_ng_rollout_id": "x"},
            ],
            "share the _ng_rollout_id",
        ),
        (
            [{"_ng_task_index": 0, "_ng_rollout_index": 0, "_ng_rollout_id": "a-a1"}],
            "invalid",
        ),
    ],
)
def test_create_refuses_rows_without_keys_and_duplicates(
    tmp_path: Path, rows: list[dict[str, object]], message: str
) -> None:
    out = tmp_path / "r.jsonl"
    with RunLock(out) as lock, pytest.raises(LedgerError, match=message):
        Ledger.create(out, MinimalManifest(rows), rows, lock=lock)
    assert not (tmp_path / "r_ledger" / "ledger.db").exists()
    assert not (tmp_path / "r_materialized_inputs.jsonl").exists()


def test_create_refuses_an_existing_run(make_run: RunFactory, tmp_path: Path) -> None:
    led = make_run()
    led.close()
    rows = input_rows()
    assert led.lock is not None
    with pytest.raises(LedgerError, match="rollout-ledger resume"):
        Ledger.create(led.paths.out, MinimalManifest(rows), rows, lock=led.lock)


def test_create_refuses_an_existing_collector_file(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    out.write_text('{"x": 1}\n')
    rows = input_rows()
    with RunLock(out) as lock, pytest.raises(LedgerError, match="import"):
        Ledger.create(out, MinimalManifest(rows), rows, lock=lock)
    assert out.read_text() == '{"x": 1}\n'


def test_ev_1_a_seeded_clock_makes_the_same_log_bytes(tmp_path: Path) -> None:
    def run(name: str) -> list[tuple[object, ...]]:
        out = tmp_path / name / "r.jsonl"
        rows = input_rows()
        with RunLock(out) as lock:
            led = Ledger.create(
                out, MinimalManifest(rows), rows, lock=lock, clock=Clock(seed=3)
            )
            fill(led, 4)
            led.close()
        with Ledger.open(out) as reader:
            return [tuple(row) for row in reader.raw_events()]

    assert run("a") == run("b")
