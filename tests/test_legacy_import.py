"""Importing runs saved without a ledger (REC-70..REC-74) and `rollout-ledger import`.

Small synthetic runs: materialized inputs of 3 tasks x 2 rollouts, a sidecar
and `OUT` written the way an older NeMo Gym collector wrote them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import msgspec
import pytest
from click.testing import CliRunner

from ledger import (
    Clock,
    ConfigError,
    CorruptLedger,
    IdentityMismatch,
    Ledger,
    LedgerError,
    RowError,
    RunLock,
    import_legacy_run,
)
from ledger.events import (
    FailureSaved,
    LegacyImported,
    OmissionSaved,
    ResultSaved,
    RunCreated,
    TailRepaired,
)
from projections import decide, import_run, replay, resume, verify
from tests.conftest import input_rows
from tests.internals import (
    BAD_ATTEMPT,
    BLANK,
    NO_INDEX,
    NO_PERSIST,
    NOT_FAILURE,
    NOT_JSON,
    NOT_OBJECT,
    OMISSION_IN_OUT,
    OTHER_RUN,
    PLACEHOLDER,
    TORN,
    UNKNOWN_KEY,
    LedgerGroup,
    _progress_bar,
    import_,
)
from tests.test_identity import nemo_configuration

ROOT = Path(__file__).parents[1]
ANSWER = {
    "output": [{"type": "message", "content": [{"type": "output_text", "text": "4"}]}],
    "status": "completed",
}
FOREIGN_ID = "5f" + "0" * 30
FOREIGN_DIGEST = "ab" * 32
Row = dict[str, Any]


# --- helpers ------------------------------------------------------------------------


def result(task: int, rollout: int, **extra: Any) -> Row:
    """A main row as an older collector wrote it."""
    row = {"_ng_task_index": task, "_ng_rollout_index": rollout}
    return {**row, "response": ANSWER, "reward": 1.0, **extra}


def failure(task: int, rollout: int, kind: str = "transient", **extra: Any) -> Row:
    """A sidecar row: the failure class routes it there; its reward is a placeholder."""
    row = {"_ng_task_index": task, "_ng_rollout_index": rollout}
    return {**row, "reward": 0.0, "_ng_failure_class": kind, **extra}


def line(row: Any) -> bytes:
    return json.dumps(row).encode() + b"\n"


def lines(*rows: Any) -> bytes:
    return b"".join(r if isinstance(r, bytes) else line(r) for r in rows)


def make_run(
    folder: Path,
    *,
    out: bytes | None = b"",
    sidecar: bytes | None = None,
    inputs: list[Row] | None = None,
    materialized: bool = True,
) -> Path:
    """Write an older collector's files; returns `OUT`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "rollouts.jsonl"
    if out is not None:
        path.write_bytes(out)
    if sidecar is not None:
        (folder / "rollouts_failures.jsonl").write_bytes(sidecar)
    if materialized:
        rows = input_rows() if inputs is None else inputs
        (folder / "rollouts_materialized_inputs.jsonl").write_bytes(lines(*rows))
    return path


def files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder``, by relative path, with its bytes."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def stable(found: dict[str, bytes]) -> dict[str, bytes]:
    """Leave out the lock's file and SQLite's own (REC-50)."""
    return {
        k: v for k, v in found.items() if not k.endswith(("run.lock", "-wal", "-shm"))
    }


def outside_ledger(folder: Path) -> dict[str, bytes]:
    return {k: v for k, v in files(folder).items() if "_ledger" not in k}


def outcomes(report: Any) -> list[tuple[str, int, int, int]]:
    return [
        (e.kind, e.body.task, e.body.rollout, e.body.attempt)
        for e in report.events
        if isinstance(e.body, ResultSaved | FailureSaved | OmissionSaved)
    ]


def cli() -> click.Group:
    """A throwaway group with the CLI's error mapping (CLI-1)."""

    @click.group(cls=LedgerGroup)
    def group() -> None:
        pass

    group.add_command(import_, "import")
    return group


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli(), ["import", *args], catch_exceptions=False)


# --- REC-70: reading order, events, files ------------------------------------------


def test_rec_70_events_in_reading_order(tmp_path: Path) -> None:
    out = make_run(
        tmp_path,
        sidecar=lines(failure(2, 1), failure(0, 0)),
        out=lines(result(1, 0), result(0, 0)),
    )
    report = import_run(out, clock=Clock(seed=1)).report
    assert [e.kind for e in report.events[:2]] == ["run_created", "legacy_imported"]
    assert outcomes(report) == [
        ("failure_saved", 2, 1, 0),
        ("failure_saved", 0, 0, 0),
        ("result_saved", 1, 0, 0),
        ("result_saved", 0, 0, 1),
    ]
    assert {e.actor for e in report.events} == {"import"}
    assert [e.seq for e in report.events] == list(range(1, 7))


