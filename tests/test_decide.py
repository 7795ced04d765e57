"""REC-1..REC-41: recording outcomes, replaying the log, and deciding each rollout.

Every history is written through the public API (``tests/helpers_history.py``):
a run is created, ``replan`` releases attempts, a collector reserves and records
real rows, and operator events are appended as ``resume`` will append them.
Each decision is asserted as ``(value, attempt, rule, reason)``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger import (
    ConfigError,
    CorruptLedger,
    LedgerError,
    RecoveryIncomplete,
    RecoveryPolicy,
    max_rollout_attempts,
    row_facts,
)
from ledger.events import AttemptsExtended, Location, ResultSaved
from projections import (
    Decision,
    Plan,
    check_complete,
    coverage,
    decide,
    decide_all,
    excluded_sidecar_lines,
)
from tests.helpers_history import (
    ANSWER,
    PLACEHOLDER,
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
from tests.internals import rendered_files

Shape = tuple[str, int, str, str]
Factory = Callable[..., History]


@pytest.fixture
def history(tmp_path: Path) -> Iterator[Factory]:
    """Make temporary runs (``History``); each is closed after the test."""
    made: list[History] = []

    def factory(**options: Any) -> History:
        folder = tmp_path / f"run{len(made)}"
        folder.mkdir()
        made.append(History(folder, **options))
        return made[-1]

    yield factory
    for run in made:
        run.close()


def shape(decision: Decision) -> Shape:
    return (decision.value, decision.attempt, decision.rule, decision.reason)


def dispatched(plan: Plan) -> set[tuple[int, int, int]]:
    return {
        (r["_ng_task_index"], r["_ng_rollout_index"], r["_ng_attempt_index"])
        for r in plan.dispatch
    }


def rejudged(plan: Plan) -> set[tuple[int, int, int]]:
    return {(item.task, item.rollout, item.attempt) for item in plan.rejudge}


def totals(run: History) -> dict[str, int]:
    result: dict[str, int] = coverage(run.state()).to_dict()["totals"]
    return result


# -- REC-20.1: no attempt, or an attempt without outcome ------------------------------


def test_rec_20_1_no_attempt_is_pending_and_dispatches_attempt_0(history) -> None:
    run = history()
    assert shape(run.decide()) == ("pending", 0, "REC-20.1", "pending")
    assert dispatched(run.replan()) == {(0, 0, 0)}


def test_rec_20_1_reserved_without_outcome_is_a_free_retry(history) -> None:
    run = history()
    run.reserve()
    assert shape(run.decide()) == ("retry", 1, "REC-20.1", "unknown")
    assert dispatched(run.replan()) == set()  # REC-3: in flight, never released
    run.resume_started()
    assert dispatched(run.replan()) == {(0, 0, 1)}
    assert totals(run)["counted_failures"] == 0  # REC-4: reserving is free


# -- REC-20.2, REC-35: omissions -------------------------------------------------------


def test_rec_20_2_omission_without_a_complete_rollout_is_held(history) -> None:
    run = history(rollouts=2)
    run.attempt(omission(), 0, 0)
    run.attempt(legacy_failure("transient"), 0, 1)
    assert shape(run.decide(0, 0)) == ("held", 0, "REC-20.2", "unaccepted_omission")
    assert shape(decide_all(run.state())[0, 0]) == shape(run.decide(0, 0))
    with pytest.raises(RecoveryIncomplete):
        check_complete(run.state())


def test_rec_35_omission_is_accepted_when_a_sibling_is_complete(history) -> None:
    run = history(rollouts=2)
    run.attempt(omission(), 0, 0)
    run.attempt(graded(0.5), 0, 1)
    state = run.state()
    assert shape(decide(state, 0, 0)) == ("omitted", 0, "REC-35", "accepted")
    assert decide_all(state)[0, 0] == decide(state, 0, 0)
    report = coverage(state).to_dict()
    assert report["omitted"] == {"accepted": 1}
    assert report["complete"]["graded"] == 1  # no score is invented for it
    check_complete(state)


def test_rec_35_a_complete_rollout_of_another_task_accepts_nothing(history) -> None:
    run = history(tasks=2)
    run.attempt(omission(), 0, 0)
    run.attempt(graded(), 1, 0)
    assert run.decide(0, 0).reason == "unaccepted_omission"


def test_rec_25_an_approval_reopens_a_held_omission(history) -> None:
    run = history()
    run.attempt(omission())
    run.approve(0, 0, 0)
    assert shape(run.decide()) == ("retry", 1, "REC-25", "failed")
    assert dispatched(run.replan()) == {(0, 0, 1)}


def test_rec_35_an_approved_omission_alongside_a_complete_rollout_is_accepted(
    history,
) -> None:
    # decide and decide_all agree: REC-25 reopens only a held omission.
    run = history(rollouts=2)
    run.attempt(omission(), 0, 1)
    run.approve(0, 1, 0)
    run.attempt(graded(), 0, 0)
    state = run.state()
    assert shape(decide(state, 0, 1)) == ("omitted", 0, "REC-35", "accepted")
    assert decide_all(state)[0, 1] == decide(state, 0, 1)


# -- REC-20.3, REC-30..REC-33: judge admissions ----------------------------------------

JUDGE_FAILED = failure("judge_failed", stage="verification", answer=True)


def test_rec_20_3_open_admission_is_rejudged_again_after_a_resume(history) -> None:
    run = history()
    run.attempt(JUDGE_FAILED)
    run.admit()
    assert shape(run.decide()) == ("rejudge", 0, "REC-20.3", "open_admission")
    assert run.decide().kind == "judge_failed"  # REC-41: the selected kind
    assert coverage(run.state()).to_dict()["failure_kinds"] == {"judge_failed": 1}
    plan = run.replan()  # REC-3: admitted since the latest resume: in flight
    assert (dispatched(plan), rejudged(plan)) == (set(), set())
    run.resume_started()  # REC-33: cut off; judge-only calls are safe to repeat
    assert shape(run.decide()) == ("rejudge", 0, "REC-20.3", "open_admission")
    assert rejudged(run.replan()) == {(0, 0, 0)}
    run.admit()  # a new release admits again


def test_rec_20_3_graded_admission_completes_with_its_grade(history) -> None:
    run = history()
    run.attempt(JUDGE_FAILED)
    run.rejudge({"reward": 0.5, "response": dict(ANSWER)})
    decision = run.decide()
    assert shape(decision) == ("complete", 0, "REC-20.3", "rejudged")
    assert decision.score == 0.5
    assert coverage(run.state()).to_dict()["complete"]["rejudged"] == 1


def test_rec_31_the_newest_closed_graded_admission_is_the_grade(history) -> None:
    run = history(cap=5)
    run.attempt(JUDGE_FAILED)
    run.rejudge(legacy_failure("judge_failed"))
    run.rejudge({"reward": 0.25})
    assert (run.decide().value, run.decide().score) == ("complete", 0.25)


def test_rec_20_3_failed_admission_is_counted_then_exhausted(history) -> None:
    # REC-32: the 5g outcome counts 1, each failed judgment 1 more; cap 3.
    run = history(cap=3)
    run.attempt(JUDGE_FAILED)
    run.rejudge(legacy_failure("judge_failed"))
    assert shape(run.decide()) == ("rejudge", 0, "REC-20.3", "judge_failed")
    run.rejudge(failure("judge_unparseable", stage="verification"))
    assert shape(run.decide()) == ("exhausted", 0, "REC-20.3", "cap")
    assert totals(run)["counted_failures"] == 3
    plan = run.replan()
    assert (dispatched(plan), rejudged(plan)) == (set(), set())  # model never called


def test_rec_30_save_judgment_routes_graded_to_out_and_failed_to_sidecar(
    history,
) -> None:
    run = history(rollouts=2)
    run.attempt(JUDGE_FAILED, 0, 0)
    run.attempt(JUDGE_FAILED, 0, 1)
    out, sidecar = run.led.paths.out, run.led.paths.sidecar
    before = (
        len(out.read_bytes().splitlines()) if out.exists() else 0,
        run.sidecar_lines(),
    )
    graded_admission = run.rejudge({"reward": 1.0}, 0, 0)
    run.rejudge({"reward": 1.0, "mask_sample": True}, 0, 1)  # masked: not graded
    assert len(out.read_bytes().splitlines()) == before[0] + 1
    assert run.sidecar_lines() == before[1] + 1
    assert graded_admission.admission_id in out.read_text()
    assert sidecar.exists()
    assert run.decide(0, 0).reason == "rejudged"
    assert run.decide(0, 1).reason == "judge_failed"


def test_rec_3_admitting_a_rejudgment_not_released_is_a_config_error(history) -> None:
    run = history()
    run.attempt(graded())
    with pytest.raises(ConfigError, match="not released for re-judgment"):
        run.led.admit_judgment(0, 0, 0, "judge-1")


# -- REC-20.4: result rows -------------------------------------------------------------


def test_rec_20_4a_masked_regrade_kind_is_rejudged_never_dispatched(history) -> None:
    run = history(cap=2)
    run.attempt(masked("judge_failed", answer=True, stage="verification"))
    assert shape(run.decide()) == ("rejudge", 0, "REC-20.4a", "regrade")
    plan = run.replan()
    assert (dispatched(plan), rejudged(plan)) == (set(), {(0, 0, 0)})


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(masked("judge_failed", answer=True), id="judge-failed"),
        pytest.param(masked("judge_unparseable", answer=True), id="judge-unparseable"),
        pytest.param(
            masked("transport_timeout", answer=True, stage="verification"),
            id="transport-verify-call",
        ),
    ],
)
def test_rec_20_4a_masked_regrade_kind_at_the_cap_is_exhausted(history, row) -> None:
    run = history(cap=1)
    run.attempt(row)
    assert shape(run.decide()) == ("exhausted", 0, "REC-20.4a", "cap")


@pytest.mark.parametrize(
    ("kind", "stage"),
    [
        ("session_lost", "agent"),
        ("provider_unavailable", "seed"),
        ("environment_server_failed", "agent"),
        ("verifier_error", "verification"),
    ],
)
def test_rec_20_4b_masked_infrastructure_retries_and_is_superseded(
    history, kind: str, stage: str
) -> None:
    # REC-22: counts one failed attempt; a later attempt supersedes it.
    run = history()
    run.attempt(masked(kind, answer=False, stage=stage))
    assert shape(run.decide()) == ("retry", 1, "REC-20.4b", "failed")
    assert totals(run)["counted_failures"] == 1
    run.attempt(graded(0.75))
    decision = run.decide()
    assert shape(decision) == ("complete", 1, "REC-20.4e", "graded")
    assert decision.score == 0.75


def test_rec_20_4b_masked_infrastructure_at_the_cap_is_exhausted(history) -> None:
    run = history(cap=2)
    run.attempt(masked("session_lost", answer=False))
    run.attempt(masked("session_lost", answer=False))
    assert shape(run.decide()) == ("exhausted", 1, "REC-20.4b", "cap")
    assert dispatched(run.replan()) == set()


def test_rec_20_4c_masked_kept_answer_is_held_until_its_attempt_is_approved(
    history,
) -> None:
    run = history()
    run.attempt(masked("session_lost", answer=False))  # 4b: retried
    run.attempt(masked("session_lost", answer=True))  # 4c: a saved answer
    held = ("held", 1, "REC-20.4c", "masked_without_artifact")
    assert shape(run.decide()) == held
    assert dispatched(run.replan()) == set()
    run.approve(0, 0, 0)  # an approval of an older attempt reopens nothing
    assert shape(run.decide()) == held
    assert dispatched(run.replan()) == set()
    run.approve(0, 0, 1)  # REC-25: exactly this attempt
    assert shape(run.decide()) == ("retry", 2, "REC-25", "failed")
    assert dispatched(run.replan()) == {(0, 0, 2)}


def test_rec_25_an_approval_never_reopens_a_later_attempt(history) -> None:
    run = history()
    run.attempt(masked("session_lost", answer=True))
    run.approve(0, 0, 0)
    run.attempt(masked("session_lost", answer=True))
    assert shape(run.decide()) == ("held", 1, "REC-20.4c", "masked_without_artifact")


def test_rec_25_an_approved_held_outcome_at_the_cap_is_exhausted(history) -> None:
    run = history(cap=2)
    run.attempt(masked("session_lost", answer=False))
    run.attempt(masked("session_lost", answer=True))
    run.approve(0, 0, 1)
    assert shape(run.decide()) == ("exhausted", 1, "REC-25", "cap")
    run.extend(1)  # extend the attempts to go further
    assert shape(run.decide()) == ("retry", 2, "REC-25", "failed")


def test_rec_25_an_approval_never_changes_a_rejudge(history) -> None:
    run = history()
    run.attempt(JUDGE_FAILED)
    run.approve(0, 0, 0)
    assert shape(run.decide()) == ("rejudge", 0, "REC-20.5g", "regrade")
    assert dispatched(run.replan()) == set()


def test_rec_24_a_judge_admission_regrades_a_masked_kept_answer(history) -> None:
    run = history()
    run.attempt(masked("session_lost", answer=True))
    run.release(rejudge=[(0, 0, 0)])  # a re-verification cause: branch 3
    run.led.admit_judgment(0, 0, 0, "judge-1")
    assert shape(run.decide()) == ("rejudge", 0, "REC-20.3", "open_admission")


@pytest.mark.parametrize(
    ("row", "score"),
    [
        pytest.param(
            graded(0.25, agent_timeout_error=True, **calls(200, 503)), 0.25, id="graded"
        ),
        pytest.param(
            unscored(agent_timeout_error=True, **calls(200, 503)), None, id="no-grade"
        ),
    ],
)
def test_rec_20_4d_infrastructure_timeout_result_retries_then_infra_cut(
    history, row, score
) -> None:
    run = history(cap=2)
    run.attempt(row)
    assert shape(run.decide()) == ("retry", 1, "REC-20.4d", "failed")
    run.attempt(row)
    decision = run.decide()
    if score is None:
        assert shape(decision) == ("exhausted", 1, "REC-20.4d", "cap")
    else:
        assert shape(decision) == ("complete", 1, "REC-20.4d", "infra_cut")
        assert decision.score == score


@pytest.mark.parametrize(
    ("row", "reason", "score"),
    [
        pytest.param(graded(1.0), "graded", 1.0, id="graded"),
        pytest.param(graded(0.0), "graded", 0.0, id="graded-zero"),
        pytest.param(unscored(), "unscored", None, id="unscored"),
        pytest.param(
            graded(0.5, agent_timeout_error=True),
            "graded",
            0.5,
            id="clean-harbor-timeout",
        ),
        # ROW-44: a masked row stays the result when ...
        pytest.param(
            masked("session_lost", answer=True, grade=0.5, reward=0.5),
            "graded",
            0.5,
            id="masked-with-a-recorded-grade",
        ),
        pytest.param(
            masked("session_release_failed", answer=True, stage="cleanup", reward=1.0),
            "graded",
            1.0,
            id="masked-cleanup",
        ),
        pytest.param(
            masked(
                "session_lost", answer=False, reward=0.0, _ng_mask_owner="token_capture"
            ),
            "graded",
            0.0,
            id="masked-by-another-owner",
        ),
        pytest.param(
            masked("agent_command_not_allowed", answer=False),
            "graded",
            0.0,
            id="masked-model-kind",
        ),
        pytest.param(
            masked("mytool:crash", answer=True),
            "graded",
            0.0,
            id="masked-namespaced-kind",
        ),
        pytest.param(
            {**masked("session_lost", answer=False), "failure_kind": None},
            "graded",
            0.0,
            id="masked-without-kind",
        ),
    ],
)
def test_rec_20_4e_a_result_stands(history, row, reason, score) -> None:
    run = history()
    run.attempt(row)
    decision = run.decide()
    assert shape(decision) == ("complete", 0, "REC-20.4e", reason)
    assert decision.score == score
    assert dispatched(run.replan()) == set()


# -- REC-20.5: failure rows ------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "reason", "score"),
    [
        pytest.param(agent_timeout(), "settled_zero", 0.0, id="settled-zero"),
        pytest.param(agent_timeout(grade=0.5), "graded_failure", 0.5, id="graded"),
        pytest.param(
            agent_timeout(terminal=True), "settled_zero", 0.0, id="stamped-terminal"
        ),
        pytest.param(
            legacy_failure("timeout_exceeded", terminal=True, answer=True),
            "settled_zero",
            0.0,
            id="legacy-timeout-exceeded",
        ),
        pytest.param(
            failure("agent_timeout", response={"output": [], "status": "incomplete"}),
            "settled_zero",
            0.0,
            id="empty-but-finished",
        ),
    ],
)
@pytest.mark.parametrize("retry_terminal", [False, True])
def test_rec_20_5a_final_agent_timeout_is_complete_and_never_rerun(
    history, row, reason, score, retry_terminal: bool
) -> None:
    # REC-21: even when the policy retries terminal timeouts (REC-15).
    policy = RecoveryPolicy(retry_terminal_timeouts=retry_terminal)
    run = history(policy=policy)
    run.attempt(row)
    decision = run.decide()
    assert shape(decision) == ("complete", 0, "REC-20.5a", reason)
    assert decision.score == score
    assert dispatched(run.replan()) == set()
    run.resume_started()
    assert dispatched(run.replan()) == set()


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(legacy_failure("transient", terminal=True), id="legacy-stamp"),
        pytest.param(failure("session_lost", terminal=True), id="record-terminal"),
        pytest.param(
            failure("session_lost", terminal=True, answer=True), id="with-an-answer"
        ),
        pytest.param(legacy_failure("skipped", terminal=True), id="skipped"),
        pytest.param(
            agent_timeout(answer=False, terminal=True), id="timeout-without-answer"
        ),
        pytest.param(
            agent_timeout(last_status=503, terminal=True), id="infrastructure-timeout"
        ),
    ],
)
def test_rec_20_5b_a_stamped_failure_is_terminal(history, row) -> None:
    # REC-14: terminal iff the producer stamped it; REC-21: 5b before 5c.
    run = history()
    run.attempt(row)
    assert shape(run.decide()) == ("terminal", 0, "REC-20.5b", "terminal")
    assert dispatched(run.replan()) == set()


def test_rec_14_an_unstamped_failure_is_not_terminal(history) -> None:
    run = history()
    run.attempt(failure("session_lost", terminal=False))
    assert run.decide().value == "retry"


@pytest.mark.parametrize(
    ("row", "rule"),
    [
        pytest.param(
            agent_timeout(answer=False, terminal=True),
            "REC-20.5i",
            id="timeout-without-answer",
        ),
        pytest.param(
            legacy_failure("timeout_exceeded", terminal=True),
            "REC-20.5i",
            id="legacy-timeout-exceeded",
        ),
        pytest.param(
            agent_timeout(last_status=503, terminal=True),
            "REC-20.5c",
            id="infrastructure-timeout",
        ),
    ],
)
def test_rec_15_an_opted_in_timeout_keeps_the_normal_retry_policy(
    history, row, rule: str
) -> None:
    run = history(policy=RecoveryPolicy(retry_terminal_timeouts=True))
    run.attempt(row)
    assert shape(run.decide()) == ("retry", 1, rule, "failed")


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        pytest.param(
            legacy_failure("skipped", terminal=True),
            ("terminal", 0, "REC-20.5b", "terminal"),
            id="skipped",
        ),
        pytest.param(
            legacy_failure("transient", terminal=True),
            ("terminal", 0, "REC-20.5b", "terminal"),
            id="not-a-timeout",
        ),
        pytest.param(
            omission(), ("held", 0, "REC-20.2", "unaccepted_omission"), id="omission"
        ),
    ],
)
def test_rec_15_the_opt_in_never_reopens_skipped_or_an_omission(
    history, row, expected: Shape
) -> None:
    run = history(policy=RecoveryPolicy(retry_terminal_timeouts=True))
    run.attempt(row)
    assert shape(run.decide()) == expected


def test_rec_20_5c_infrastructure_timeout_retries_then_infra_cut(history) -> None:
    # The last model call got a 503: a server fault owns the window (ROW-32).
    run = history(cap=3)
    run.attempt(agent_timeout(last_status=503))
    assert shape(run.decide()) == ("retry", 1, "REC-20.5c", "failed")
    plan = run.replan()
    assert dispatched(plan) == {(0, 0, 1)}  # R-4's exception (REC-21)
    assert run.led.reserve(plan.dispatch[0]) == 1
    run.record(0, 0, 1, agent_timeout(last_status=503))
    assert shape(run.decide()) == ("retry", 2, "REC-20.5c", "failed")
    run.attempt(agent_timeout(last_status=503, grade=0.25))
    decision = run.decide()
    assert shape(decision) == ("complete", 2, "REC-20.5c", "infra_cut")
    assert decision.score == 0.25
    assert coverage(run.state()).to_dict()["complete"]["infra_cut"] == 1


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(agent_timeout(last_status=503), id="kept-answer"),
        pytest.param(agent_timeout(answer=False, last_status=429), id="no-answer"),
        pytest.param(
            failure(
                "agent_timeout",
                answer=True,
                elapsed_seconds=100.0,
                **calls(
                    200,
                    200,
                    200,
                    503,
                    503,
                    503,
                    503,
                    503,
                    503,
                    200,
                    latency_ms=10_000.0,
                ),
            ),
            id="faults-own-the-window",
        ),
        pytest.param(
            failure(
                "agent_timeout",
                answer=True,
                events=[
                    {
                        "failure_kind": "session_lost",
                        "stage": "agent",
                        "source": "sandbox",
                        "http_status": 502,
                    }
                ],
            ),
            id="sandbox-fault",
        ),
    ],
)
def test_rec_20_5c_infrastructure_timeout_without_grade_is_exhausted_at_the_cap(
    history, row
) -> None:
    run = history(cap=2)
    run.attempt(row)
    assert shape(run.decide()) == ("retry", 1, "REC-20.5c", "failed")
    run.attempt(row)
    assert shape(run.decide()) == ("exhausted", 1, "REC-20.5c", "cap")
    assert dispatched(run.replan()) == set()


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(
            failure(
                "agent_timeout",
                answer=True,
                elapsed_seconds=600.0,
                **calls(503, 200, 200),
            ),
            id="early-fault-recovered",
        ),
        pytest.param(agent_timeout(last_status=504), id="gateway-timeout"),
        pytest.param(
            failure(
                "agent_timeout",
                answer=True,
                events=[
                    {
                        "failure_kind": "session_lost",
                        "stage": "cleanup",
                        "source": "sandbox",
                    }
                ],
            ),
            id="fault-after-the-window",
        ),
    ],
)
def test_rec_21_a_timeout_the_model_owned_is_final(history, row) -> None:
    run = history()
    run.attempt(row)
    assert shape(run.decide()) == ("complete", 0, "REC-20.5a", "settled_zero")


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(
            failure("session_release_failed", stage="cleanup", answer=True, grade=0.75),
            id="cleanup-after-grading",
        ),
        pytest.param(failure("session_lost", grade=0.75), id="no-answer"),
        pytest.param(
            legacy_failure(
                "transient", _ng_grade={"status": "completed", "reward": 0.75}
            ),
            id="legacy",
        ),
    ],
)
def test_rec_20_5d_a_recorded_grade_is_a_graded_failure(history, row) -> None:
    run = history()
    run.attempt(row)
    decision = run.decide()
    assert shape(decision) == ("complete", 0, "REC-20.5d", "graded_failure")
    assert decision.score == 0.75


def test_rec_12_a_reward_on_a_failure_row_is_no_grade(history) -> None:
    run = history()
    run.attempt(legacy_failure("transient", reward=1.0))
    assert shape(run.decide()) == ("retry", 1, "REC-20.5i", "failed")


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(failure("cancelled", source="collector"), id="cancelled"),
        pytest.param(failure("shutdown", source="collector"), id="shutdown"),
        pytest.param(failure("kill_shaped", source="collector"), id="kill-shaped"),
        pytest.param(legacy_failure("kill_shaped"), id="legacy-kill-shaped"),
        pytest.param(failure("cancelled", response=PLACEHOLDER), id="placeholder"),
    ],
)
def test_rec_20_5e_a_lifecycle_failure_without_answer_is_a_free_retry(
    history, row
) -> None:
    run = history(cap=1)
    run.attempt(row)
    assert shape(run.decide()) == ("retry", 1, "REC-20.5e", "free")
    assert totals(run)["counted_failures"] == 0


def test_rec_20_5e_a_lifecycle_failure_that_kept_an_answer_is_held(history) -> None:
    run = history()
    run.attempt(failure("cancelled", answer=True))
    assert shape(run.decide()) == ("held", 0, "REC-20.5h", "kept_answer")


def _route(delivery: str | None, **extra: Any) -> dict[str, Any]:
    return failure(
        "agent_request_failed", source="collector", delivery=delivery, **extra
    )


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        pytest.param(
            _route("not_sent"), ("retry", 1, "REC-20.5f", "free"), id="not-sent"
        ),
        pytest.param(
            _route("possibly_delivered"),
            ("retry", 1, "REC-20.5f", "failed"),
            id="possibly-delivered",
        ),
        pytest.param(
            _route("delivered"), ("retry", 1, "REC-20.5f", "failed"), id="delivered"
        ),
        pytest.param(
            _route(None), ("retry", 1, "REC-20.5f", "failed"), id="no-delivery"
        ),
        pytest.param(
            legacy_failure("agent_request_failed"),
            ("retry", 1, "REC-20.5f", "failed"),
            id="no-record",
        ),
        pytest.param(
            failure("transport_unreachable", source="collector", delivery="not_sent"),
            ("retry", 1, "REC-20.5f", "free"),
            id="collector-transport",
        ),
    ],
)
def test_rec_20_5f_route_failure_without_response(history, row, expected) -> None:
    run = history()
    run.attempt(row)
    assert shape(run.decide()) == expected
    assert dispatched(run.replan()) == {(0, 0, 1)}


@pytest.mark.parametrize(
    "delivery", ["not_sent", "possibly_delivered", "delivered", None]
)
@pytest.mark.parametrize(
    "kept",
    [
        pytest.param({"response": dict(ANSWER)}, id="answer"),
        pytest.param({"response": dict(PLACEHOLDER)}, id="placeholder"),
        pytest.param(
            {"_ng_failure_response": {"output": [], "status": "failed"}},
            id="diagnostic-response",
        ),
        pytest.param(
            {"_ng_failure_partial_response": {"output": []}}, id="native-partial"
        ),
    ],
)
def test_rec_23_a_route_failure_that_kept_any_response_is_held(
    history, delivery, kept
) -> None:
    run = history()
    run.attempt(_route(delivery, **kept))
    assert shape(run.decide()) == ("held", 0, "REC-20.5f", "route_kept_response")
    assert dispatched(run.replan()) == set()


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(JUDGE_FAILED, id="judge-failed"),
        pytest.param(
            failure("judge_unparseable", stage="verification", answer=True),
            id="judge-unparseable",
        ),
        pytest.param(legacy_failure("judge_invalid", answer=True), id="alias"),
        pytest.param(
            failure("transport_timeout", stage="verification", answer=True),
            id="transport-verify-call",
        ),
        pytest.param(
            failure(
                "judge_failed",
                stage="verification",
                _ng_failure_partial_response={"output": []},
            ),
            id="native-partial",
        ),
    ],
)
def test_rec_20_5g_a_judge_failure_keeps_its_answer_and_is_rejudged(
    history, row
) -> None:
    run = history(cap=2)
    run.attempt(row)
    assert shape(run.decide()) == ("rejudge", 0, "REC-20.5g", "regrade")
    plan = run.replan()
    assert (dispatched(plan), rejudged(plan)) == (set(), {(0, 0, 0)})
    run.rejudge(legacy_failure("judge_failed"))
    assert shape(run.decide()) == ("exhausted", 0, "REC-20.3", "cap")
    assert dispatched(run.replan()) == set()  # never re-dispatched


def test_rec_20_5g_regrade_kinds_come_from_the_policy(history) -> None:
    policy = RecoveryPolicy(regrade_kinds=("judge_failed", "verifier_error"))
    run = history(policy=policy)
    run.attempt(failure("verifier_error", stage="agent", answer=True))
    assert shape(run.decide()) == ("rejudge", 0, "REC-20.5g", "regrade")


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        pytest.param(
            failure("verifier_error", stage="verification", answer=True),
            ("rejudge", 0, "REC-20.5h", "verification"),
            id="verification",
        ),
        pytest.param(
            failure("agent_command_not_allowed", answer=True),
            ("complete", 0, "REC-20.5h", "settled_zero"),
            id="model-side",
        ),
        pytest.param(
            failure("provider_oom_killed", stage="agent", answer=True),
            ("complete", 0, "REC-20.5h", "settled_zero"),
            id="agent-oom",
        ),
        pytest.param(
            failure("session_lost", answer=True, _ng_result_class="model"),
            ("complete", 0, "REC-20.5h", "settled_zero"),
            id="applied-model-class",
        ),
        pytest.param(
            failure("session_lost", answer=True),
            ("held", 0, "REC-20.5h", "kept_answer"),
            id="evaluation-side",
        ),
        pytest.param(
            failure("mytool:crash", answer=True),
            ("held", 0, "REC-20.5h", "kept_answer"),
            id="namespaced",
        ),
        pytest.param(
            failure(
                "agent_command_not_allowed", answer=True, _ng_result_class="unknown"
            ),
            ("held", 0, "REC-20.5h", "kept_answer"),
            id="explicit-unknown",
        ),
        pytest.param(
            failure("provider_oom_killed", stage="seed", answer=True),
            ("held", 0, "REC-20.5h", "kept_answer"),
            id="seed-oom",
        ),
        pytest.param(
            legacy_failure(
                "transient", response={"output": [], "status": "incomplete"}
            ),
            ("held", 0, "REC-20.5h", "kept_answer"),
            id="finished-empty",
        ),
    ],
)
def test_rec_20_5h_a_kept_answer(history, row, expected: Shape) -> None:
    run = history()
    run.attempt(row)
    decision = run.decide()
    assert shape(decision) == expected
    assert dispatched(run.replan()) == set()  # never sampled again


def test_rec_20_5h_a_verification_failure_at_the_cap_is_exhausted(history) -> None:
    run = history(cap=1)
    run.attempt(failure("verifier_error", stage="verification", answer=True))
    assert shape(run.decide()) == ("exhausted", 0, "REC-20.5h", "cap")


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(legacy_failure("transient"), id="legacy-transient"),
        pytest.param(failure("session_lost"), id="no-answer"),
        pytest.param(failure("session_lost", response=PLACEHOLDER), id="placeholder"),
        pytest.param(
            legacy_failure(
                "transient",
                response={
                    "id": "r-failed",
                    "output": [{"type": "message", "role": "assistant", "content": ""}],
                    "status": "failed",
                },
            ),
            id="legacy-placeholder",
        ),
        pytest.param(
            failure("transport_unreachable", source="environment"),
            id="environment-transport",
        ),
    ],
)
def test_rec_20_5i_otherwise_counted_retry_until_the_cap(history, row) -> None:
    run = history(cap=2)
    run.attempt(row)
    assert shape(run.decide()) == ("retry", 1, "REC-20.5i", "failed")
    run.attempt(row)
    assert shape(run.decide()) == ("exhausted", 1, "REC-20.5i", "cap")
    assert dispatched(run.replan()) == set()


# -- REC-1, REC-2: selection, duplicates and late outcomes -----------------------------


def test_rec_1_a_second_row_for_one_attempt_is_a_duplicate(history) -> None:
    run = history()
    run.attempt(legacy_failure("transient"))
    run.record(0, 0, 0, graded())
    assert shape(run.decide()) == ("retry", 1, "REC-20.5i", "failed")
    report = totals(run)
    assert (report["duplicates"], report["counted_failures"]) == (1, 1)


def test_rec_1_a_duplicate_never_counts(history) -> None:
    run = history(cap=2)
    run.attempt(graded())
    run.record(0, 0, 0, legacy_failure("transient"))
    run.record(0, 0, 0, legacy_failure("transient"))
    assert shape(run.decide()) == ("complete", 0, "REC-20.4e", "graded")
    assert totals(run)["counted_failures"] == 0
    assert totals(run)["duplicates"] == 2


def test_rec_1_outcomes_without_reservations_count(history) -> None:
    # An imported run has outcomes without reservations (REC-70).
    run = history()
    row = graded(0.5)
    location = Location(file="rollouts.jsonl", offset=0, length=1, row_sha256="0" * 64)
    run.led.append(
        ResultSaved(
            task=0, rollout=0, attempt=2, location=location, facts=row_facts(row)
        ),
        actor="import",
    )
    assert shape(run.decide()) == ("complete", 2, "REC-20.4e", "graded")


def test_rec_2_a_newer_reservation_hides_a_late_older_success(history) -> None:
    run = history()
    run.kill()  # attempt 0 is in flight when its process dies
    assert run.reserve() == 1
    run.record(0, 0, 0, graded())  # the zombie's late result
    assert shape(run.decide()) == ("retry", 2, "REC-20.1", "unknown")
    run.record(0, 0, 1, legacy_failure("transient"))
    assert shape(run.decide()) == ("retry", 2, "REC-20.5i", "failed")
    assert totals(run)["superseded"] == 1


def test_rec_2_a_late_older_outcome_never_replaces_the_newer(history) -> None:
    run = history(cap=3)
    run.kill()
    run.attempt(graded(0.5))
    run.record(0, 0, 0, legacy_failure("transient"))  # late, counted (REC-13)
    decision = run.decide()
    assert shape(decision) == ("complete", 1, "REC-20.4e", "graded")
    assert decision.score == 0.5
    report = totals(run)
    assert (report["superseded"], report["counted_failures"]) == (1, 1)


def test_rec_13_superseded_outcomes_count_toward_the_cap(history) -> None:
    run = history(cap=2)
    run.kill()
    run.attempt(legacy_failure("transient"))
    run.record(0, 0, 0, legacy_failure("transient"))
    assert shape(run.decide()) == ("exhausted", 1, "REC-20.5i", "cap")


# -- REC-3: release, then reserve ------------------------------------------------------


def test_rec_3_reserving_an_attempt_not_released_is_a_config_error(history) -> None:
    run = history()
    run.attempt(legacy_failure("transient"))
    row = {**run.rows[0], "_ng_attempt_index": 1}
    with pytest.raises(ConfigError, match="not released"):
        run.led.reserve(row)
    run.replan()
    run.resume_started()  # a release holds until the next resume
    with pytest.raises(ConfigError, match="not released"):
        run.led.reserve(row)


def test_rec_3_replan_never_releases_closed_rollouts(history) -> None:
    run = history(tasks=2, rollouts=2)
    run.attempt(graded(), 0, 0)
    run.attempt(failure("session_lost", answer=True), 0, 1)
    run.attempt(legacy_failure("transient", terminal=True), 1, 0)
    run.reserve(1, 1)
    plan = run.replan()
    assert (dispatched(plan), rejudged(plan)) == (set(), set())
    assert [(h.task, h.rollout, h.reason) for h in plan.held] == [(0, 1, "kept_answer")]
    assert plan.counts["in_flight"] == 1


# -- REC-4: free attempts --------------------------------------------------------------


def test_rec_4_free_attempts_stop_at_max_free_attempts(history) -> None:
    run = history(cap=1)
    for expected in range(4):
        assert run.kill() == expected
    assert shape(run.decide()) == ("retry", 4, "REC-20.1", "unknown")
    run.kill()
    assert shape(run.decide()) == ("exhausted", 4, "REC-4", "free_attempts")
    assert coverage(run.state()).to_dict()["exhausted"]["free_attempts"] == 1
    assert dispatched(run.replan()) == set()


@pytest.mark.parametrize(
    ("row", "rule"),
    [
        pytest.param(failure("cancelled"), "REC-20.5e", id="lifecycle"),
        pytest.param(_route("not_sent"), "REC-20.5f", id="route-not-sent"),
    ],
)
def test_rec_4_free_outcomes_count_toward_the_guard(history, row, rule) -> None:
    run = history(policy=RecoveryPolicy(max_free_attempts=3))
    run.kill()
    run.attempt(row)
    assert shape(run.decide()) == ("retry", 2, rule, "free")
    run.attempt(row)
    assert shape(run.decide()) == ("exhausted", 2, "REC-4", "free_attempts")


def test_rec_4_three_free_attempts_flag_a_rollout_suspect(history) -> None:
    run = history(rollouts=2)
    for _ in range(2):
        run.kill(0, 0)
    run.kill(0, 1)
    assert coverage(run.state()).to_dict()["suspect"] == 0
    run.kill(0, 0)
    assert coverage(run.state()).to_dict()["suspect"] == 1


def test_rec_4_the_guard_changes_nothing_but_free_retries(history) -> None:
    run = history(cap=3)
    run.kill()
    run.kill()
    run.attempt(legacy_failure("transient"))
    run.set_policy(max_free_attempts=2)
    assert shape(run.decide()) == ("retry", 3, "REC-20.5i", "failed")


def test_rec_4_a_budget_reset_restarts_the_free_count(history) -> None:
    run = history(policy=RecoveryPolicy(max_free_attempts=2))
    run.kill()
    run.kill()
    assert shape(run.decide()) == ("exhausted", 1, "REC-4", "free_attempts")
    run.reset()
    assert shape(run.decide()) == ("retry", 2, "REC-20.1", "unknown")


# -- REC-10, REC-11, REC-12: caps and extensions ---------------------------------------


@pytest.mark.parametrize(
    ("value", "cap", "warned"),
    [
        (None, 3, False),
        ("", 3, False),
        (" 5 ", 5, False),
        ("1", 1, False),
        ("0", 3, True),
        ("-2", 3, True),
        ("two", 3, True),
        ("2.5", 3, True),
    ],
)
def test_rec_10_max_rollout_attempts_from_the_environment(
    caplog, value, cap: int, warned: bool
) -> None:
    environ = {} if value is None else {"NEMO_GYM_MAX_ROLLOUT_ATTEMPTS": value}
    with caplog.at_level(logging.WARNING, logger="ledger"):
        assert max_rollout_attempts(environ=environ) == cap
    assert len(caplog.records) == int(warned)
    if warned:
        assert repr(value) in caplog.text


def test_rec_10_the_cap_saved_at_creation_decides(history) -> None:
    run = history(cap=1)
    assert run.state().cap == 1
    run.attempt(legacy_failure("transient"))
    assert shape(run.decide()) == ("exhausted", 0, "REC-20.5i", "cap")


def test_rec_11_an_extension_raises_every_cap_by_the_latest_total(history) -> None:
    run = history(cap=1, rollouts=2)
    run.attempt(legacy_failure("transient"), 0, 0)
    run.attempt(masked("session_lost", answer=False), 0, 1)
    assert {d.value for d in decide_all(run.state()).values()} == {"exhausted"}
    run.extend(1)
    state = run.state()
    assert (state.cap, coverage(state).to_dict()["totals"]["extension"]) == (2, 1)
    assert shape(decide(state, 0, 0)) == ("retry", 1, "REC-20.5i", "failed")
    assert shape(decide(state, 0, 1)) == ("retry", 1, "REC-20.4b", "failed")
    run.attempt(legacy_failure("transient"), 0, 0)
    assert shape(run.decide()) == ("exhausted", 1, "REC-20.5i", "cap")
    run.extend(1)  # the same total again: the cap does not grow
    assert shape(run.decide()) == ("exhausted", 1, "REC-20.5i", "cap")
    run.extend(3)
    run.extend(2)  # the latest total is in force
    assert run.state().cap == 3
    assert shape(run.decide()) == ("retry", 2, "REC-20.5i", "failed")


def test_rec_12_an_unreadable_extension_stops_the_run(history) -> None:
    run = history()
    # Plant an extension no reader can decode (total 0) the way a damaged or
    # foreign writer would: straight into the table, chained like any event.
    import sqlite3

    from ledger.events import chain_hash

    seq, prev = run.led.head()
    body, at = b'{"kind":"attempts_extended","total":0,"reason":null}', "t"
    conn = sqlite3.connect(run.led.paths.db, isolation_level=None)
    conn.execute(
        "INSERT INTO events VALUES (?, 'attempts_extended', ?, 'x', ?, ?, ?)",
        (
            seq + 1,
            at,
            body,
            prev,
            chain_hash(prev, seq + 1, "attempts_extended", at, "x", body),
        ),
    )
    conn.close()
    with pytest.raises(CorruptLedger, match=rf"seq {seq + 1} \(attempts_extended\)"):
        run.state()


def test_rec_12_a_writer_never_appends_an_extension_it_cannot_read(history) -> None:
    run = history()
    before = run.led.head()
    with pytest.raises(LedgerError):
        run.led.append(AttemptsExtended(total=0))
    assert run.led.head() == before


# -- REC-13, REC-16: counting and the budget reset -------------------------------------


def test_rec_16_a_budget_reset_keeps_outcomes_and_attempts_but_resets_counting(
    history,
) -> None:
    run = history(cap=2)
    run.attempt(legacy_failure("transient"))
    run.attempt(failure("session_lost"))
    before_state = run.state()
    assert shape(decide(before_state, 0, 0)) == ("exhausted", 1, "REC-20.5i", "cap")
    run.reset()
    state = run.state()
    assert shape(decide(state, 0, 0)) == ("retry", 2, "REC-20.5i", "failed")
    assert excluded_sidecar_lines(state) == 2
    report = coverage(state).to_dict()["totals"]
    assert (report["counted_failures"], report["excluded_sidecar_lines"]) == (0, 2)
    assert report["outcomes"] == coverage(before_state).to_dict()["totals"]["outcomes"]
    assert state.rollout(0, 0).outcomes == before_state.rollout(0, 0).outcomes
    assert dispatched(run.replan()) == {(0, 0, 2)}  # numbering continues
    run.attempt(legacy_failure("transient"))
    assert shape(run.decide()) == ("retry", 3, "REC-20.5i", "failed")
    run.attempt(legacy_failure("transient"))
    assert shape(run.decide()) == ("exhausted", 3, "REC-20.5i", "cap")


def test_rec_17_each_reset_is_one_line_of_failure_budget_log(history) -> None:
    run = history()
    run.attempt(legacy_failure("transient"))
    first = run.reset()
    run.attempt(legacy_failure("transient"))
    second = run.reset()
    text = rendered_files(run.state())["failure_budget.log"]
    assert text is not None
    times = [e.at for e in run.led.events(kinds=["failure_budget_reset"])]
    assert text.decode().splitlines() == [
        f"1\t{first}\t{times[0]}\tnew quota",
        f"2\t{second}\t{times[1]}\tnew quota",
    ]


def test_rec_16_no_reset_excludes_nothing(history) -> None:
    run = history()
    run.attempt(legacy_failure("transient"))
    assert excluded_sidecar_lines(run.state()) == 0


def test_rec_16_an_outcome_from_before_a_reset_stays_excluded_when_approved(
    history,
) -> None:
    # REC-13: counted failures are counted outcomes recorded after the reset.
    run = history(cap=1)
    run.attempt(failure("session_lost", answer=True))
    run.reset()
    run.approve(0, 0, 0)
    assert shape(run.decide()) == ("retry", 1, "REC-25", "failed")
    assert totals(run)["counted_failures"] == 0


def test_rec_13_an_approval_makes_its_outcome_counted(history) -> None:
    run = history(cap=3)
    run.attempt(failure("session_lost", answer=True))
    assert totals(run)["counted_failures"] == 0
    run.approve(0, 0, 0)
    assert totals(run)["counted_failures"] == 1


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
    run.attempt(_route("delivered", response=dict(ANSWER)), 2, 1)
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
        pytest.param([], True, "rollout-ledger resume", id="pending"),
        pytest.param(
            [legacy_failure("transient")], True, "rollout-ledger resume", id="retry"
        ),
        pytest.param([JUDGE_FAILED], True, "rollout-ledger resume", id="rejudge"),
        pytest.param(
            [failure("session_lost", answer=True)],
            False,
            "rollout-ledger approve",
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
