"""CLI-9 verify, CLI-14 doctor, and CLI-1's exit codes for every kind of error."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main
from ledger import ConcurrencyConflict, Ledger, RunLock
from tests.test_cli_support import (
    CliRun,
    Templates,
    by_key,
    cli_run,
    graded,
    templates,
)

__all__ = ["cli_run", "templates"]


def build_done(run: CliRun) -> None:
    run.create()
    run.collect(by_key({}))


@pytest.fixture
def done(tmp_path: Path, templates: Templates) -> CliRun:
    """Every rollout graded."""
    return templates("done", tmp_path, build_done)


# -- CLI-9: verify -------------------------------------------------------------------


def test_cli_9_verify_is_0_when_everything_holds(done: CliRun) -> None:
    with Ledger.open(done.out) as led:
        seq, digest = led.head()
    result = done.ok("verify", done.out)
    assert result.stdout == (
        f"verified: seq {seq}, head {digest.hex()}\n"
        "the chain, the rows, two refolds and the published files hold\n"
        "kept what was proved: reports, status and the viewer now check only "
        "what comes after it\n"
    )
    assert result.stderr == ""


def test_cli_9_verify_is_5_with_each_finding(done: CliRun) -> None:
    data = bytearray(done.out.read_bytes())
    data[3] ^= 1  # a changed row
    done.out.write_bytes(bytes(data))
    (done.ledger_dir / "coverage.json").unlink()  # a lost published file
    result = done.invoke("verify", done.out)
    assert result.exit_code == 5
    assert result.stdout == (
        "rows: rollouts.jsonl line 1: the row of seq 10 changed since it was recorded\n"
        "published: coverage.json: missing or unreadable; rewrite it with "
        "`rollout-ledger status --publish`\n"
    )
    assert result.stderr == "rollout-ledger: 2 findings: the run does not verify\n"


def test_cli_9_verify_names_the_first_bad_seq(done: CliRun) -> None:
    db = done.ledger_dir / "ledger.db"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE events SET actor = 'mallory' WHERE seq = 4")
    conn.close()
    result = done.invoke("verify", done.out)
    assert result.exit_code == 5
    assert result.stdout.startswith("chain: seq 4: ")


# -- CLI-14: doctor ------------------------------------------------------------------


def test_cli_14_doctor_checks_from_a_second_process(done: CliRun) -> None:
    lines = done.ok("doctor", done.out).stdout.splitlines()
    assert lines[0] == (
        "flock across processes: ok: a second process was refused while this one "
        "held the lock"
    )
    assert lines[1].startswith("WAL safety: ")
    assert lines[2].startswith("free space: ")
    assert lines[3].startswith("run lock: ok: free (last holder: pid ")
    assert lines[4] == "journal mode: wal; it suits this filesystem"  # once
    assert list(done.ledger_dir.glob(".doctor-*")) == []  # the probe file is gone


def test_cli_14_doctor_names_the_lock_holder_and_whether_it_is_alive(
    done: CliRun,
) -> None:
    with RunLock(done.out):
        lines = done.ok("doctor", done.out).stdout.splitlines()
    assert lines[3].startswith(f"run lock: ok: held by pid {os.getpid()} on host ")
    assert lines[3].endswith(" (alive)")
    assert socket.gethostname() in lines[3]


def test_cli_14_doctor_before_the_run_exists(tmp_path: Path) -> None:
    run = CliRun(tmp_path)
    run.out.parent.mkdir()
    lines = run.ok("doctor", run.out).stdout.splitlines()
    assert lines[3] == "run lock: ok: no lock file yet"
    assert lines[4].startswith("journal mode: (no ledger yet); create runs here with")
    assert "no ledger yet" not in "\n".join(lines[:4])  # said once, by the mode
    missing = run.invoke("doctor", run.folder / "nowhere" / "x.jsonl")
    assert missing.exit_code == 3


# -- CLI-1: exit codes ---------------------------------------------------------------


def test_cli_1_a_missing_run_is_exit_3_without_a_traceback(cli_run: CliRun) -> None:
    """CLI-1: nothing at OUT is a refusal (exit 3), not corrupt saved work (5)."""
    result = cli_run.invoke("status", cli_run.folder / "other.jsonl")
    assert result.exit_code == 3
    assert "Traceback" not in result.stderr
    assert "no run at" in result.stderr


def test_cli_1_files_without_a_ledger_point_to_import(cli_run: CliRun) -> None:
    other = cli_run.folder / "legacy.jsonl"
    other.write_text('{"reward": 1}\n')
    result = cli_run.invoke("status", other)
    assert result.exit_code == 5
    assert "rollout-ledger import" in result.stderr


def test_cli_1_an_unknown_event_kind_is_exit_5(done: CliRun) -> None:
    with sqlite3.connect(done.ledger_dir / "ledger.db") as conn:
        conn.execute(
            "INSERT INTO events VALUES (99, 'from_the_future', 'x', 'y', x'7b7d', "
            "zeroblob(32), zeroblob(32))"
        )
    conn.close()
    result = done.invoke("history", done.out)
    assert result.exit_code == 5
    assert "kind 'from_the_future'" in result.stderr


def test_cli_1_a_concurrency_conflict_is_exit_4(
    cli_run: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    def conflict(*args: object, **kwargs: object) -> None:
        raise ConcurrencyConflict(expected_seq=1, actual_seq=2)

    monkeypatch.setattr(Ledger, "append_many", conflict)
    result = cli_run.invoke("extend-attempts", cli_run.out, 1, "--reason", "x")
    assert result.exit_code == 4
    assert result.stderr.endswith("nothing was written: replay the log and try again\n")


def test_cli_1_a_usage_error_is_exit_2(cli_run: CliRun) -> None:
    result = cli_run.invoke("status")
    assert result.exit_code == 2
    assert "Missing argument 'OUT'" in result.stderr


def test_cli_1_a_bug_is_exit_1_with_its_traceback(
    cli_run: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr("projections.status", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        cli_run.invoke("status", cli_run.out)
    result = CliRunner().invoke(main, ["status", str(cli_run.out)])
    assert result.exit_code == 1
    assert isinstance(result.exception, RuntimeError)


def test_cli_5_a_row_of_an_unknown_key_is_exit_3(cli_run: CliRun) -> None:
    _, plan = cli_run.resume()
    row = {**plan[0], "_ng_task_index": 42, **graded()}
    del row["_ng_rollout_id"]  # by its numbers alone (issue 25: else by its id)
    path = cli_run.folder / "x.jsonl"
    assert cli_run.invoke("record", cli_run.out, path).exit_code == 2  # no such file
    path.write_text(json.dumps(row) + "\n")
    result = cli_run.invoke("record", cli_run.out, path)
    assert result.exit_code == 3
    assert "task 42, rollout 0 is not among this run's materialized rows" in (
        result.stderr
    )
    path.write_text(json.dumps({**row, "_ng_rollout_id": "0-0"}) + "\n")
    result = cli_run.invoke("record", cli_run.out, path)
    assert result.exit_code == 3
    assert "the row names task 42 but its _ng_rollout_id '0-0'" in result.stderr
