"""EV-12: a writer whose commit fails after its rows went out stops (issue 18).

Rows are written before their events; when the commit that follows fails (a
full disk), the writer must not append after rows that have no events: it
stops, and the next writer's open records them. A row of an attempt never
released still refuses the open, naming its line.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ledger import Ledger, RunLock, StorageError
from projections import verify
from tests.internals import FileSink, SQLiteStore
from tests.test_cli_support import (
    CliRun,
    by_key,
    cli_run,
    failed,
    graded,
    read_jsonl,
    templates,
    write_jsonl,
)

__all__ = ["cli_run", "templates"]


def kinds_by(out: Path, actor: str) -> Counter[str]:
    with Ledger.open(out) as led:
        return Counter(e.kind for e in led.events() if e.actor == actor)


def test_ev_12_a_row_of_an_attempt_never_released_still_refuses_the_open(
    cli_run: CliRun,
) -> None:
    _, plan = cli_run.resume()
    stray = {**plan[0], "_ng_attempt_index": 7, **graded()}
    with cli_run.out.open("a") as handle:
        handle.write(write_jsonl(cli_run.folder / "x.jsonl", [stray]).read_text())
    result = cli_run.invoke("status", cli_run.out, "--publish")
    assert result.exit_code == 3
    assert "line 1" in result.stderr
    assert (
        "not an outcome of an attempt released or reserved in this run" in result.stderr
    )


def test_ev_12_a_commit_that_fails_after_its_rows_stops_the_writer(
    cli_run: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, plan = cli_run.resume()
    append = SQLiteStore.append_many
    failing = [True]

    def full_disk(self: SQLiteStore, *args: Any, **kwargs: Any) -> Any:
        if failing[0]:
            failing[0] = False
            raise StorageError("database or disk is full", path=self.path)
        return append(self, *args, **kwargs)

    with RunLock(cli_run.out) as lock, Ledger.open(cli_run.out, lock=lock) as led:
        led.reserve(plan[0])
        monkeypatch.setattr(SQLiteStore, "append_many", full_disk)
        with pytest.raises(StorageError, match="disk is full"):
            led.record({**plan[0], **graded()})
        with pytest.raises(StorageError, match="open the run again"):
            led.reserve(plan[1])  # nothing after rows without their events
    with RunLock(cli_run.out) as lock, Ledger.open(cli_run.out, lock=lock) as led:
        assert verify(led) == []
    assert kinds_by(cli_run.out, "repair") == Counter({"result_saved": 1})


# -- record killed, or failing, between its reservations, rows and commit ------------

ROOT = Path(__file__).parents[1]
RECORD = "import sys\nfrom cli import main\nmain(sys.argv[1:])\n"

#: Where ``record`` dies (strace's fault injection counts each system call on
#: its own): before its first row is written, between the rows of ``OUT`` and
#: those of the sidecar, after every row is durable and before the commit of
#: their reservations and events (CLI-5: one transaction), while that commit is
#: synced, and while publishing afterwards. The last figure is how many
#: reservations the log then holds: none before the commit, all after it.
KILL_POINTS = [
    pytest.param("write", 1, (0, 0), 0, id="before any row"),
    pytest.param("fsync", 1, (2, 0), 0, id="OUT written, not synced"),
    pytest.param("write", 2, (2, 0), 0, id="OUT durable, sidecar not written"),
    pytest.param("fsync", 2, (2, 1), 0, id="sidecar written, not synced"),
    pytest.param("fdatasync", 1, (2, 1), 0, id="commit begun, the WAL restarted"),
    pytest.param("fdatasync", 3, (2, 1), 3, id="commit written, not synced"),
    pytest.param("write", 3, (2, 1), 3, id="committed, publishing"),
]


def lines_on_disk(cli_run: CliRun) -> tuple[int, int]:
    sidecar = cli_run.out.with_name("rollouts_failures.jsonl")
    return tuple(  # type: ignore[return-value]
        len(path.read_bytes().splitlines()) if path.exists() else 0
        for path in (cli_run.out, sidecar)
    )


def outcomes_of(cli_run: CliRun) -> tuple[list[dict[str, Any]], Path]:
    """A resumed run's plan answered: two results and a failure, in one file."""
    _, plan = cli_run.resume()
    rows = [
        {**plan[0], **graded()},
        {**plan[1], **failed("session_lost")},
        {**plan[2], **graded(0.5)},
    ]
    return rows, write_jsonl(cli_run.folder / "outcomes.jsonl", rows)


