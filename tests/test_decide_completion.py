"""REC-60, REC-40, REC-41: the policy in force on replay, completion and coverage.

Histories are written and decisions asserted as in ``tests/test_decide.py``.
"""

from __future__ import annotations

import pytest

from ledger import (
    RecoveryIncomplete,
    RecoveryPolicy,
)
from projections import (
    check_complete,
    coverage,
    decide,
    decide_all,
)
from tests.helpers_decide import (
    JUDGE_FAILED,
    routed,
    shape,
)
from tests.helpers_history import (
    ANSWER,
    History,
    agent_timeout,
    calls,
    failure,
    graded,
    legacy_failure,
    masked,
    omission,
    unscored,
)

# -- REC-60: the policy in force at the head applies on replay -------------------------


def test_rec_60_a_policy_change_applies_to_every_outcome_on_replay(history) -> None:
    run = history(rollouts=2)
    run.attempt(agent_timeout(answer=False, terminal=True), 0, 0)
    run.attempt(failure("session_lost", answer=True), 0, 1)
    assert shape(run.decide(0, 0)) == ("terminal", 0, "REC-20.5b", "terminal")
    assert shape(run.decide(0, 1)) == ("held", 0, "REC-20.5h", "kept_answer")
    run.set_policy(retry_terminal_timeouts=True, side_overrides__session_lost="model")
    assert shape(run.decide(0, 0)) == ("retry", 1, "REC-20.5i", "failed")
    assert shape(run.decide(0, 1)) == ("complete", 0, "REC-20.5h", "settled_zero")
    assert run.state().policy_changes == 1
    run.set_policy(retry_terminal_timeouts=False)
    assert shape(run.decide(0, 0)) == ("terminal", 0, "REC-20.5b", "terminal")


def test_rec_60_policy_override_is_what_if_and_writes_nothing(history) -> None:
    run = history()
    run.attempt(agent_timeout(answer=False, terminal=True))
    head = run.led.head()
    what_if = run.state(policy=RecoveryPolicy(retry_terminal_timeouts=True))
    assert shape(decide(what_if, 0, 0)) == ("retry", 1, "REC-20.5i", "failed")
    assert run.led.head() == head
    assert shape(run.decide()) == ("terminal", 0, "REC-20.5b", "terminal")


def test_rec_60_the_fault_share_moves_a_timeout_between_5a_and_5c(history) -> None:
    row = failure(
        "agent_timeout",
        answer=True,
        elapsed_seconds=100.0,
        **calls(503, 503, 503, 200, latency_ms=10_000.0),
    )
    run = history()
    run.attempt(row)  # 30 s of faults in a 100 s window: below the default 0.5
    assert run.decide().rule == "REC-20.5a"
    run.set_policy(fault_share=0.25)
    assert shape(run.decide()) == ("retry", 1, "REC-20.5c", "failed")


# -- REC-40, REC-41: completion and coverage -------------------------------------------


def _mixed_run(run: History) -> None:
    """One rollout per decision value and most reasons, tasks 0..4 x 4 rollouts."""
    run.attempt(graded(), 0, 0)
    run.attempt(unscored(), 0, 1)
    run.attempt(agent_timeout(), 0, 2)
    run.attempt(agent_timeout(grade=0.5), 0, 3)
    run.attempt(legacy_failure("transient"), 1, 0)
    run.attempt(failure("cancelled"), 1, 1)
    run.kill(1, 2)
    run.attempt(JUDGE_FAILED, 1, 3)
    run.attempt(masked("session_lost", answer=True), 2, 0)
    run.attempt(routed("delivered", response=dict(ANSWER)), 2, 1)
    run.attempt(failure("session_lost", answer=True), 2, 2)
    run.attempt(omission(), 2, 3)
    run.attempt(legacy_failure("transient", terminal=True), 3, 0)
    run.attempt(omission(), 3, 1)
    run.attempt(graded(0.0), 3, 2)
    for _ in range(2):
        run.attempt(masked("session_lost", answer=False), 3, 3)
    # task 4 is left pending


def test_rec_41_coverage_adds_up_and_each_split_to_its_decision(history) -> None:
    run = history(tasks=5, rollouts=4, cap=2)
    _mixed_run(run)
    state = run.state()
    decisions = decide_all(state)
    report = coverage(state, decisions).to_dict()
    assert report == coverage(state).to_dict()
    assert report["as_of_seq"] == run.head_seq()
    assert report["expected"] == 20 == sum(report["decisions"].values())
    for value in ("complete", "retry", "held", "exhausted", "omitted"):
        assert sum(report[value].values()) == report["decisions"][value], value
    assert report["decisions"] == {
        "pending": 4,
        "retry": 3,
        "rejudge": 1,
        "complete": 5,
        "held": 4,
        "terminal": 1,
        "exhausted": 1,
        "omitted": 1,
    }
    assert report["complete"] == {
        "graded": 2,
        "graded_failure": 1,
        "settled_zero": 1,
        "rejudged": 0,
        "infra_cut": 0,
        "unscored": 1,
    }
    assert report["retry"] == {"unknown": 1, "free": 1, "failed": 1}
    assert report["held"] == {
        "masked_without_artifact": 1,
        "route_kept_response": 1,
        "kept_answer": 1,
        "unaccepted_omission": 1,
    }
    assert report["exhausted"] == {"cap": 1, "free_attempts": 0}
    assert report["omitted"] == {"accepted": 1}
    assert report["masked"] == 2
    assert report["tasks"] == {"complete": 1, "partial": 1, "none": 3}
    # Everything not complete, by its selected kind (omitted ones included).
    assert report["failure_kinds"] == {
        "agent_request_failed": 1,
        "cancelled": 1,
        "judge_failed": 1,
        "session_lost": 3,
        "skipped": 2,
        "transient": 2,
    }
    assert report["totals"]["attempts_reserved"] == 17
    assert report["totals"]["outcomes"] == 16


def test_rec_40_check_complete_passes_when_all_are_complete_or_omitted(
    history,
) -> None:
    run = history(rollouts=2)
    run.attempt(graded(), 0, 0)
    run.attempt(omission(), 0, 1)
    check_complete(run.state())


@pytest.mark.parametrize(
    ("rows", "retryable", "command"),
    [
        pytest.param([], True, "rollout-ledger run OUT", id="pending"),
        pytest.param(
            [legacy_failure("transient")], True, "rollout-ledger run OUT", id="retry"
        ),
        pytest.param([JUDGE_FAILED], True, "rollout-ledger run OUT", id="rejudge"),
        pytest.param(
            [failure("session_lost", answer=True)],
            False,
            "rollout-ledger status OUT",  # each held rollout with its commands
            id="held",
        ),
        pytest.param(
            [legacy_failure("transient", terminal=True)],
            False,
            "rollout-ledger history",
            id="terminal",
        ),
        pytest.param(
            [legacy_failure("transient")] * 2,
            False,
            "rollout-ledger extend-attempts",
            id="exhausted",
        ),
    ],
)
def test_rec_40_check_complete_says_whether_a_resume_can_help(
    history, rows, retryable: bool, command: str
) -> None:
    run = history(rollouts=2, cap=2)
    run.attempt(graded(), 0, 1)
    for row in rows:
        run.attempt(row)
    with pytest.raises(RecoveryIncomplete) as caught:
        check_complete(run.state())
    assert caught.value.retryable is retryable
    assert isinstance(caught.value, RuntimeError)
    assert "1 of 2 rollouts" in str(caught.value)
    assert command in str(caught.value)
