"""CLI-10: the operator actions, each under the lock, each printing the plan change.

approve (REC-25, REC-26), reset-budget (REC-16, REC-17), extend-attempts
(REC-11), policy (REC-60).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import Ledger, RunLock
from ledger.events import FailureBudgetReset, PolicyChanged, RerunApproved
from tests.test_cli_support import (
    ACTOR,
    CliRun,
    Templates,
    by_key,
    failed,
    templates,
)

__all__ = ["templates"]

HELD = {
    (0, 1): failed("session_lost", answer=True),  # REC-20.5h: held, kept_answer
    (1, 0): failed("tool_error", answer=True),  # REC-20.5h: held, kept_answer
    (2, 1): failed("session_lost"),  # REC-20.5i: counted, retry
}


def build_held(run: CliRun) -> None:
    run.create()
    run.collect(by_key(HELD))


def build_capped(run: CliRun) -> None:
    run.create("--max-attempts", 1)
    run.collect(by_key({(0, 0): failed("session_lost")}))


@pytest.fixture
def held(tmp_path: Path, templates: Templates) -> CliRun:
    """Two held rollouts, one retry, three complete."""
    return templates("held", tmp_path, build_held)


@pytest.fixture
def capped(tmp_path: Path, templates: Templates) -> CliRun:
    """A run with one attempt per rollout; rollout (0, 0) exhausted its cap."""
    return templates("capped", tmp_path, build_capped, tasks=1, rollouts=1)


def last_events(run: CliRun, count: int) -> list[object]:
    with Ledger.open(run.out) as led:
        stored = list(led.events())
    assert {e.actor for e in stored[-count:]} == {ACTOR}
    return [e.body for e in stored[-count:]]


def head(run: CliRun) -> int:
    with Ledger.open(run.out) as led:
        return led.head()[0]


# -- approve (REC-25, REC-26) --------------------------------------------------------


def test_cli_10_approve_dry_run_lists_every_held_attempt(held: CliRun) -> None:
    before = head(held)
    result = held.ok("approve", held.out, "--all-held", "--reason", "ok", "--dry-run")
    assert result.stdout == (
        "would approve task 0 rollout 1 attempt 0: held: the sandbox session was "
        "lost (infrastructure); kept an answer; waits for an operator's approval\n"
        "would approve task 1 rollout 0 attempt 0: held: failure 'tool_error'; "
        "kept an answer; waits for an operator's approval\n"
    )
    assert head(held) == before


def test_cli_10_approve_all_held_filtered_by_kind(held: CliRun) -> None:
    result = held.ok(
        "approve",
        held.out,
        "--all-held",
        "--failure-kind",
        "tool_error",
        "--held-because",
        "kept_answer",
        "--reason",
        "tool fixed",
    )
    assert result.stdout == (
        "approve task 1 rollout 0 attempt 0: held: failure 'tool_error'; kept an "
        "answer; waits for an operator's approval\n"
        "plan changes (1 rollout):\n"
        "  task 1 rollout 0: held (kept an answer; waits for an operator's "
        "approval, attempt 0) -> retry (counted toward the cap, attempt 1)\n"
        "decisions: held 2 -> 1, retry 1 -> 2\n"
    )
    assert last_events(held, 1) == [
        RerunApproved(task=1, rollout=0, attempt=0, reason="tool fixed")
    ]
    coverage = held.ok("status", held.out, "--json").stdout
    assert '"held": 1' in coverage  # republished


def test_cli_10_approve_one_named_attempt(held: CliRun) -> None:
    result = held.ok(
        "approve",
        held.out,
        "--task",
        0,
        "--rollout",
        1,
        "--attempt",
        0,
        "--reason",
        "ok",
    )
    assert result.stdout.splitlines()[:2] == [
        "approve task 0 rollout 1 attempt 0",
        "plan changes (1 rollout):",
    ]


def test_cli_10_approve_with_no_match_records_nothing(held: CliRun) -> None:
    before = head(held)
    result = held.ok(
        "approve",
        held.out,
        "--all-held",
        "--failure-kind",
        "agent_timeout",
        "--reason",
        "ok",
    )
    assert result.stdout == "no held rollout matches; nothing recorded\n"
    assert head(held) == before


@pytest.mark.parametrize(
    "args",
    [
        ["--task", "0", "--rollout", "1"],  # no attempt
        ["--all-held", "--task", "0", "--rollout", "1", "--attempt", "0"],
        [],
        ["--task", "0", "--rollout", "1", "--attempt", "0", "--failure-kind", "x"],
    ],
)
def test_cli_10_approve_usage_errors_are_exit_2(held: CliRun, args: list[str]) -> None:
    result = held.invoke("approve", held.out, *args, "--reason", "ok")
    assert result.exit_code == 2
    assert "Error: " in result.stderr


def test_cli_10_approve_an_unknown_rollout_is_exit_3(held: CliRun) -> None:
    result = held.invoke(
        "approve",
        held.out,
        "--task",
        7,
        "--rollout",
        0,
        "--attempt",
        0,
        "--reason",
        "ok",
    )
    assert result.exit_code == 3
    assert result.stderr == (
        "rollout-ledger: task 7, rollout 0 is not among this run's rollouts "
        "(approving attempt 0); nothing was recorded\n"
    )


def named(run: CliRun, task: int, rollout: int, attempt: int, *more: str) -> list:
    return [
        "approve", run.out, "--task", task, "--rollout", rollout,
        "--attempt", attempt, "--reason", "ok", *more,
    ]  # fmt: skip


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_cli_10_rec_25_approving_an_attempt_that_does_not_exist_is_refused(
    held: CliRun, dry_run: list[str]
) -> None:
    before = head(held)
    result = held.invoke(*named(held, 0, 1, 5, *dry_run))
    assert result.exit_code == 3, result.stderr
    assert result.stdout == ""
    assert result.stderr == (
        "rollout-ledger: task 0, rollout 1, attempt 5 is not the held attempt: "
        "task 0 rollout 1 holds attempt 0 (kept_answer); nothing was recorded; "
        f"approve that one with `rollout-ledger approve {held.out.resolve()} "
        "--task 0 --rollout 1 --attempt 0 --reason WHY`\n"
    )
    assert head(held) == before


@pytest.mark.parametrize(
    ("task", "rollout", "decision"),
    [(2, 1, "retry (failed, attempt 1)"), (0, 0, "complete (graded, attempt 0)")],
)
def test_cli_10_rec_25_approving_a_rollout_that_is_not_held_is_refused(
    held: CliRun, task: int, rollout: int, decision: str
) -> None:
    before = head(held)
    result = held.invoke(*named(held, task, rollout, 0))
    assert result.exit_code == 3, result.stderr
    assert result.stderr == (
        f"rollout-ledger: task {task}, rollout {rollout}, attempt 0 is not held, so "
        f"there is nothing to approve: the rollout is {decision}; nothing was "
        "recorded; held now: task 0 rollout 1 attempt 0 (kept_answer), task 1 "
        "rollout 0 attempt 0 (kept_answer); list them with `rollout-ledger approve "
        f"{held.out.resolve()} --all-held --reason WHY --dry-run`\n"
    )
    assert head(held) == before
    held.ok(*named(held, 0, 1, 0))  # the held attempt, approved
    again = held.invoke(*named(held, 0, 1, 0))  # now not held: nothing twice
    assert again.exit_code == 3
    assert "task 0, rollout 1, attempt 0 is not held" in again.stderr


# -- reset-budget (REC-16, REC-17) ---------------------------------------------------


def test_cli_10_reset_budget_reopens_an_exhausted_rollout(capped: CliRun) -> None:
    result = capped.ok("reset-budget", capped.out, "--reason", "judge outage")
    assert result.stdout == (
        "reset: sidecar lines < 1 and seq <= 5\n"
        "plan changes (1 rollout):\n"
        "  task 0 rollout 0: exhausted (the attempt cap is reached, attempt 0) -> "
        "retry (counted toward the cap, attempt 1)\n"
        "decisions: exhausted 1 -> 0, retry 0 -> 1\n"
    )
    assert last_events(capped, 1) == [
        FailureBudgetReset(excluded_lines=1, before_seq=5, reason="judge outage")
    ]
    log = (capped.ledger_dir / "failure_budget.log").read_text()
    assert log.startswith("1\t5\t2026-01-01T")
    assert log.endswith("\tjudge outage\n")


def test_rec_16_reset_budget_refuses_a_run_that_does_not_verify(
    capped: CliRun,
) -> None:
    data = bytearray((capped.out.parent / "rollouts_failures.jsonl").read_bytes())
    data[2] ^= 1
    (capped.out.parent / "rollouts_failures.jsonl").write_bytes(bytes(data))
    before = head(capped)
    result = capped.invoke("reset-budget", capped.out, "--reason", "x")
    assert result.exit_code == 5
    assert result.stderr.startswith(
        "rollout-ledger: the run does not verify, so its budget is not reset:\n"
        "  rows: rollouts_failures.jsonl line 1: the row of seq 5 changed"
    )
    assert head(capped) == before


# -- extend-attempts (REC-11) --------------------------------------------------------


def test_cli_10_extend_attempts_raises_the_cap_once(capped: CliRun) -> None:
    result = capped.ok("extend-attempts", capped.out, 2, "--reason", "flaky")
    assert result.stdout == (
        "cap 1 -> 3\n"
        "plan changes (1 rollout):\n"
        "  task 0 rollout 0: exhausted (the attempt cap is reached, attempt 0) -> "
        "retry (counted toward the cap, attempt 1)\n"
        "decisions: exhausted 1 -> 0, retry 0 -> 1\n"
    )
    before = head(capped)
    again = capped.ok("extend-attempts", capped.out, 2, "--reason", "flaky")
    assert again.stdout == "the extension in force is 2 (cap 3); nothing recorded\n"
    assert head(capped) == before


def test_cli_10_extend_attempts_needs_a_positive_total(capped: CliRun) -> None:
    assert (
        capped.invoke("extend-attempts", capped.out, 0, "--reason", "x").exit_code == 2
    )


# -- policy (REC-60) -----------------------------------------------------------------


def test_cli_10_policy_set_json_string_and_dotted_values(held: CliRun) -> None:
    result = held.ok(
        "policy",
        held.out,
        "--set",
        "side_overrides.session_lost=model",
        "--set",
        "max_free_attempts=3",
        "--reason",
        "agent bug",
    )
    assert result.stdout == (
        "policy max_free_attempts: 5 -> 3\n"
        'policy side_overrides.session_lost: null -> "model"\n'
        "plan changes (1 rollout):\n"
        "  task 0 rollout 1: held (kept an answer; waits for an operator's "
        "approval, attempt 0) -> complete (scored zero, the model's own result, "
        "attempt 0)\n"
        "decisions: complete 3 -> 4, held 2 -> 1\n"
    )
    (body,) = last_events(held, 1)
    assert isinstance(body, PolicyChanged)
    assert sorted(body.changes) == ["max_free_attempts", "side_overrides.session_lost"]
    again = held.ok("policy", held.out, "--set", "max_free_attempts=3", "--reason", "x")
    assert again.stdout == "the policy already has these values; nothing recorded\n"


def test_cli_10_an_invalid_policy_value_is_exit_3(held: CliRun) -> None:
    before = head(held)
    result = held.invoke(
        "policy", held.out, "--set", "max_free_attempts=0", "--reason", "x"
    )
    assert result.exit_code == 3
    assert result.stderr.startswith("rollout-ledger: the policy change is not valid")
    assert head(held) == before


def test_cli_10_a_setting_without_a_value_is_exit_2(held: CliRun) -> None:
    result = held.invoke("policy", held.out, "--set", "bogus", "--reason", "x")
    assert result.exit_code == 2
    assert "'bogus' is not KEY=VALUE" in result.stderr


# -- every operator action takes the lock --------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["approve", "--all-held", "--reason", "x"],
        ["reset-budget", "--reason", "x"],
        ["extend-attempts", "4", "--reason", "x"],
        ["policy", "--set", "max_free_attempts=2", "--reason", "x"],
        ["status", "--publish"],
    ],
)
def test_cli_10_operator_actions_are_exit_4_while_the_lock_is_held(
    held: CliRun, args: list[str]
) -> None:
    before = head(held)
    with RunLock(held.out):
        result = held.invoke(args[0], held.out, *args[1:])
    assert result.exit_code == 4
    assert "the run lock" in result.stderr
    assert head(held) == before


def test_rec_16_a_lost_published_file_does_not_block_a_reset(capped: CliRun) -> None:
    (capped.ledger_dir / "coverage.json").unlink()
    capped.ok("reset-budget", capped.out, "--reason", "x")
    assert (capped.ledger_dir / "coverage.json").is_file()  # republished
