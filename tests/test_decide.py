"""REC-20.1..REC-20.4: a rollout without outcome, omitted, re-judged or with a result.

Every history is written through the public API (``tests/helpers_history.py``):
a run is created, ``replan`` releases attempts, a collector reserves and records
real rows, and operator events are appended as ``resume`` will append them.
Each decision is asserted as ``(value, attempt, rule, reason)``
(``tests/helpers_decide.py``). The other rules of REC-1..REC-41 are in
``tests/test_decide_failures.py``, ``tests/test_decide_attempts.py`` and
``tests/test_decide_completion.py``.
"""

from __future__ import annotations

import pytest

from ledger import (
    ConfigError,
    RecoveryIncomplete,
)
from projections import (
    check_complete,
    coverage,
    decide,
    decide_all,
)
from tests.helpers_decide import (
    JUDGE_FAILED,
    dispatched,
    rejudged,
    shape,
    totals,
)
from tests.helpers_history import (
    ANSWER,
    calls,
    failure,
    graded,
    legacy_failure,
    masked,
    omission,
    unscored,
)

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