def test_rec_70_run_created_from_the_materialized_rows(tmp_path: Path) -> None:
    out = make_run(tmp_path, out=lines(result(0, 0)))
    report = import_run(out).report
    body = report.events[0].body
    assert isinstance(body, RunCreated)
    data = (tmp_path / "rollouts_materialized_inputs.jsonl").read_bytes()
    assert body.legacy_import is True
    assert body.identity is None
    assert body.materialized_digest == hashlib.sha256(data).hexdigest()
    assert body.source_digest == "unverified"
    # The index points at each input row's own bytes, in file order.
    for entry, row in zip(body.index, input_rows(), strict=True):
        task, rollout, offset, length, agent, rollout_id = entry
        assert json.loads(data[offset : offset + length]) == row
        assert (task, rollout, agent, rollout_id) == (
            row["_ng_task_index"],
            row["_ng_rollout_index"],
            "simple_agent",
            None,
        )


def test_rec_70_locations_name_the_exact_bytes(tmp_path: Path) -> None:
    out = make_run(
        tmp_path,
        sidecar=lines(failure(0, 0), b"\n", failure(1, 0)),
        out=lines(result(0, 1), result(1, 1)),
    )
    report = import_run(out).report
    saved = [e.body for e in report.events[2:]]
    for body in saved:
        assert isinstance(body, ResultSaved | FailureSaved)
        data = (tmp_path / body.location.file).read_bytes()
        row = data[body.location.offset : body.location.offset + body.location.length]
        assert row.endswith(b"\n")
        assert hashlib.sha256(row).hexdigest() == body.location.row_sha256
        assert (
            json.loads(row)["_ng_task_index"],
            json.loads(row)["_ng_rollout_index"],
        ) == (
            body.task,
            body.rollout,
        )
    sidecar_lines = [b.sidecar_line for b in saved if isinstance(b, FailureSaved)]
    assert sidecar_lines == [0, 2]  # 0-based, the blank line 2 counted


def test_rec_70_inputs_required_when_materialized_inputs_are_missing(
    tmp_path: Path,
) -> None:
    out = make_run(tmp_path, out=lines(result(0, 0)), materialized=False)
    before = outside_ledger(tmp_path)
    with pytest.raises(ConfigError, match="--inputs"):
        import_run(out)
    assert outside_ledger(tmp_path) == before


def test_rec_70_inputs_copied_byte_for_byte(tmp_path: Path) -> None:
    out = make_run(tmp_path / "run", out=lines(result(0, 0)), materialized=False)
    # Odd but valid formatting: the copy keeps the bytes, not a re-encoding.
    given = tmp_path / "rows.jsonl"
    given.write_bytes(
        b"".join(
            json.dumps(r, indent=None, separators=(", ", " : ")).encode() + b"\n"
            for r in input_rows()
        )
    )
    before = outside_ledger(tmp_path)
    result_ = import_run(out, inputs=given)
    after = outside_ledger(tmp_path)
    # The copy is the one file created outside the ledger folder.
    assert set(after) - set(before) == {"run/rollouts_materialized_inputs.jsonl"}
    assert after["run/rollouts_materialized_inputs.jsonl"] == given.read_bytes()
    assert {k: after[k] for k in before} == before
    assert result_.report.inputs_copied is True
    assert (
        result_.state.manifest["materialized_digest"]
        == hashlib.sha256(given.read_bytes()).hexdigest()
    )


def test_rec_70_inputs_must_match_existing_materialized_inputs(tmp_path: Path) -> None:
    out = make_run(tmp_path / "run", out=lines(result(0, 0)))
    other = tmp_path / "other.jsonl"
    other.write_bytes(lines(*input_rows(2, 2)))
    with pytest.raises(ConfigError, match="other rows"):
        import_run(out, inputs=other)
    same = tmp_path / "same.jsonl"
    same.write_bytes(lines(*input_rows()))
    assert import_run(out, inputs=same).report.inputs_copied is False


def test_rec_70_collector_and_other_tools_files_never_modified(tmp_path: Path) -> None:
    out = make_run(
        tmp_path,
        sidecar=lines(failure(0, 0), b"garbage\n"),
        out=lines(result(0, 0), b"<PLACEHOLDER ROW>\n") + b'{"torn":',
    )
    for name, data in {
        "rollouts_aggregate_metrics.json": b"[]\n",
        "rollouts_coverage.json": b'{"schema_version": 2}\n',
        "rollouts_run.lock": b"",
        "rollouts_attempts.jsonl": b"{}\n",
    }.items():
        (tmp_path / name).write_bytes(data)
    before = outside_ledger(tmp_path)
    import_run(out, skip_rejected=True)
    assert outside_ledger(tmp_path) == before


def test_rec_70_published_files_and_a_clean_verify(tmp_path: Path) -> None:
    out = make_run(tmp_path, sidecar=lines(failure(0, 0)), out=lines(result(0, 0)))
    imported = import_run(out)
    folder = tmp_path / "rollouts_ledger"
    for name in (
        "manifest.json",
        "coverage.json",
        "resume_drift.log",
        "failure_budget.log",
    ):
        assert (folder / name).exists(), name
    assert not (folder / "identity.json").exists()  # ID-32: an imported run has none
    coverage = json.loads((folder / "coverage.json").read_bytes())
    assert coverage == imported.coverage.to_dict()
    manifest = json.loads((folder / "manifest.json").read_bytes())
    assert manifest["legacy_import"] is True
    with Ledger.open(out) as reader:
        assert verify(reader) == []


