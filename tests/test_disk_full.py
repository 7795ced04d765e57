"""Disk full on a real small filesystem: nothing half-made, no traceback (issue 18).

Each test runs on a tmpfs of a few hundred KiB (``tests/small_disk.py``; root
only, else skipped with the reason). The disk is filled at the moment that
matters, by a ballast file written from a hook on the step just before it
(after the new database's events are appended, so the checkpoint that follows
finds no room; or before a row, or before the lock file's holder line). Each
asserts the exit code, a plain message naming the path, nothing half-made left
behind, and that the same command succeeds once space is freed, after which
``verify`` passes.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli import main
from ledger import Ledger, RunLock, StorageError
from projections import verify
from tests.conftest import input_rows
from tests.internals import FileSink, SQLiteStore
from tests.small_disk import fill, free, small_disk
from tests.test_cli_support import ACTOR, CliRun, graded, read_jsonl, write_jsonl
from tests.test_legacy_import import lines, make_run, result

KIB = 2048


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_disk(tmp_path, KIB) as mount:
        yield mount


def fill_after_first_append(monkeypatch: pytest.MonkeyPatch, disk: Path) -> list[int]:
    """The disk fills right after the first ``append_many`` of the process returns."""
    append = SQLiteStore.append_many
    calls: list[int] = []

    def then_full(self: SQLiteStore, *args: Any, **kwargs: Any) -> Any:
        rows = append(self, *args, **kwargs)
        if not calls:
            fill(disk)
        calls.append(len(rows))
        return rows

    monkeypatch.setattr(SQLiteStore, "append_many", then_full)
    return calls


def made(folder: Path) -> Path:
    folder.mkdir(parents=True)
    return folder


def invoke(run: CliRun, *args: object) -> Result:
    """As a user runs it: errors are not re-raised, exit codes are kept."""
    return CliRunner().invoke(
        main, [str(a) for a in args], obj={"clock": run.clock, "actor": ACTOR}
    )


def assert_plain_full_disk(result: Result, path: Path) -> None:
    output = result.stdout + result.stderr
    assert result.exit_code == 5, output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in output
    assert str(path) in result.stderr
    assert "no space left on device" in result.stderr.lower()


def leftovers(folder: Path) -> list[str]:
    return sorted(
        p.name
        for p in folder.rglob("ledger.db*")
        if p.name != "ledger.db" or p.exists()
    )


def verified(out: Path) -> list[object]:
    with Ledger.open(out) as led:
        return list(verify(led))


def test_ev_10_create_on_a_disk_that_fills_before_its_checkpoint(
    disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CLI-2, EV-10: the half-made database is removed; the rerun creates the run."""
    run = CliRun(made(disk / "run"))
    calls = fill_after_first_append(monkeypatch, disk)
    failed = invoke(run, "create", run.out, "--inputs", run.inputs, *run.config_args())
    assert calls == [1]  # run_created was appended, then the disk was full
    assert_plain_full_disk(failed, run.ledger_dir / "ledger.db")
    assert leftovers(run.ledger_dir) == []  # no ledger.db, .creating, -wal, -shm
    monkeypatch.undo()
    free(disk)
    run.create()
    assert verified(run.out) == []


