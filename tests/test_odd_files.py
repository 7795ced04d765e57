"""R-5, CLI-1: odd paths, numbers, nested JSON and odd files end in a message.

Each case was a traceback (issue 18): a 5,000-character path, ``history
--since`` past any seq, deeply nested JSON in a row, an input, an approvals or
a policy file, a run file that is a folder or a named pipe (a pipe hung every
reader), ``events.body`` stored as TEXT, and a flipped byte in an index page of
``ledger.db``. Each now ends in one message naming the place, with its exit
code.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

import projections
from ledger import ConfigError, open_run
from tests.test_cli_fuzz import DEEP, DEEPISH, assert_no_traceback
from tests.test_cli_support import CliRun, graded

READERS = ("status", "verify", "check", "head", "history", "results")


@pytest.fixture
def run(tmp_path: Path) -> CliRun:
    made = CliRun(tmp_path)
    made.create()
    made.collect(lambda row: graded())
    return made


def _call(run: CliRun, *args: object) -> tuple[int, str]:
    from click.testing import CliRunner

    from cli import main
    from tests.test_cli_support import ACTOR

    argv = [str(a) for a in args]
    result = CliRunner().invoke(
        main, argv, obj={"clock": run.clock, "actor": ACTOR}, catch_exceptions=True
    )
    assert_no_traceback(result, argv)
    return result.exit_code, result.output


# -- a 5,000-character path ----------------------------------------------------------


def test_r_5_a_5000_character_out_is_refused_with_a_message(run: CliRun) -> None:
    """R-5: OUT of 5,000 characters: exit 2, 3 or 5 with a message, every command."""
    long = run.folder / ("a" * 5000)
    for args in (
        *([name, long] for name in (*READERS, "doctor", "export")),
        ["create", long, "--inputs", run.inputs, *run.config_args()],
        ["resume", long, *run.config_args()],
        ["record", long, run.inputs],
        ["import", long],
        ["policy", long, "--set", "fault_share=0.5", "--reason", "r"],
        ["extend-attempts", long, "2", "--reason", "r"],
    ):
        code, output = _call(run, *args)
        assert code in (2, 3, 5), (args[0], output)
        assert "name too long" in output.lower() or "too long" in output, output


def test_r_5_a_5000_character_output_path_is_refused(run: CliRun) -> None:
    """R-5: ``-o``, ``--plan-out`` and ``--files`` of 5,000 characters."""
    long = run.folder / ("a" * 5000)
    for args in (
        ["results", run.out, "-o", long],
        ["export", run.out, "-o", long],
        ["export", run.out, "--files", long],
        ["resume", run.out, *run.config_args(), "--plan-out", long],
    ):
        code, output = _call(run, *args)
        assert code in (2, 3, 5), (args[0], output)


# -- numbers -------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["99999999999999999999", str(2**63)])
def test_r_5_history_since_past_any_seq_is_refused(run: CliRun, value: str) -> None:
    """R-5: ``history --since`` past 2**63-1 names the bound (exit 3)."""
    code, output = _call(run, "history", run.out, "--since", value)
    assert code == 3, output
    assert str(2**63 - 1) in output


def test_r_5_history_since_past_any_seq_is_refused_by_the_library(
    run: CliRun,
) -> None:
    """R-5: the library bounds ``since`` too, naming the largest seq."""
    with open_run(run.out) as led, pytest.raises(ConfigError) as caught:
        projections.history(led, since=2**70)
    assert caught.value.key == "since"
    assert str(2**63 - 1) in str(caught.value)


@pytest.mark.parametrize(
    "args",
    [
        ["history", "{out}", "--task", "99999999999999999999"],
        ["history", "{out}", "--rollout", "-1"],
        ["approve", "{out}", "--task", "99999999999999999999", "--rollout", "0"],
        ["extend-attempts", "{out}", "99999999999999999999", "--reason", "r"],
        ["resume", "{out}", "--extend-attempts", "99999999999999999999"],
    ],
)
def test_r_5_huge_and_negative_numbers_are_refused_with_their_range(
    run: CliRun, args: list[str]
) -> None:
    """R-5: numeric options out of range are refused naming the range, no traceback.

    Below the minimum is a usage error (exit 2); above a bound, the library's
    refusal names it (exit 3).
    """
    argv = [run.out if a == "{out}" else a for a in args]
    if argv[0] == "resume":
        argv[2:2] = run.config_args()
    code, output = _call(run, *argv)
    assert code in (2, 3), output
    assert "Traceback" not in output
    assert ("from 0 to" in output or "from 1 to" in output) or code == 2, output


# -- deeply nested JSON --------------------------------------------------------------


@pytest.mark.parametrize("depth", [100_000, 950])
def test_r_5_a_deeply_nested_row_is_refused_with_its_line(
    run: CliRun, depth: int
) -> None:
    """R-5: ``record`` of a row nested 100,000 (or 950) deep: exit 3, file and line."""
    rows = run.folder / "deep.jsonl"
    nested = DEEP if depth == 100_000 else DEEPISH
    rows.write_text('{"a": 1}\n' + '{"a": ' + nested + "}\n", encoding="utf-8")
    before = run.out.read_bytes()
    code, output = _call(run, "record", run.out, rows)
    assert code == 3, output
    assert str(rows) in output
    assert "line" in output
    assert run.out.read_bytes() == before


def test_r_5_deeply_nested_inputs_are_refused_by_create_and_import(
    tmp_path: Path,
) -> None:
    """R-5: ``create``/``import --inputs`` of nested rows: file and line."""
    run = CliRun(tmp_path)
    run.inputs.write_text('{"a": ' + DEEP + "}\n", encoding="utf-8")
    code, output = _call(
        run, "create", run.out, "--inputs", run.inputs, *run.config_args()
    )
    assert code == 3, output
    assert f"line 1 of {run.inputs}" in output
    assert not run.ledger_dir.exists()
    run.out.parent.mkdir()
    run.out.write_text("")
    code, output = _call(run, "import", run.out, "--inputs", run.inputs)
    assert code in (3, 5), output
    assert str(run.inputs) in output or "line 1" in output


def test_r_5_a_deeply_nested_policy_file_is_refused(tmp_path: Path) -> None:
    """R-5: ``create --policy`` of nested JSON names the file (exit 3)."""
    run = CliRun(tmp_path)
    policy = tmp_path / "policy.json"
    policy.write_text('{"fault_share": ' + DEEP + "}", encoding="utf-8")
    code, output = _call(
        run,
        "create",
        run.out,
        "--inputs",
        run.inputs,
        *run.config_args(),
        "--policy",
        policy,
    )
    assert code == 3, output
    assert str(policy) in output
    assert "nest too deeply" in output


def test_r_5_a_deeply_nested_policy_setting_is_refused(run: CliRun) -> None:
    """R-5: ``policy --set KEY=<nested JSON>``: a usage error, nothing recorded."""
    code, output = _call(
        run, "policy", run.out, "--set", "fault_share=" + DEEP, "--reason", "r"
    )
    assert code == 2, output
    assert "nests too deeply" in output


def test_r_5_a_deeply_nested_approvals_line_is_refused_with_its_line(
    run: CliRun,
) -> None:
    """R-5: an approvals file line of nested JSON is named with its line (exit 3)."""
    approvals = run.folder / "approvals.txt"
    approvals.write_text("0 0 0\n{" + '"a": ' + DEEP + "}\n", encoding="utf-8")
    code, output = _call(
        run,
        "resume",
        run.out,
        *run.config_args(),
        "--rerun-masked-without-artifact",
        approvals,
        "--dry-run",
    )
    assert code in (0, 3), output  # a line that approves nothing: a warning
    assert "line 2" in output
    assert "nest too deeply" in output


# -- run files that are folders or named pipes ------------------------------------


def _replace(path: Path, kind: str) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    if kind == "folder":
        path.mkdir()
    else:
        os.mkfifo(path)


@pytest.mark.parametrize("kind", ["folder", "pipe"])
@pytest.mark.parametrize(
    "name",
    ["rollouts_failures.jsonl", "rollouts_ledger/coverage.json", "rollouts.jsonl"],
)
def test_r_5_a_run_file_that_is_a_folder_or_pipe_is_refused_by_name(
    run: CliRun, name: str, kind: str
) -> None:
    """R-5: every reader and writer refuses at once (no hang), naming the path."""
    path = run.out.parent / name
    _replace(path, kind)
    for args in (
        *([reader, run.out] for reader in READERS),
        ["status", run.out, "--publish"],
        ["resume", run.out, *run.config_args(), "--dry-run"],
        ["extend-attempts", run.out, "5", "--reason", "r"],
        ["export", run.out, "--files", run.folder / f"copy-{kind}"],
    ):
        code, output = _call(run, *args)
        if code == 0:
            continue  # this command never reads that file
        # OUT as a folder is OUT written wrong: a usage error, exit 2.
        assert code == (2 if path == run.out and kind == "folder" else 5), output
        assert str(path) in output.replace("\n", ""), (args[0], output)


@pytest.mark.parametrize("kind", ["folder", "pipe"])
def test_r_5_a_run_lock_that_is_a_folder_or_pipe_is_refused_by_name(
    run: CliRun, kind: str
) -> None:
    """R-5: a writer and doctor refuse a lock that is a folder or pipe (no hang)."""
    lock = run.ledger_dir / "run.lock"
    _replace(lock, kind)
    for args in (
        ["resume", run.out, *run.config_args(), "--plan-out", run.folder / "p.jsonl"],
        ["extend-attempts", run.out, "5", "--reason", "r"],
        ["status", run.out, "--publish"],
    ):
        code, output = _call(run, *args)
        assert code == 5, (args[0], output)
        assert str(lock) in output.replace("\n", ""), (args[0], output)
    code, output = _call(run, "doctor", run.out)
    assert str(lock) in output.replace("\n", ""), output
    for reader in READERS:
        code, output = _call(run, reader, run.out)
        assert "Traceback" not in output


@pytest.mark.parametrize("kind", ["folder", "pipe"])
def test_r_5_an_option_file_that_is_a_folder_or_pipe_is_a_usage_error(
    run: CliRun, kind: str
) -> None:
    """R-5: ``record OUT <pipe>`` and ``--config <pipe>``: exit 2, never opened."""
    path = run.folder / "odd.jsonl"
    _replace(path, kind)
    for args in (
        ["record", run.out, path],
        ["resume", run.out, "--config", path, "--dry-run"],
    ):
        code, output = _call(run, *args)
        assert code == 2, (args[0], output)


# -- a damaged ledger.db -------------------------------------------------------------


def _db(run: CliRun) -> Path:
    return run.ledger_dir / "ledger.db"


@pytest.mark.parametrize("newest", [True, False])
def test_r_5_an_event_body_stored_as_text_is_corrupt_saved_work(
    run: CliRun, newest: bool
) -> None:
    """R-5: ``events.body`` as TEXT: exit 5 naming ledger.db and the seq.

    The newest event: every command checks the head, so every reader stops. An
    older one: ``verify`` (the full check) and every command that reads it.
    """
    with sqlite3.connect(_db(run)) as conn:
        (head,) = conn.execute("SELECT max(seq) FROM events").fetchone()
        seq = head if newest else 2
        conn.execute(
            "UPDATE events SET body = CAST(body AS TEXT) WHERE seq = ?", (seq,)
        )
    commands = (
        *([reader, run.out] for reader in READERS),
        ["resume", run.out, *run.config_args(), "--dry-run"],
        ["export", run.out],
    )
    for args in commands if newest else (["verify", run.out], ["export", run.out]):
        code, output = _call(run, *args)
        assert code == 5, (args[0], output)
        assert f"event seq {seq} in {_db(run)}" in output.replace("\n", ""), output
    for args in commands:  # the rest: exit 0 or 5, no traceback
        assert _call(run, *args)[0] in (0, 5)


def test_r_5_a_flipped_byte_in_an_index_page_is_corrupt_saved_work(
    run: CliRun,
) -> None:
    """R-5: a byte flipped in the events' kind index: exit 0 or 5, never a traceback.

    A kind the index lists but no event has was a ``StopIteration`` from the
    table scan (in ``verify`` too); it is damage named with ledger.db, exit 5.
    """
    db = _db(run)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'events_by_kind'"
        ).fetchone()
    intact = db.read_bytes()
    named = 0
    for offset in range(size - 200, size, 7):
        data = bytearray(intact)
        data[(root - 1) * size + offset] ^= 0x55
        db.write_bytes(bytes(data))
        for reader in ("verify", "status", "history"):
            code, output = _call(run, reader, run.out)
            assert code in (0, 5), output
            if code == 5 and "index of event kinds" in output:
                assert str(db) in output.replace("\n", "")
                named += 1
    assert named, "no flip landed in a kind the index lists"