def test_rec_70_a_writer_open_after_import_changes_nothing(tmp_path: Path) -> None:
    # Rejected lines lie inside the recorded sizes, so the EV-12 repair never
    # mistakes them for rows a crash left unrecorded.
    out = make_run(
        tmp_path,
        sidecar=lines(b"not json\n", failure(0, 0), {"reward": 0.0}),
        out=lines(result(0, 0), b"<PLACEHOLDER ROW>\n", result(9, 9), result(1, 0)),
    )
    import_run(out, skip_rejected=True)
    before = files(tmp_path)
    with RunLock(out) as lock, Ledger.open(out, lock=lock) as writer:
        assert writer.head()[0] == 2 + 3
    assert stable(files(tmp_path)) == stable(before)


def test_rec_70_policy_from_the_owning_launcher(tmp_path: Path) -> None:
    out = make_run(tmp_path, out=lines(result(0, 0)))
    policy = {"owner": ["rollouts"], "policy": {"retry_terminal_timeouts": True}}
    (tmp_path / "recovery_policy.json").write_text(json.dumps(policy))
    body = import_run(out).report.events[0].body
    assert isinstance(body, RunCreated)
    assert body.policy["retry_terminal_timeouts"] is True


def test_rec_70_a_failed_rename_leaves_no_half_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = make_run(tmp_path, out=lines(result(0, 0)))

    def killed(*args: Any) -> None:
        raise KeyboardInterrupt  # as if the process died right before the rename

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        import_run(out)
    assert not (tmp_path / "rollouts_ledger" / "ledger.db").exists()
    monkeypatch.undo()
    assert import_run(out).report.rows_imported == 1  # the leftover is cleared


# The child kills itself with SIGKILL right after one step of the import.
_KILLED_IMPORT = """
import os, signal, sys
from tests.internals import SQLiteStore, built_aside
from tests.internals import legacy_log as legacy
from projections import import_run

def killed_after(step):
    def run(*args, **kwargs):
        step(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
    return run

point = sys.argv[3]
if point == "inputs-copied":
    legacy.atomic_replace = killed_after(legacy.atomic_replace)
elif point == "events-appended":
    SQLiteStore.append_many = killed_after(SQLiteStore.append_many)
elif point == "renamed":
    built_aside.fsync_dir = killed_after(built_aside.fsync_dir)
import_run(sys.argv[1], inputs=sys.argv[2])
"""


@pytest.mark.parametrize(
    ("point", "whole"),
    [("inputs-copied", False), ("events-appended", False), ("renamed", True)],
)
def test_rec_70_a_killed_import_leaves_no_half_run(
    tmp_path: Path, point: str, whole: bool
) -> None:
    rows = input_rows(20, 2)
    out_rows = lines(
        *(result(r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows)
    )
    given = tmp_path / "rows.jsonl"
    given.write_bytes(lines(*rows))
    out = make_run(tmp_path / "run", out=out_rows, materialized=False)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_IMPORT, str(out), str(given), point], env=env
    )
    assert killed.returncode == -signal.SIGKILL
    assert out.read_bytes() == out_rows
    db = tmp_path / "run" / "rollouts_ledger" / "ledger.db"
    assert db.exists() is whole  # a whole run, or none
    if whole:
        with Ledger.open(out) as reader:
            assert reader.head()[0] == 2 + len(rows)
            assert not [f for f in verify(reader) if f.check != "published"]
    else:
        assert import_run(out, inputs=given).report.rows_imported == len(rows)


# --- REC-71: each line is a row or a rejection --------------------------------------

# Each bad line goes between two good rows, as line 2 of its file.
OUT_REJECTIONS = [
    pytest.param(b"this is not json\n", NOT_JSON, id="not-json"),
    pytest.param(b"\xff\xfe{}\n", NOT_JSON, id="not-utf8"),
    pytest.param(b"[" * 5000 + b"]" * 5000 + b"\n", NOT_JSON, id="too-deep"),
    pytest.param(b"<PLACEHOLDER ROW>\n", PLACEHOLDER, id="placeholder"),
    pytest.param(b"[1, 2]\n", NOT_OBJECT, id="array"),
    pytest.param(line({"reward": 1.0}), NO_INDEX, id="no-index"),
    pytest.param(line(result(0, 0, _ng_task_index="0")), NO_INDEX, id="string-index"),
    pytest.param(line(result(0, 0, _ng_task_index=True)), NO_INDEX, id="bool-index"),
    pytest.param(line(result(0, 0, _ng_rollout_index=-1)), NO_INDEX, id="negative"),
    pytest.param(line(result(0, 0, _ng_task_index=2**64)), NO_INDEX, id="huge-index"),
    pytest.param(line(result(9, 0)), UNKNOWN_KEY, id="unknown-key"),
    pytest.param(line(result(0, 1, _ng_run_id="other")), OTHER_RUN, id="other-run"),
    pytest.param(line(result(0, 1, _ng_attempt_index=-1)), BAD_ATTEMPT, id="attempt"),
    pytest.param(
        line(result(0, 1, _ng_attempt_index="1")), BAD_ATTEMPT, id="attempt-str"
    ),
    pytest.param(line(result(0, 1, _ng_no_persist=True)), NO_PERSIST, id="no-persist"),
    pytest.param(
        line(failure(0, 1, _ng_omitted=True)), OMISSION_IN_OUT, id="omission-in-out"
    ),
]
SIDECAR_REJECTIONS = [
    pytest.param(b"{not json}\n", NOT_JSON, id="not-json"),
    pytest.param(line(failure(0, 0, _ng_task_index=None)), NO_INDEX, id="no-index"),
    pytest.param(line(failure(7, 7)), UNKNOWN_KEY, id="unknown-key"),
    pytest.param(line({"_ng_task_index": 0, "_ng_rollout_index": 1}), NOT_FAILURE,
                 id="not-a-failure"),
    pytest.param(line(failure(0, 1, _ng_run_id=FOREIGN_ID)), OTHER_RUN, id="other-run"),
]  # fmt: skip