def test_rec_70_import_on_a_disk_that_fills_before_its_checkpoint(
    disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """REC-70: an import stopped by a full disk leaves no ledger; the rerun imports."""
    rows = input_rows(4, 2)
    out = make_run(
        disk / "run",
        out=lines(*(result(r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows)),
        inputs=rows,
    )
    db = out.parent / "rollouts_ledger" / "ledger.db"
    calls = fill_after_first_append(monkeypatch, disk)
    failed = CliRunner().invoke(main, ["import", str(out)])
    assert len(calls) == 1
    assert_plain_full_disk(failed, db)
    assert leftovers(db.parent) == []
    monkeypatch.undo()
    free(disk)
    again = CliRunner().invoke(main, ["import", str(out)])
    assert again.exit_code == 0, again.output
    assert [f for f in verified(out) if f.check != "published"] == []  # type: ignore[attr-defined]


def test_sc_5_export_files_on_a_disk_that_fills_never_leaves_a_copy(
    tmp_path: Path, disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SC-5: export --files exits 5 and removes what it wrote; rerun copies it."""
    source = CliRun(made(tmp_path / "source"))
    source.create()
    _, plan = source.resume()
    source.record([{**row, **graded()} for row in plan[:3]])
    copy = disk / "copy"
    calls = fill_after_first_append(monkeypatch, disk)
    failed = invoke(source, "export", source.out, "--files", copy)
    assert len(calls) == 1
    assert_plain_full_disk(failed, copy / "rollouts_ledger" / "ledger.db")
    assert not [p for p in copy.rglob("*") if p.is_file()]  # nothing half-made
    monkeypatch.undo()
    free(disk)
    again = invoke(source, "export", source.out, "--files", copy)
    assert again.exit_code == 0, again.output
    assert verified(copy / source.out.name) == []
    assert read_jsonl(copy / source.out.name) == read_jsonl(source.out)


def test_ev_40_a_full_disk_writing_the_lock_holder_is_a_plain_error(
    disk: Path,
) -> None:
    """EV-40: the lock file's holder line cannot be written: exit 5, named, no trace.

    Another connection keeps ``ledger.db``'s WAL and shared memory, so opening
    the run needs no new block; the new lock file's line does.
    """
    run = CliRun(made(disk / "run"))
    run.create()
    lock = run.ledger_dir / "run.lock"
    lock.unlink()  # a new lock file needs a block of its own
    held = sqlite3.connect(run.ledger_dir / "ledger.db")
    try:
        held.execute("SELECT count(*) FROM events").fetchone()
        fill(disk)
        failed = invoke(run, "resume", run.out, *run.config_args())
    finally:
        held.close()
    assert_plain_full_disk(failed, lock)
    free(disk)
    run.resume()
    assert verified(run.out) == []


def test_ev_12_a_reader_on_a_full_disk_says_so(disk: Path) -> None:
    """R-5: SQLite's I/O error on a full disk is named as such, exit 5, not corrupt."""
    run = CliRun(made(disk / "run"))
    run.create()
    fill(disk)  # opening needs a block for the WAL's shared memory
    failed = invoke(run, "status", run.out)
    free(disk)
    if failed.exit_code == 0:
        pytest.skip("this SQLite opens the run without a new block; nothing to name")
    assert_plain_full_disk(failed, run.ledger_dir / "ledger.db")
    assert "corrupt" not in failed.stderr


def record_on_a_full_disk(run: CliRun, disk: Path, row: dict[str, Any]) -> None:
    """Reserve, fill the disk, record: the row's flush fails, then the close."""
    with RunLock(run.out) as lock, Ledger.open(run.out, lock=lock) as led:
        led.reserve(dict(row))
        fill(disk)
        with pytest.raises(StorageError) as writing:
            led.record(dict(row))
        assert str(run.out) in str(writing.value)
        assert "no space left on device" in str(writing.value)


def test_ev_12_a_full_disk_writing_and_closing_a_collector_file(disk: Path) -> None:
    """EV-12: the row cannot be flushed, nor the file closed: StorageError naming OUT.

    The reservation is in the log; once space is freed, the next writer's
    open finds nothing (or a torn line it cuts), and the row is recorded once.
    """
    run = CliRun(made(disk / "run"))
    run.create()
    _, plan = run.resume()
    row = {**plan[0], **graded()}
    with pytest.raises(StorageError) as raised:
        record_on_a_full_disk(run, disk, row)
    # Closing flushes what the failed write left buffered: still no room.
    assert str(run.out) in str(raised.value)
    assert "no space left on device" in str(raised.value)
    free(disk)
    with RunLock(run.out) as lock, Ledger.open(run.out, lock=lock) as led:
        led.record(dict(row))
        assert list(verify(led)) == []
    assert len(read_jsonl(run.out)) == 1


def test_cli_5_record_on_a_disk_that_fills_before_its_rows(
    disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CLI-5, EV-12: the rows find no room: exit 5 naming OUT; the rerun records all.

    Each row is reserved and recorded in one transaction after the rows are
    written, so a disk full at the rows leaves nothing reserved and nothing
    stuck: ``record`` run again once space is freed records each row once.
    """
    run = CliRun(made(disk / "run"))
    run.create()
    _, plan = run.resume()
    rows = [{**row, **graded()} for row in plan[:3]]
    path = write_jsonl(run.folder / "outcomes.jsonl", rows)
    write = FileSink._write_durably
    calls: list[str] = []

    def then_full(self: FileSink, *args: Any, **kwargs: Any) -> Any:
        if not calls:
            fill(disk)
        calls.append("rows")
        return write(self, *args, **kwargs)

    monkeypatch.setattr(FileSink, "_write_durably", then_full)
    failed = invoke(run, "record", run.out, path)
    assert calls  # the disk filled as the rows were about to be written
    assert_plain_full_disk(failed, run.out)
    monkeypatch.undo()
    free(disk)
    with Ledger.open(run.out) as led:
        assert [e.kind for e in led.events() if e.actor == "collector"] == []
    again = invoke(run, "record", run.out, path)
    assert again.exit_code == 0, again.output
    assert verified(run.out) == []
    with Ledger.open(run.out) as led:
        kinds = [e.kind for e in led.events() if e.actor != "resume"]
    assert kinds.count("attempt_reserved") == 3
    assert kinds.count("result_saved") == 3
    assert len(read_jsonl(run.out)) == 3


def test_ev_10_create_on_a_disk_full_at_every_step_leaves_nothing(
    disk: Path,
) -> None:
    """CLI-2, EV-10: whatever step finds the disk full, no half-made ledger stays.

    The free space grows one block at a time from none until ``create``
    succeeds; each failure is exit 5 with a plain message naming a path of
    the run, leaves no ``ledger.db`` (nor ``.creating``, ``-wal``, ``-shm``),
    and the run can then be created.
    """
    failures = 0
    for blocks in range(64):
        folder = made(disk / f"run{blocks}")
        run = CliRun(folder)
        fill(disk, leave=blocks * 4096)
        done = invoke(
            run, "create", run.out, "--inputs", run.inputs, *run.config_args()
        )
        free(disk)
        if done.exit_code == 0:
            break
        failures += 1
        assert_plain_full_disk(done, folder)
        assert leftovers(folder) == []
        shutil.rmtree(folder)
    else:
        pytest.fail("create never found room in 64 blocks")
    assert failures > 3  # lock, inputs, schema and checkpoint each found no room
    assert verified(run.out) == []
