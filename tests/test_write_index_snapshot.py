"""EV-14 for the writer's bookkeeping: a stored write index, used only while it holds.

A writer's open folds releases, reservations, admissions and file ends from the
log (REC-3, EV-12). On a long log it stores that fold, and the next open folds
only the events after it. These tests lower the threshold so a small run
stores it, and check that the stored index is exact, ignored when stale or
damaged, and checked by ``verify``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledger import Ledger
from projections import replan, resume, verify
from tests.internals import (
    ENDS_VERSION,
    INDEX_CODE_VERSION,
    INDEX_KINDS,
    SQLiteStore,
    WriteIndex,
)
from tests.test_resume import Run


def _full_fold(out: Path) -> bytes:
    with Ledger.open(out) as led:
        return WriteIndex.build(led.events(1, kinds=INDEX_KINDS)).encode()


def _stored(out: Path) -> tuple[int, bytes] | None:
    with Ledger.open(out) as led:
        found = led.load_snapshot(INDEX_CODE_VERSION, "")
    return None if found is None else (found[0], found[2])


def _record_some(run: Run, count: int) -> None:
    with Ledger.open(run.out, lock=run.lock) as led:
        plan = resume(led, run.config, run.global_config).plan
        for row in plan.dispatch[:count]:
            led.reserve(row)
            led.record({**row, "reward": 1.0, "response": {"output": []}})


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    monkeypatch.setattr(Ledger, "index_snapshot_every", 3)
    made = Run(tmp_path)
    yield made  # type: ignore[misc]
    made.lock.release()


def _writer_reads_its_index(run: Run) -> None:
    # The writer's index is folded when first read (P-8), and stored then.
    with Ledger.open(run.out, lock=run.lock) as led:
        led.write_index()


def test_ev_14_a_writer_open_stores_the_exact_index_of_a_long_tail(run: Run) -> None:
    _record_some(run, 3)
    _damage(run.out, "DELETE FROM snapshots WHERE code_version = ?")
    with Ledger.open(run.out) as led:
        led.write_index()
    assert _stored(run.out) is None  # a reader never stores it
    _writer_reads_its_index(run)
    stored = _stored(run.out)
    assert stored is not None
    with Ledger.open(run.out) as led:
        assert stored[0] == max(e.seq for e in led.events(1, kinds=INDEX_KINDS))
    assert stored[1] == _full_fold(run.out)
    with Ledger.open(run.out) as led:
        assert verify(led) == []


def test_ev_14_the_next_open_folds_only_the_tail_and_agrees_with_a_full_fold(
    run: Run,
) -> None:
    _record_some(run, 2)
    _writer_reads_its_index(run)  # stores the index
    with Ledger.open(run.out, lock=run.lock) as led:
        plan = replan(led)
        for row in plan.dispatch[:2]:
            led.reserve(row)  # the index from the snapshot knows the release
            led.record({**row, "reward": 0.0, "response": {"output": []}})
        index = led.write_index()
        assert (
            index.encode()
            == WriteIndex.build(led.events(1, kinds=INDEX_KINDS)).encode()
        )


def _damage(out: Path, sql: str) -> None:
    db = out.parent / f"{out.stem}_ledger" / "ledger.db"
    with sqlite3.connect(db) as conn:
        conn.execute(sql, (INDEX_CODE_VERSION,))


def test_ev_14_a_damaged_stored_index_is_ignored_and_verify_names_it(
    run: Run,
) -> None:
    _record_some(run, 3)
    _writer_reads_its_index(run)
    # Valid msgpack of the wrong content: forget every reservation.
    with Ledger.open(run.out) as led:
        index = WriteIndex.decode(led.load_snapshot(INDEX_CODE_VERSION, "")[2])  # type: ignore[index]
    index.reserved.clear()
    db = run.out.parent / "rollouts_ledger" / "ledger.db"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE snapshots SET state = ? WHERE code_version = ?",
            (index.encode(), INDEX_CODE_VERSION),
        )
    with Ledger.open(run.out) as led:
        findings = verify(led)
    assert [f.check for f in findings] == ["snapshot"]
    assert "write index" in findings[0].message
    _damage(run.out, "UPDATE snapshots SET state = x'c1' WHERE code_version = ?")
    with Ledger.open(run.out, lock=run.lock) as led:  # undecodable: refolded
        assert led.write_index().encode() == _full_fold(run.out)


def test_ev_14_a_stored_index_whose_event_changed_is_not_used(run: Run) -> None:
    _record_some(run, 3)
    with Ledger.open(run.out, lock=run.lock):
        pass
    _damage(
        run.out,
        "UPDATE snapshots SET head_hash = zeroblob(32) WHERE code_version = ?",
    )
    with Ledger.open(run.out) as led:
        # not trusted: its event's hash is not the log's, so it folds from seq 1
        assert led.load_snapshot(INDEX_CODE_VERSION, "") is None
    with Ledger.open(run.out, lock=run.lock) as led:
        assert led.write_index().encode() == _full_fold(run.out)


def test_p_8_a_long_recording_keeps_its_file_ends_close_to_its_head(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The writer stores the file ends every 3 events it appends (the lowered
    # threshold), so an open after it folds a short tail, also after a kill.
    _record_some(run, 8)
    with Ledger.open(run.out) as led:
        head = led.head()[0]
        found = led.load_snapshot(ENDS_VERSION, "")
        assert found is not None
        assert head - found[0] < 3
        assert verify(led) == []  # what it stored is a refold's (EV-14)
    read: list[int] = []
    original = SQLiteStore.rows

    def counting(self: SQLiteStore, from_seq: int = 1, **kw: object) -> object:
        for row in original(self, from_seq, **kw):  # type: ignore[arg-type]
            read.append(row.seq)
            yield row

    monkeypatch.setattr(SQLiteStore, "rows", counting)
    with Ledger.open(run.out) as led:
        assert led.waiting() == ()
    assert all(seq > found[0] for seq in read)
    assert len(read) < 3