def _assert_refused(tmp_path: Path, out: Path, file: str, reason: str) -> None:
    before = outside_ledger(tmp_path)
    with pytest.raises(RowError) as raised:
        import_run(out)
    assert f"{file} line 2: {reason}" in str(raised.value)
    assert "--skip-rejected" in str(raised.value)
    assert raised.value.line == 2
    # Nothing written: the ledger folder holds the lock file alone.
    assert outside_ledger(tmp_path) == before
    assert os.listdir(tmp_path / "rollouts_ledger") == ["run.lock"]


@pytest.mark.parametrize(("bad", "reason"), OUT_REJECTIONS)
def test_rec_71_out_line_rejected(tmp_path: Path, bad: bytes, reason: str) -> None:
    out = make_run(tmp_path, out=lines(result(0, 0), bad, result(1, 0)))
    _assert_refused(tmp_path, out, "rollouts.jsonl", reason)
    report = import_run(out, skip_rejected=True).report
    assert [(r.file, r.line) for r in report.rejections] == [("rollouts.jsonl", 2)]
    assert report.rejections[0].reason.startswith(reason)
    assert (report.rows_read, report.rows_imported, report.rows_rejected) == (3, 2, 1)
    legacy = report.events[1].body
    assert isinstance(legacy, LegacyImported)
    assert legacy.rejections == report.rejections


@pytest.mark.parametrize(("bad", "reason"), SIDECAR_REJECTIONS)
def test_rec_71_sidecar_line_rejected(tmp_path: Path, bad: bytes, reason: str) -> None:
    out = make_run(tmp_path, sidecar=lines(failure(0, 0), bad, failure(1, 0)))
    _assert_refused(tmp_path, out, "rollouts_failures.jsonl", reason)
    report = import_run(out, skip_rejected=True).report
    assert [(r.file, r.line) for r in report.rejections] == [
        ("rollouts_failures.jsonl", 2)
    ]
    assert report.rejections[0].reason.startswith(reason)
    assert report.rows_imported == 2


def test_rec_71_torn_last_line_rejected(tmp_path: Path) -> None:
    # Cut inside the JSON; a complete object without its newline is kept (REC-83).
    out = make_run(tmp_path, out=lines(result(0, 0)) + line(result(1, 0))[:-3])
    with pytest.raises(RowError, match=f"rollouts.jsonl line 2: {TORN}"):
        import_run(out)
    report = import_run(out, skip_rejected=True).report
    assert report.rejections[0].reason.startswith(TORN)


def test_rec_71_a_skipped_torn_line_is_left_to_the_writers_repair(
    tmp_path: Path,
) -> None:
    # The torn bytes are outside the recorded size, so no row is ever appended
    # onto them: the next writer's open cuts and saves them (EV-12).
    torn = line(result(1, 0))[:-5]
    out = make_run(tmp_path, out=lines(result(0, 0)) + torn)
    report = import_run(out, skip_rejected=True).report
    source = next(s for s in report.sources if s.file == "rollouts.jsonl")
    assert (source.size, source.lines) == (len(line(result(0, 0))), 1)
    assert out.read_bytes().endswith(torn)  # the import itself changes nothing
    with Ledger.open(out) as reader:
        assert [f.check for f in verify(reader)] == ["repair"]
    with RunLock(out) as lock, Ledger.open(out, lock=lock) as writer:
        repaired = [e.body for e in writer.events() if isinstance(e.body, TailRepaired)]
    assert [(r.file, r.length) for r in repaired] == [("rollouts.jsonl", len(torn))]


def test_rec_71_blank_lines_never_fail_an_import(tmp_path: Path) -> None:
    out = make_run(
        tmp_path,
        sidecar=lines(b"\n", failure(0, 0)),
        out=lines(result(0, 0), b"   \n", b"\r\n", result(1, 0)),
    )
    report = import_run(out).report
    assert report.rows_imported == 3
    assert [(r.file, r.line, r.reason) for r in report.rejections] == [
        ("rollouts_failures.jsonl", 1, BLANK),
        ("rollouts.jsonl", 2, BLANK),
        ("rollouts.jsonl", 3, BLANK),
    ]


