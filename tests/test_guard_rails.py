"""Guard rails (issue 16): typos, no-op approvals, validation and edited rows.

A typo in a filter is refused with the valid names, never matched against
nothing in silence (REC-26, CLI-8, REC-60); an approval of a rollout that is
not held records nothing (REC-25); a bad policy value is one plain line per
field (REC-60, REC-61); a mistyped ``OUT`` is missing, not corrupt (CLI-1);
a row edited after it was recorded is warned about by ``status`` and refused
by ``results`` (R-7). Each through the command line, as a user meets it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ledger import Ledger
from tests.test_cli_support import CliRun, Templates, by_key, failed, templates

__all__ = ["templates"]

#: Two held rollouts (kept answers), one retry, three complete.
HELD = {
    (0, 1): failed("session_lost", answer=True),
    (1, 0): failed("tool_error", answer=True),
    (2, 1): failed("session_lost"),
}


def _build(run: CliRun) -> None:
    run.create()
    run.collect(by_key(HELD))


@pytest.fixture
def held(tmp_path: Path, templates: Templates) -> CliRun:
    return templates("guard_held", tmp_path, _build)


def _head(run: CliRun) -> tuple[int, bytes]:
    with Ledger.open(run.out) as led:
        return led.head()


def _files(run: CliRun) -> dict[str, str]:
    """The run's collector files by SHA-256 (the log is compared by its head)."""
    folder = run.out.parent
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.glob("*.jsonl"))
    }


def _no_pydantic_dump(text: str) -> None:
    assert "pydantic" not in text
    assert "http" not in text
    assert "validation error for" not in text
    assert "[type=" not in text


# -- unknown names, refused with the valid ones ---------------------------------


def test_rec26_approve_unknown_reason_held_is_refused_with_the_reasons(
    held: CliRun,
) -> None:
    """REC-26: ``--held-because nonsense`` is exit 3 listing the held reasons."""
    before = _head(held)
    result = held.invoke(
        "approve", held.out, "--all-held", "--held-because", "nonsense",
        "--reason", "ok",
    )  # fmt: skip
    assert result.exit_code == 3
    assert "'nonsense' is not a reason a rollout is held for" in result.stderr
    for reason in ("masked_without_artifact", "kept_answer", "route_kept_response"):
        assert reason in result.stderr
    assert result.stdout == ""
    assert _head(held) == before


def test_rec26_approve_unknown_kind_is_refused_with_the_kinds(held: CliRun) -> None:
    """REC-26, REC-80: ``--failure-kind nonsense`` lists the kinds and the run's
    classes."""
    before = _head(held)
    result = held.invoke(
        "approve", held.out, "--all-held", "--failure-kind", "nonsense",
        "--reason", "ok", "--dry-run",
    )  # fmt: skip
    assert result.exit_code == 3
    assert "'nonsense' is neither a registered failure kind" in result.stderr
    assert "session_lost" in result.stderr  # a registered kind
    assert "other failure classes in this run: tool_error" in result.stderr
    assert _head(held) == before
    # A class the run's rows carry is a kind to filter by.
    kept = held.ok(
        "approve", held.out, "--all-held", "--failure-kind", "tool_error",
        "--reason", "ok", "--dry-run",
    )  # fmt: skip
    assert "task 1 rollout 0" in kept.stdout


def test_cli8_history_unknown_kind_is_refused_with_the_event_kinds(
    held: CliRun,
) -> None:
    """CLI-8: ``history --event nonsense`` is exit 3 listing the event kinds."""
    result = held.invoke("history", held.out, "--event", "nonsense")
    assert result.exit_code == 3
    assert "'nonsense' is not an event kind" in result.stderr
    assert "failure_saved" in result.stderr
    assert "rerun_approved" in result.stderr
    assert result.stdout == ""


def test_rec60_policy_unknown_key_stays_refused_with_the_settings(
    held: CliRun,
) -> None:
    """REC-60: an unknown policy key stays refused (exit 3) with the settings."""
    before = _head(held)
    result = held.invoke("policy", held.out, "--set", "nonsense=1", "--reason", "x")
    assert result.exit_code == 3
    assert "the policy has no setting 'nonsense'" in result.stderr
    assert "fault_share" in result.stderr
    assert _head(held) == before


# -- approvals that would record a no-op ----------------------------------------


def test_rec25_approving_a_complete_rollout_is_refused_recording_nothing(
    held: CliRun,
) -> None:
    """REC-25: a complete rollout is not held: exit 3, nothing recorded."""
    before, files = _head(held), _files(held)
    result = held.invoke(
        "approve", held.out, "--task", 0, "--rollout", 0, "--attempt", 0,
        "--reason", "ok",
    )  # fmt: skip
    assert result.exit_code == 3
    assert "is not held, so there is nothing to approve" in result.stderr
    assert "the rollout is complete" in result.stderr
    assert "nothing was recorded" in result.stderr
    assert _head(held) == before
    assert _files(held) == files


# -- validation errors in plain words -------------------------------------------