def assert_each_recorded_once(cli_run: CliRun, rows: list[dict[str, Any]]) -> None:
    """Every row's attempt has one reservation, one outcome and one line on disk."""
    keys = [(r["_ng_task_index"], r["_ng_rollout_index"], 0) for r in rows]
    with Ledger.open(cli_run.out) as led:
        assert verify(led) == []
        found: Counter[tuple[str, tuple[int, int, int]]] = Counter()
        for event in led.events():
            body = event.body
            if event.kind in ("attempt_reserved", *OUTCOME_KINDS):
                key = (body.task, body.rollout, body.attempt)  # type: ignore[union-attr]
                kind = "reserved" if event.kind == "attempt_reserved" else "outcome"
                found[kind, key] += 1
    assert found == Counter(
        {(kind, k): 1 for k in keys for kind in ("reserved", "outcome")}
    )
    assert len(read_jsonl(cli_run.out)) == 2
    assert len(read_jsonl(cli_run.out.with_name("rollouts_failures.jsonl"))) == 1


OUTCOME_KINDS = ("result_saved", "failure_saved", "omission_saved")


def killed_record(cli_run: CliRun, path: Path, syscall: str, when: int) -> None:
    killed = subprocess.run(
        [
            "strace", "-f", "-qq", "-o", "/dev/null", "-e", f"trace={syscall}",
            "-e", f"inject={syscall}:signal=KILL:when={when}",
            sys.executable, "-c", RECORD, "record", str(cli_run.out), str(path),
        ],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL or killed.returncode == 128 + 9, (
        killed.returncode,
        killed.stderr.decode(),
    )


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
@pytest.mark.parametrize(("syscall", "when", "written", "reserved"), KILL_POINTS)
def test_r_1_ev_12_a_record_killed_anywhere_is_completed_by_running_it_again(
    cli_run: CliRun,
    syscall: str,
    when: int,
    written: tuple[int, int],
    reserved: int,
) -> None:
    """R-1, EV-12, CLI-5: no kill leaves the run stuck, nor a row recorded twice.

    Each row is reserved and recorded in one transaction after the rows are
    written: killed before it, the rows on disk are of released attempts
    nobody reserved, which the next writer's open reserves and records once
    (actor ``repair``); ``record`` run again records the rest and skips what
    is recorded: every row once.
    """
    rows, path = outcomes_of(cli_run)
    killed_record(cli_run, path, syscall, when)
    assert lines_on_disk(cli_run) == written  # where it was killed
    with Ledger.open(cli_run.out) as led:  # a reader: nothing repaired yet
        held = [e for e in led.events() if e.kind == "attempt_reserved"]
    assert len(held) == reserved  # resume releases; record reserves, at its commit
    again = cli_run.invoke("record", cli_run.out, path)
    assert again.exit_code == 0, again.stderr
    assert_each_recorded_once(cli_run, rows)
    repaired = kinds_by(cli_run.out, "repair")
    if reserved or written == (0, 0):
        assert repaired == Counter()  # nothing on disk waited for its events
    else:  # the rows on disk were reserved and recorded by the open, once
        assert repaired["attempt_reserved"] == sum(written)


def test_cli_5_a_record_killed_before_its_rows_leaves_nothing_behind(
    cli_run: CliRun,
) -> None:
    """CLI-5: killed before any row, the next resume releases the same attempts."""
    rows, path = outcomes_of(cli_run)
    before = {
        (r["_ng_task_index"], r["_ng_rollout_index"], r["_ng_attempt_index"])
        for r in rows
    }
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    killed_record(cli_run, path, "write", 1)
    assert lines_on_disk(cli_run) == (0, 0)
    _, plan = cli_run.resume()
    again = {
        (r["_ng_task_index"], r["_ng_rollout_index"], r["_ng_attempt_index"])
        for r in plan
    }
    assert len(before) == 3
    assert before <= again  # the same attempts, none spent


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_r_1_ev_12_after_a_record_killed_past_its_rows_resume_recovers(
    cli_run: CliRun,
) -> None:
    """EV-12: a killed ``record``'s rows are reserved and recorded by ``resume``."""
    rows, path = outcomes_of(cli_run)
    killed_record(cli_run, path, "fsync", 2)  # every row out, no event yet
    assert lines_on_disk(cli_run) == (2, 1)
    assert kinds_by(cli_run.out, "collector") == Counter()
    _, plan = cli_run.resume()
    dispatched = {
        (r["_ng_task_index"], r["_ng_rollout_index"]): r["_ng_attempt_index"]
        for r in plan
    }
    assert (0, 0) not in dispatched  # the results stand
    assert (1, 0) not in dispatched
    assert dispatched[0, 1] == 1  # the recorded failure is retried (REC-20.5i)
    assert kinds_by(cli_run.out, "repair") == Counter(
        {"attempt_reserved": 3, "result_saved": 2, "failure_saved": 1}
    )
    assert_each_recorded_once(cli_run, rows)
    again = cli_run.invoke("record", cli_run.out, path)  # nothing twice
    assert again.exit_code == 0, again.stderr
    assert "3 rows were recorded already, skipped" in again.stdout
    assert_each_recorded_once(cli_run, rows)


def test_cli_5_a_record_whose_commit_fails_is_completed_by_the_next_writer(
    cli_run: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EV-12: the rows' commit fails (a full disk): exit 5; next open records."""
    rows, path = outcomes_of(cli_run)
    append = SQLiteStore.append_many
    calls = [0]

    def full_disk(self: SQLiteStore, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 1:  # the rows went out; their reservations and events do not
            raise StorageError("database or disk is full", path=self.path)
        return append(self, *args, **kwargs)

    monkeypatch.setattr(SQLiteStore, "append_many", full_disk)
    failed_run = cli_run.invoke("record", cli_run.out, path)
    assert failed_run.exit_code == 5
    assert "disk is full" in failed_run.stderr
    assert "Traceback" not in failed_run.stderr
    assert calls[0] == 1
    again = cli_run.invoke("record", cli_run.out, path)
    assert again.exit_code == 0, again.stderr
    assert "3 rows were recorded already, skipped" in again.stdout
    assert kinds_by(cli_run.out, "repair") == Counter(
        {"attempt_reserved": 3, "result_saved": 2, "failure_saved": 1}
    )
    assert_each_recorded_once(cli_run, rows)


def immutable(path: Path, on: bool) -> bool:
    """``chattr +i`` (root on a filesystem that has the flag): not even root writes."""
    if shutil.which("chattr") is None:
        return False
    flag = "+i" if on else "-i"
    done = subprocess.run(["chattr", flag, str(path)], capture_output=True, check=False)
    return done.returncode == 0


def test_cli_5_out_not_writable_after_the_sidecar_rows(cli_run: CliRun) -> None:
    """EV-12: OUT refuses its rows after the sidecar's went out; nothing is lost.

    ``record`` exits 5 naming OUT; once OUT is writable again, ``record`` run
    again records every row once (the sidecar's by the open's repair).
    """
    _, plan = cli_run.resume()
    rows = [
        {**plan[1], **failed("session_lost")},  # the sidecar's row first
        {**plan[0], **graded()},
        {**plan[2], **graded(0.5)},
    ]
    path = write_jsonl(cli_run.folder / "outcomes.jsonl", rows)
    cli_run.out.touch()
    if not immutable(cli_run.out, True):
        pytest.skip("making OUT unwritable needs root and chattr +i on tmp_path")
    try:
        refused = cli_run.invoke("record", cli_run.out, path)
        sidecar = read_jsonl(cli_run.out.with_name("rollouts_failures.jsonl"))
    finally:
        assert immutable(cli_run.out, False)
    assert refused.exit_code == 5
    assert str(cli_run.out) in refused.stderr
    assert "Traceback" not in refused.stderr
    assert len(sidecar) == 1  # the sidecar's row went out
    again = cli_run.invoke("record", cli_run.out, path)
    assert again.exit_code == 0, again.stderr
    assert_each_recorded_once(cli_run, rows)


@pytest.mark.parametrize("failing", ["rows", "commit"])
def test_cli_5_a_rejudgment_that_fails_after_its_admission_is_saved_once(
    cli_run: CliRun, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """REC-30, EV-12: the admission commits first; its row is saved once after all.

    With the row written and its event not (``commit``), the next open saves
    it (actor ``repair``) and ``record`` run again skips it; with no row
    written (``rows``), ``record`` run again saves it under the open admission.
    """
    cli_run.collect(by_key({(0, 1): failed("judge_failed", answer=True)}))
    _, plan = cli_run.resume()
    item = next(line["rejudge"] for line in plan if "rejudge" in line)
    key = {k: item[k] for k in ("task", "rollout", "attempt")}
    path = write_jsonl(
        cli_run.folder / "judged.jsonl", [{"_ng_rejudgment": key, **graded(0.5)}]
    )
    append = SQLiteStore.append_many
    calls = [0]

    def full_disk(self: SQLiteStore, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 2:  # the admission went in; the judgment's event does not
            raise StorageError("database or disk is full", path=self.path)
        return append(self, *args, **kwargs)

    def no_room(self: FileSink, *args: Any) -> None:
        raise StorageError("no space left on device", path=self.folder)

    if failing == "commit":
        monkeypatch.setattr(SQLiteStore, "append_many", full_disk)
    else:
        monkeypatch.setattr(FileSink, "_write_durably", no_room)
    assert cli_run.invoke("record", cli_run.out, path).exit_code == 5
    monkeypatch.undo()
    again = cli_run.invoke("record", cli_run.out, path)
    assert again.exit_code == 0, again.stderr
    with Ledger.open(cli_run.out) as led:
        assert verify(led) == []
        kinds = Counter(e.kind for e in led.events())
        saved = [e for e in led.events() if e.kind == "judge_outcome_saved"]
    assert kinds["judge_admitted"] == 1
    assert kinds["judge_outcome_saved"] == 1
    if failing == "commit":  # the row went out; the open recorded it
        assert saved[0].actor == "repair"
        assert "1 row was recorded already, skipped" in again.stdout
    else:
        assert saved[0].actor == "collector"
        assert "1 re-judgment (0 attempts reserved)" in again.stdout
    cli_run.ok("check", cli_run.out)