def test_rec_71_every_rejection_listed_with_its_line(tmp_path: Path) -> None:
    out = make_run(
        tmp_path,
        sidecar=lines(b"x\n", failure(0, 0)),
        out=lines(b"<PLACEHOLDER ROW>\n", result(0, 0), {"a": 1}, result(5, 5)),
    )
    with pytest.raises(RowError) as raised:
        import_run(out)
    message = str(raised.value)
    assert message.startswith("4 lines of rollouts.jsonl or its sidecar")
    for where in (
        "rollouts_failures.jsonl line 1: not JSON",
        "rollouts.jsonl line 1: a <PLACEHOLDER ROW> line",
        "rollouts.jsonl line 3: no integer task/rollout index",
        "rollouts.jsonl line 4: key not among the materialized rows (task 5, rollout",
    ):
        assert where in message


def test_rec_71_rows_without_indices_are_never_paired_by_position(
    tmp_path: Path,
) -> None:
    # polymath's shape: the inputs have keys, the results none.
    unkeyed = [{"response": ANSWER, "reward": 1.0} for _ in range(6)]
    out = make_run(tmp_path, out=lines(*unkeyed))
    result_ = import_run(out, skip_rejected=True)
    assert result_.report.rows_imported == 0
    assert {r.reason.split(" (")[0] for r in result_.report.rejections} == {NO_INDEX}
    assert result_.coverage.decisions["pending"] == 6


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        pytest.param([{"q": 1}, *input_rows(1, 1)], "line 1: no integer task/rollout",
                     id="no-index"),
        pytest.param([*input_rows(1, 2), input_rows(1, 1)[0]],
                     "line 3: task 0, rollout 0 repeats line 1", id="duplicate-key"),
        pytest.param([{**input_rows(1, 1)[0], "_ng_rollout_id": "../bad"}],
                     "invalid _ng_rollout_id", id="bad-rollout-id"),
    ],
)  # fmt: skip
def test_rec_71_unusable_input_rows_refuse_even_with_skip_rejected(
    tmp_path: Path, inputs: list[Row], message: str
) -> None:
    out = make_run(tmp_path, out=lines(result(0, 0)), inputs=inputs)
    with pytest.raises(RowError, match=re.escape(message)):
        import_run(out, skip_rejected=True)
    assert os.listdir(tmp_path / "rollouts_ledger") == ["run.lock"]


def test_rec_71_inputs_not_json_refused(tmp_path: Path) -> None:
    out = make_run(tmp_path, out=lines(result(0, 0)))
    path = tmp_path / "rollouts_materialized_inputs.jsonl"
    path.write_bytes(lines(*input_rows()) + b"<PLACEHOLDER ROW>\n\n")
    with pytest.raises(RowError, match="line 7: a <PLACEHOLDER ROW> line"):
        import_run(out, skip_rejected=True)


def test_rec_71_empty_inputs_refused(tmp_path: Path) -> None:
    out = make_run(tmp_path, out=lines(result(0, 0)), inputs=[])
    with pytest.raises(ConfigError, match="no materialized rows"):
        import_run(out)


def test_rec_71_nothing_to_import_without_collector_files(tmp_path: Path) -> None:
    # Materialized inputs alone are a run with every rollout pending (REC-84).
    out = make_run(tmp_path, out=None, materialized=False)
    with pytest.raises(ConfigError, match="no run to import"):
        import_run(out)


# --- REC-72: attempt numbers --------------------------------------------------------

ATTEMPTS = [
    # The older collector's rule: earlier sidecar rows of the key, in file order.
    pytest.param([failure(0, 0), failure(0, 0), failure(1, 0)], [],
                 [("failure_saved", 0, 0, 0), ("failure_saved", 0, 0, 1),
                  ("failure_saved", 1, 0, 0)], id="sidecar-counts-its-key"),
    # A main row's attempt is the number of sidecar rows of its key.
    pytest.param([failure(0, 0), failure(0, 0)], [result(0, 0), result(1, 0)],
                 [("failure_saved", 0, 0, 0), ("failure_saved", 0, 0, 1),
                  ("result_saved", 0, 0, 2), ("result_saved", 1, 0, 0)],
                 id="main-after-sidecar"),
    # `_ng_attempt_index` wins, and explicit rows still count for later ones.
    pytest.param([failure(0, 0, _ng_attempt_index=4), failure(0, 0)],
                 [result(0, 0, _ng_attempt_index=7)],
                 [("failure_saved", 0, 0, 4), ("failure_saved", 0, 0, 1),
                  ("result_saved", 0, 0, 7)], id="explicit-attempt"),
    pytest.param([failure(0, 0, _ng_attempt_index=None)], [],
                 [("failure_saved", 0, 0, 0)], id="null-attempt-is-absent"),
]  # fmt: skip


@pytest.mark.parametrize(("sidecar", "main", "expected"), ATTEMPTS)
def test_rec_72_attempt_numbers(
    tmp_path: Path, sidecar: list[Row], main: list[Row], expected: list[Any]
) -> None:
    out = make_run(tmp_path, sidecar=lines(*sidecar), out=lines(*main))
    assert outcomes(import_run(out).report) == expected