@pytest.mark.parametrize(
    ("setting", "line"),
    [
        ("fault_share=abc", "fault_share: must be a number above 0 and at most 1; "
         "got 'abc'"),
        ("fault_share=2", "fault_share: must be a number above 0 and at most 1; "
         "got 2"),
        ("retry_terminal_timeouts=maybe", "retry_terminal_timeouts: must be true or "
         "false; got 'maybe'"),
        ("side_overrides.session_lost=sky", "side_overrides.session_lost: must be "
         "'evaluation' or 'model'; got 'sky'"),
        ("regrade_kinds=3", "regrade_kinds: must be a list of strings; got 3"),
    ],
)  # fmt: skip
def test_rec60_policy_value_error_is_one_plain_line_per_field(
    held: CliRun, setting: str, line: str
) -> None:
    """REC-60: a bad value is the field, what it must be and the value; no URL."""
    before = _head(held)
    result = held.invoke("policy", held.out, "--set", setting, "--reason", "x")
    assert result.exit_code == 3
    assert result.stderr == (
        f"rollout-ledger: the policy change is not valid: {line}\n"
    )
    _no_pydantic_dump(result.stderr)
    assert _head(held) == before


def test_rec61_policy_file_errors_are_one_plain_line_per_field(
    tmp_path: Path,
) -> None:
    """REC-61: ``create --policy FILE``: one line per bad field, nothing created."""
    run = CliRun(tmp_path)
    policy = tmp_path / "policy.json"
    policy.write_text(
        json.dumps({"fault_share": "abc", "max_free_attempts": 0, "bogus": 1})
    )
    result = run.invoke(
        "create", run.out, "--inputs", run.inputs, *run.config_args(),
        "--policy", policy,
    )  # fmt: skip
    assert result.exit_code == 3
    assert result.stderr.splitlines()[1:] == [
        "  fault_share: must be a number above 0 and at most 1; got 'abc'",
        "  max_free_attempts: must be a whole number from 1 to 1000000; got 0",
        "  bogus: is not a known field",
    ]
    assert f"the policy in {policy} is not valid: 3 problems:" in result.stderr
    _no_pydantic_dump(result.stderr)
    assert not (run.ledger_dir / "ledger.db").exists()


# -- a missing OUT ----------------------------------------------------------------


def test_cli1_mistyped_out_is_named_missing_with_the_nearest_run(
    held: CliRun,
) -> None:
    """CLI-1: a mistyped OUT is a refusal (exit 3), not corrupt work (exit 5)."""
    typo = held.out.with_name("rollout.jsonl")
    for args in (
        ("status", typo),
        ("approve", typo, "--all-held", "--reason", "ok"),  # a writer too
    ):
        result = held.invoke(*args)
        assert result.exit_code == 3, result.stderr
        assert result.stderr == (
            f"rollout-ledger: no run at {typo}: the file and its ledger folder "
            f"rollout_ledger/ do not exist; did you mean {held.out}?\n"
        )
        assert "corrupt" not in result.stderr
    assert not (held.out.parent / "rollout_ledger").exists()  # no lock folder made


def test_cli1_missing_out_in_a_mistyped_folder_finds_the_run_beside_it(
    held: CliRun,
) -> None:
    """CLI-1: ``result/rollouts.jsonl`` for ``results/...`` names the run beside it."""
    typo = held.out.parent.with_name("result") / "rollouts.jsonl"
    result = held.invoke("history", typo)
    assert result.exit_code == 3
    assert f"did you mean {held.out}?" in result.stderr


def test_cli1_missing_out_with_no_run_nearby_says_how_to_make_one(
    tmp_path: Path,
) -> None:
    """CLI-1: with no run near, the refusal names create and import."""
    out = tmp_path / "nothing" / "here.jsonl"
    result = CliRun(tmp_path).invoke("check", out)
    assert result.exit_code == 3
    assert f"no run at {out}" in result.stderr
    assert "`rollout-ledger create` or `rollout-ledger import`" in result.stderr


# -- rows edited after they were recorded -----------------------------------------


def _edit_a_reward(run: CliRun) -> int:
    """Set the first graded row's reward in OUT to 9.0; its line number."""
    lines = run.out.read_text(encoding="utf-8").splitlines(keepends=True)
    for number, line in enumerate(lines, start=1):
        row = json.loads(line)
        if row.get("reward") == 1.0:
            lines[number - 1] = line.replace('"reward":1.0', '"reward":9.0')
            assert lines[number - 1] != line
            run.out.write_text("".join(lines), encoding="utf-8")
            return number
    raise AssertionError("no graded row")


def test_r7_status_warns_on_stderr_when_a_row_changed(held: CliRun) -> None:
    """R-7: status names the edited row's file and line on stderr; exit 0."""
    assert held.ok("status", held.out).stderr == ""
    line = _edit_a_reward(held)
    result = held.invoke("status", held.out)
    assert result.exit_code == 0
    assert f"rollout-ledger: warning: {held.out} line {line} (task " in result.stderr
    assert "changed since it was recorded" in result.stderr
    assert "changed" not in result.stdout
    json_result = held.invoke("status", held.out, "--json")  # stdout stays JSON
    assert json.loads(json_result.stdout)
    assert "changed since it was recorded" in json_result.stderr


def test_r7_results_refuses_a_changed_row_unless_allow_changed(held: CliRun) -> None:
    """R-7: results exits 5 naming file and line; -o FILE is not written."""
    line = _edit_a_reward(held)
    selected = held.folder / "selected.jsonl"
    result = held.invoke("results", held.out, "-o", selected)
    assert result.exit_code == 5
    assert f"{held.out} line {line} (task " in result.stderr
    assert "so it is not written" in result.stderr
    assert "--allow-changed" in result.stderr
    assert not selected.exists()
    assert list(held.folder.glob(".selected.jsonl*")) == []  # no partial file left
    allowed = held.invoke("results", held.out, "-o", selected, "--allow-changed")
    assert allowed.exit_code == 0
    assert "rollout-ledger: warning:" in allowed.stderr
    assert len(selected.read_text().splitlines()) == 3  # every complete rollout
