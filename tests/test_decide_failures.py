"""REC-20.5: deciding a rollout whose outcome is a failure row.

With the rules it leans on (REC-12, REC-14, REC-15, REC-21, REC-23). Histories
are written and decisions asserted as in ``tests/test_decide.py``.
"""

from __future__ import annotations

import pytest

from ledger import (
    RecoveryPolicy,
)
from projections import (
    coverage,
)
from tests.helpers_decide import (
    JUDGE_FAILED,
    Shape,
    dispatched,
    rejudged,
    routed,
    shape,
    totals,
)
from tests.helpers_history import (
    ANSWER,
    PLACEHOLDER,
    agent_timeout,
    calls,
    failure,
    legacy_failure,
    omission,
)

# -- REC-20.5: failure rows ------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "reason", "score"),
    [
        pytest.param(agent_timeout(), "settled_zero", 0.0, id="settled-zero"),
        pytest.param(agent_timeout(grade=0.5), "graded_failure", 0.5, id="graded"),
        pytest.param(
            agent_timeout(terminal=True), "settled_zero", 0.0, id="stamped-terminal"
        ),
        # ROW-62: the legacy timeout's answer is the agent's partial one (a
        # complete response would say the timeout was the verifier's).
        pytest.param(
            legacy_failure(
                "timeout_exceeded",
                terminal=True,
                response={**ANSWER, "status": "incomplete"},
            ),
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


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        pytest.param(
            routed("not_sent"), ("retry", 1, "REC-20.5f", "free"), id="not-sent"
        ),
        pytest.param(
            routed("possibly_delivered"),
            ("retry", 1, "REC-20.5f", "failed"),
            id="possibly-delivered",
        ),
        pytest.param(
            routed("delivered"), ("retry", 1, "REC-20.5f", "failed"), id="delivered"
        ),
        pytest.param(
            routed(None), ("retry", 1, "REC-20.5f", "failed"), id="no-delivery"
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
    run.attempt(routed(delivery, **kept))
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