def test_rec_72_a_shared_attempt_is_a_duplicate(tmp_path: Path) -> None:
    # REC-1: the first row of an attempt is its outcome, the second a duplicate.
    out = make_run(
        tmp_path,
        sidecar=lines(failure(0, 0, _ng_attempt_index=0)),
        out=lines(result(0, 0, _ng_attempt_index=0), result(1, 0), result(1, 0)),
    )
    imported = import_run(out)
    assert imported.report.rows_imported == 4
    assert imported.coverage.totals["duplicates"] == 2
    # (0, 0): the sidecar's failure came first and decides (counted, retry).
    assert decide(imported.state, 0, 0).value == "retry"
    assert decide(imported.state, 1, 0).value == "complete"


# --- REC-73: a NeMo Gym manifest beside the run -------------------------------------

# A schema-1 manifest with v1's own selection (accepted with schema 1 only, REC-85).
V1 = {
    "schema_version": 1,
    "selection_policy": "latest_dispatched",
    "run_id": FOREIGN_ID,
    "source_digest": "unverified",
    "materialized_digest": "cd" * 32,
    "config_digest": FOREIGN_DIGEST,
    "legacy_import": False,
    "identity_overridden": False,
}
V2 = {**V1, "schema_version": 2, "selection_policy": "latest_allocated",
      "next_attempt": {"0-0": 1, "1-0": 2}}  # fmt: skip


@pytest.mark.parametrize("foreign", [V1, V2], ids=["schema-1", "schema-2"])
def test_rec_73_foreign_manifest_kept_whole(
    tmp_path: Path, foreign: dict[str, Any]
) -> None:
    out = make_run(tmp_path, out=lines(result(0, 0, _ng_run_id=FOREIGN_ID)))
    path = tmp_path / "rollouts_manifest.json"
    path.write_text(json.dumps(foreign, indent=2))
    imported = import_run(out)
    legacy = imported.report.events[1].body
    assert isinstance(legacy, LegacyImported)
    assert legacy.foreign_manifest == foreign
    assert imported.state.run_id == FOREIGN_ID
    assert imported.state.manifest["config_digest"] == FOREIGN_DIGEST
    assert imported.report.rows_imported == 1  # its rows carry its run id
    assert "rollouts_manifest.json" in [s.file for s in legacy.sources]
    assert path.read_text() == json.dumps(foreign, indent=2)


def test_rec_73_without_a_manifest_the_digest_is_unverified(tmp_path: Path) -> None:
    out = make_run(tmp_path, out=lines(result(0, 0)))
    imported = import_run(out)
    assert imported.state.manifest["config_digest"] == "unverified"
    assert re.fullmatch("[0-9a-f]{32}", imported.state.run_id)
    legacy = imported.report.events[1].body
    assert isinstance(legacy, LegacyImported)
    assert legacy.foreign_manifest is None


def test_rec_73_rows_of_another_run_are_rejected(tmp_path: Path) -> None:
    # ID-40: with no manifest, a row stamped with a run id belongs to no run here.
    out = make_run(tmp_path, out=lines(result(0, 0, _ng_run_id=FOREIGN_ID)))
    with pytest.raises(RowError, match=OTHER_RUN):
        import_run(out)


def manifest(**changes: Any) -> bytes:
    """A schema-2 manifest with some fields changed (``None`` drops one)."""
    changed = {**V2, **changes}
    return json.dumps({k: v for k, v in changed.items() if v is not None}).encode()


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"{not json", id="not-json"),
        pytest.param(b"[]", id="array"),
        pytest.param(manifest(schema_version=99), id="schema-99"),
        pytest.param(manifest(schema_version="2"), id="schema-str"),
        pytest.param(manifest(run_id=""), id="empty-run-id"),
        pytest.param(manifest(run_id=None), id="no-run-id"),
        pytest.param(manifest(config_digest="md5:1"), id="digest"),
    ],
)  # fmt: skip
def test_rec_73_unreadable_manifest_refuses_the_import(
    tmp_path: Path, data: bytes
) -> None:
    out = make_run(tmp_path, out=lines(result(0, 0)))
    (tmp_path / "rollouts_manifest.json").write_bytes(data)
    with pytest.raises(CorruptLedger, match=r"rollouts_manifest\.json"):
        import_run(out)
    with pytest.raises(CorruptLedger):
        import_run(out, dry_run=True)
    assert os.listdir(tmp_path / "rollouts_ledger") == ["run.lock"]


# --- REC-74: twice records nothing new; dry run ------------------------------------


def test_rec_74_importing_twice_records_nothing(tmp_path: Path) -> None:
    """REC-74 as REC-86 amends it: a second import adopts what is new, here nothing."""
    out = make_run(tmp_path, out=lines(result(0, 0)))
    import_run(out)
    with Ledger.open(out) as reader:
        head = reader.head()
    for dry_run in (False, True):
        again = import_run(out, dry_run=dry_run).report
        assert again.adopting
        assert again.events == ()
        assert again.rows_imported == 0
    with Ledger.open(out) as reader:
        assert reader.head() == head


def test_rec_74_a_lock_file_alone_does_not_count(tmp_path: Path) -> None:
    out = make_run(tmp_path, out=lines(result(0, 0)))
    RunLock(out).acquire().release()
    assert (tmp_path / "rollouts_ledger" / "run.lock").exists()
    assert import_run(out).report.rows_imported == 1


def test_rec_74_dry_run_writes_nothing_and_matches_the_import(tmp_path: Path) -> None:
    out = make_run(
        tmp_path / "run",
        sidecar=lines(failure(0, 0), failure(1, 1, "judge_failed", response=ANSWER)),
        out=lines(result(0, 0), result(2, 1, reward=0.0), b"<PLACEHOLDER ROW>\n"),
        materialized=False,
    )
    given = tmp_path / "rows.jsonl"
    given.write_bytes(lines(*input_rows()))
    before = files(tmp_path)
    dry = import_run(
        out, inputs=given, skip_rejected=True, dry_run=True, clock=Clock(seed=3)
    )
    assert files(tmp_path) == before
    assert not (tmp_path / "run" / "rollouts_ledger").exists()
    assert dry.report.dry_run is True
    assert dry.report.inputs_copied is True
    real = import_run(out, inputs=given, skip_rejected=True, clock=Clock(seed=3))
    # The same events, byte for byte (the same chain), and the same coverage.
    assert dry.report.events == real.report.events
    assert dry.coverage == real.coverage
    assert dry.coverage.decisions == {
        "pending": 3, "retry": 0, "rejudge": 1, "complete": 2, "held": 0,
        "terminal": 0, "exhausted": 0, "omitted": 0,
    }  # fmt: skip


def test_rec_74_dry_run_refuses_what_the_import_refuses(tmp_path: Path) -> None:
    out = make_run(tmp_path, out=lines(result(0, 0), b"junk\n"))
    with pytest.raises(RowError, match=r"rollouts\.jsonl line 2: not JSON"):
        import_run(out, dry_run=True)
    assert not (tmp_path / "rollouts_ledger").exists()


def test_rec_70_import_legacy_run_alone_writes_no_projections(tmp_path: Path) -> None:
    # ledger writes the log, its manifest and its note of the files it read
    # (issue 30); the projections are import_run's.
    out = make_run(tmp_path, out=lines(result(0, 0)))
    report = import_legacy_run(out)
    folder = tmp_path / "rollouts_ledger"
    assert sorted(os.listdir(folder)) == [
        "ledger.db", "manifest.json", "rows_seen.json", "run.lock"
    ]  # fmt: skip
    with Ledger.open(out) as reader:
        assert replay(reader).as_of_seq == report.events[-1].seq == 3


def test_rec_70_needs_the_held_lock_of_its_own_run(tmp_path: Path) -> None:
    out = make_run(tmp_path / "a", out=lines(result(0, 0)))
    other = make_run(tmp_path / "b", out=lines(result(0, 0)))
    with RunLock(other) as lock, pytest.raises(LedgerError, match="RunLock"):
        import_legacy_run(out, lock=lock)
    with RunLock(out) as lock:
        assert import_run(out, lock=lock).report.rows_imported == 1


# --- CLI-3: rollout-ledger import ---------------------------------------------------


def test_cli_3_prints_rows_rejections_and_coverage(tmp_path: Path) -> None:
    out = make_run(
        tmp_path,
        sidecar=lines(failure(0, 0)),
        out=lines(result(0, 1), b"<PLACEHOLDER ROW>\n", result(1, 0)),
    )
    result_ = invoke(str(out), "--skip-rejected")
    assert result_.exit_code == 0, result_.stderr
    run_id = json.loads((tmp_path / "rollouts_ledger" / "manifest.json").read_bytes())[
        "run_id"
    ]
    assert result_.output == (
        f"import of {out} recorded 5 events in {tmp_path / 'rollouts_ledger'} "
        f"(run {run_id})\n"
        "events: run_created 1, legacy_imported 1, failure_saved 1, result_saved 2\n"
        "rows read: 4, imported: 3, rejected: 1\n"
        "  rollouts.jsonl line 2: a <PLACEHOLDER ROW> line, not a row\n"
        # Issue 28: the coverage in status's words.
        "where the 6 rollouts stand (after event 5; `rollout-ledger explain` says "
        "what each word means):\n"
        "  pending          3\n"
        "  retry            1  (failed 1)\n"
        "  complete         2  (graded 2)\n"
        "  none rejudge, held, terminal, exhausted, omitted\n"
        "tasks: 0 with every rollout complete, 2 partly, 1 with none\n"
        "masked results 0, rollouts suspected of looping on free attempts 0\n"
        "failure kinds of unfinished rollouts: transient 1\n"
        # Issue 28: the command that goes on, whole; --allow-unsafe for the
        # first round of an imported run.
        f"next: rollout-ledger run {out} --config <collection.yaml> --global-config "
        "<servers.yaml> --allow-unsafe -- <your collector command, with {plan} and "
        "{output}> (the first round of an imported run needs --allow-unsafe: the "
        "run has no configuration to compare yours with)\n"
    )


def test_cli_3_json(tmp_path: Path) -> None:
    out = make_run(tmp_path, out=lines(result(0, 0), b"\n"))
    result_ = invoke(str(out), "--json", "--dry-run")
    assert result_.exit_code == 0
    document = json.loads(result_.output)
    assert document["dry_run"] is True
    assert document["rows"] == {"read": 2, "imported": 1, "rejected": 1}
    assert document["rejections"] == [
        {"file": "rollouts.jsonl", "line": 2, "reason": "blank line"}
    ]
    assert document["events"] == {
        "run_created": 1,
        "legacy_imported": 1,
        "result_saved": 1,
    }
    assert document["coverage"]["decisions"]["complete"] == 1
    assert not (tmp_path / "rollouts_ledger").exists()


@pytest.mark.parametrize(
    ("setup", "code", "message"),
    [
        pytest.param("rejected", 3, "rollouts.jsonl line 2: not JSON", id="rejected"),
        # REC-86 with R-7: a second import adopts appended rows, never edited ones.
        pytest.param("edited", 5, "no longer holds the row", id="edited"),
        pytest.param("no-inputs", 3, "--inputs", id="no-inputs"),
        pytest.param("manifest", 5, "rollouts_manifest.json", id="bad-manifest"),
        pytest.param("locked", 4, "is held by", id="locked"),
    ],
)
def test_cli_1_exit_codes(tmp_path: Path, setup: str, code: int, message: str) -> None:
    out = make_run(
        tmp_path,
        out=lines(result(0, 0), b"junk\n" if setup == "rejected" else b""),
        materialized=setup != "no-inputs",
    )
    if setup == "edited":
        import_run(out)
        data = out.read_bytes()
        out.write_bytes(data.replace(b"_ng_task_index", b"_ng_task_indey", 1))
    if setup == "manifest":
        (tmp_path / "rollouts_manifest.json").write_bytes(b"{")
    lock = RunLock(out).acquire() if setup == "locked" else None
    try:
        result_ = invoke(str(out))
    finally:
        if lock is not None:
            lock.release()
    assert result_.exit_code == code
    assert message in result_.stderr
    assert "Traceback" not in result_.stderr


def test_cli_16_help_has_an_example() -> None:
    result_ = CliRunner().invoke(cli(), ["import", "--help"])
    assert result_.exit_code == 0
    assert re.search(r"Example:\n\s+rollout-ledger import ", result_.output)
    for option in ("--inputs", "--skip-rejected", "--dry-run", "--json"):
        assert option in result_.output


def test_rec_70_reported_events_are_the_stored_ones(tmp_path: Path) -> None:
    # What the report returns is what the ledger holds, decoded.
    out = make_run(tmp_path, sidecar=lines(failure(0, 0, _ng_omitted=True,
                   _ng_failure_class="skipped", _ng_failure_message="m")),
                   out=lines(result(0, 1)))  # fmt: skip
    report = import_run(out).report
    with Ledger.open(out) as reader:
        stored = list(reader.events())
    assert stored == list(report.events)
    assert isinstance(stored[2].body, OmissionSaved)
    assert stored[2].body.reason == "m"
    assert msgspec.json.encode(stored[2].body)


def test_cli_3_progress_on_a_terminal_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # cli.md: long work shows a progress bar on a terminal, and only there.
    out = make_run(tmp_path, sidecar=lines(failure(0, 0)), out=lines(result(0, 0)))
    seen: list[tuple[int, int]] = []
    import_run(
        out, dry_run=True, progress=lambda done, total: seen.append((done, total))
    )
    # The materialized inputs count too (a million of them are gigabytes), and
    # the outcome rows twice: read, then appended to the log.
    outcomes = (
        out.stat().st_size + (tmp_path / "rollouts_failures.jsonl").stat().st_size
    )
    size = (tmp_path / "rollouts_materialized_inputs.jsonl").stat().st_size
    size += 2 * outcomes
    assert seen[-1] == (size, size)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    seen.clear()
    import_run(out, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (size, size)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with _progress_bar(quiet=False) as advance:
        assert advance is not None
        advance(size, size)
    assert "importing" in terminal.getvalue()
    with _progress_bar(quiet=True) as advance:
        assert advance is None
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with _progress_bar(quiet=False) as advance:
        assert advance is None


# --- REC-57: an imported run resumes, once --allow-unsafe adopts an identity --------


def test_rec_57_an_imported_run_resumes_with_allow_unsafe(tmp_path: Path) -> None:
    config, global_config, rows = nemo_configuration()
    out = make_run(
        tmp_path,
        inputs=rows,
        sidecar=lines(failure(0, 0), failure(1, 0, "judge_failed", response=ANSWER)),
        out=lines(result(0, 0), result(2, 1)),
    )
    import_run(out)
    with RunLock(out) as lock, Ledger.open(out, lock=lock) as writer:
        with pytest.raises(IdentityMismatch, match="--allow-unsafe"):
            resume(writer, config, global_config)
        resumed = resume(writer, config, global_config, allow_unsafe=True)
    assert resumed.verdict.overridden
    dispatched = [
        (r["_ng_task_index"], r["_ng_rollout_index"]) for r in resumed.plan.dispatch
    ]
    # The imported results stand; (1, 0)'s saved answer is re-judged, never resampled.
    assert dispatched == [(0, 1), (1, 1), (2, 0)]
    assert [(j.task, j.rollout, j.attempt) for j in resumed.plan.rejudge] == [(1, 0, 0)]
    assert all(r["_ng_attempt_index"] == 0 for r in resumed.plan.dispatch)
