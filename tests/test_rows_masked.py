"""Masked results (ROW-11, ROW-40..ROW-44)."""

from __future__ import annotations

from typing import Any

import pytest

from ledger import (
    RecoveryPolicy,
    keeps_saved_answer,
    masked_candidate_kind,
    masked_infrastructure_kind,
    masked_kept_answer_kind,
    masked_regrade_kind,
    masked_without_artifact_kind,
)

Row = dict[str, Any]

ANSWER = {
    "output": [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "x"}],
        }
    ],
    "status": "completed",
}
GRADED = {"status": "completed", "reward": 0.25}


def masked(
    kind: str | None = "session_lost", *, answer: bool = False, **extra: Any
) -> Row:
    """An environment-masked result row naming ``kind``."""
    row: Row = {"mask_sample": True, "reward": 0.0, **extra}
    if kind is not None:
        row["failure_kind"] = kind
    if answer:
        row["response"] = ANSWER
    return row


# ROW-40 .. ROW-44 under the shared defaults: (candidate, infrastructure,
# kept answer = without artifact, regrade).
@pytest.mark.parametrize(
    ("row", "candidate", "infrastructure", "kept", "regrade"),
    [
        # ROW-41: infrastructure left the rollout unmeasured.
        (masked(), "session_lost", "session_lost", None, None),
        (
            masked("provider_unavailable"),
            "provider_unavailable",
            "provider_unavailable",
            None,
            None,
        ),
        (
            masked("transport_timeout", failure_stage="agent"),
            "transport_timeout",
            "transport_timeout",
            None,
            None,
        ),
        # ROW-42: a saved answer without a recorded grade is never sampled again.
        (masked(answer=True), "session_lost", None, "session_lost", None),
        (
            masked(_ng_failure_partial_response={"output": []}),
            "session_lost",
            None,
            "session_lost",
            None,
        ),
        (
            masked(response={"output": [], "status": "completed"}),
            "session_lost",
            None,
            "session_lost",
            None,
        ),
        # ... and a graded one is a result (cleanup failed after grading, `_ng_grade`).
        (
            masked("session_release_failed", answer=True, failure_stage="cleanup"),
            "session_release_failed",
            None,
            None,
            None,
        ),
        (masked(answer=True, _ng_grade=GRADED), "session_lost", None, None, None),
        # A diagnostic-only response or a no-generation placeholder is no answer.
        (
            masked(_ng_failure_response=ANSWER),
            "session_lost",
            "session_lost",
            None,
            None,
        ),
        (
            masked(
                response={
                    "output": [],
                    "status": "completed",
                    "metadata": {"ng_no_generation": True},
                }
            ),
            "session_lost",
            "session_lost",
            None,
            None,
        ),
        # The legacy nested mask counts too.
        (
            {
                "instance_config": {"mask_sample": True},
                "failure_kind": "session_lost",
                "reward": 0,
            },
            "session_lost",
            "session_lost",
            None,
            None,
        ),
        (
            masked(
                mask_sample=False, instance_config={"mask_sample": True}, answer=True
            ),
            "session_lost",
            None,
            "session_lost",
            None,
        ),
        (masked(mask_sample=False), None, None, None, None),
        (masked(mask_sample="true"), None, None, None, None),
        # Masked by another owner: stays the result, whatever its kind.
        (masked(_ng_mask_owner="token_capture"), None, None, None, None),
        (masked(_ng_mask_owner="token_capture", answer=True), None, None, None, None),
        (
            masked("judge_failed", answer=True, _ng_mask_owner="token_capture"),
            None,
            None,
            None,
            None,
        ),
        (
            masked(_ng_mask_owner="environment"),
            "session_lost",
            "session_lost",
            None,
            None,
        ),
        # Not a result row: a failure row, an omission, a re-judgment.
        (masked(_ng_failure_class="transient"), None, None, None, None),
        (
            masked(_ng_failure_record={"failure": {"failure_kind": "session_lost"}}),
            None,
            None,
            None,
            None,
        ),
        (masked(_ng_omitted=True), None, None, None, None),
        (masked(_ng_rejudgment={"admission_id": "adm-1"}), None, None, None, None),
        (
            masked(_ng_rejudgment={"task": 1, "rollout": 0, "attempt": 2}, answer=True),
            None,
            None,
            None,
            None,
        ),
        # No kind, a model-side kind, an unregistered or namespaced kind: kept.
        (masked(None), None, None, None, None),
        (masked(None, answer=True), None, None, None, None),
        (masked("agent_timeout"), None, None, None, None),
        (masked("agent_command_not_allowed", answer=True), None, None, None, None),
        (masked("timeout_exceeded"), None, None, None, None),
        # ROW-34: registration is of shared names only; an alias is not registered.
        (masked("remote_agent_error"), None, None, None, None),
        (masked("remote_agent_error", answer=True), None, None, None, None),
        (masked("osworld:proxy_setup_error"), None, None, None, None),
        (masked("proxy_setup_error"), None, None, None, None),
        (masked("transient"), None, None, None, None),
        (masked({"kind": "session_lost"}), None, None, None, None),  # type: ignore[arg-type]
        # provider_oom_killed by its stage; unknown stage is unclassified.
        (masked("provider_oom_killed", failure_stage="agent"), None, None, None, None),
        (
            masked("provider_oom_killed", failure_stage="seed"),
            "provider_oom_killed",
            "provider_oom_killed",
            None,
            None,
        ),
        (masked("provider_oom_killed"), None, None, None, None),
        (
            masked(
                "provider_oom_killed",
                ng_agent_observations={
                    "records": [
                        {"type": "sandbox", "role": "environment", "outcome": "oom"}
                    ]
                },
            ),
            "provider_oom_killed",
            "provider_oom_killed",
            None,
            None,
        ),
        # ROW-43: regrade kinds and transport_* verify calls are graded again.
        (masked("judge_failed", answer=True), None, None, None, "judge_failed"),
        (
            masked("judge_unparseable", answer=True),
            None,
            None,
            None,
            "judge_unparseable",
        ),
        (masked("judge_invalid", answer=True), None, None, None, "judge_invalid"),
        (
            masked("transport_timeout", answer=True, failure_stage="verification"),
            None,
            None,
            None,
            "transport_timeout",
        ),
        (
            masked("transport_peer_drop", answer=True, failure_stage="verification"),
            None,
            None,
            None,
            "transport_peer_drop",
        ),
        (masked("judge_failed"), None, None, None, None),
        (
            masked("transport_timeout", failure_stage="verification"),
            None,
            None,
            None,
            None,
        ),
        (
            masked("judge_failed", answer=True, mask_sample=False),
            None,
            None,
            None,
            None,
        ),
        (
            masked("judge_failed", answer=True, _ng_rejudgment={"admission_id": "a"}),
            None,
            None,
            None,
            "judge_failed",
        ),
        # verifier_error is evaluation-side but no regrade kind by default.
        (
            masked("verifier_error", answer=True, failure_stage="verification"),
            "verifier_error",
            None,
            "verifier_error",
            None,
        ),
        ({}, None, None, None, None),
        ({"reward": 1.0, "response": ANSWER}, None, None, None, None),
    ],
)
def test_row_40_to_44_masked_rules(
    row: Row,
    candidate: str | None,
    infrastructure: str | None,
    kept: str | None,
    regrade: str | None,
) -> None:
    assert masked_candidate_kind(row) == candidate
    assert masked_infrastructure_kind(row) == infrastructure
    assert masked_kept_answer_kind(row) == kept
    assert masked_without_artifact_kind(row) == kept
    assert masked_regrade_kind(row) == regrade


# ROW-41, ROW-42, ROW-44 one by one.


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (masked(), "session_lost"),
        (masked(_ng_failure_response=ANSWER), "session_lost"),
        (masked(answer=True), None),
        (masked(_ng_failure_partial_response={"output": []}), None),
        (masked(_ng_collector_projection={"kept_answer": True}), None),
        (
            masked(_ng_collector_projection={"kept_answer": False}, answer=True),
            "session_lost",
        ),
    ],
)
def test_row_41_infrastructure_kind_keeps_no_saved_answer(
    row: Row, expected: str | None
) -> None:
    assert masked_infrastructure_kind(row) == expected


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (masked(answer=True), "session_lost"),
        (masked(answer=True, reward=None), "session_lost"),
        (masked(answer=True, _ng_grade=GRADED), None),
        (masked(answer=True, failure_stage="cleanup"), None),
        (masked(answer=True, failure_stage="agent"), "session_lost"),
        (masked(), None),
    ],
)
def test_row_42_kept_answer_kind_has_no_recorded_grade(
    row: Row, expected: str | None
) -> None:
    assert masked_kept_answer_kind(row) == expected


@pytest.mark.parametrize(
    "row",
    [
        masked(None, answer=True),
        masked("agent_timeout", answer=True),
        masked("not_registered", answer=True),
        masked("osworld:proxy_setup_error", answer=True),
        masked(answer=True, _ng_grade=GRADED),
        masked(answer=True, _ng_mask_owner="token_capture"),
        masked("judge_failed", answer=True),
    ],
)
def test_row_44_masked_row_stays_the_result(row: Row) -> None:
    assert masked_without_artifact_kind(row) is None
    assert masked_infrastructure_kind(row) is None


# ROW-40 .. ROW-43 under a run's policy, and the applied class (ROW-50).
@pytest.mark.parametrize(
    ("row", "policy", "candidate", "regrade"),
    [
        # An explicit `unknown` class stays unknown, whatever the policy says.
        (
            masked(_ng_result_class="unknown"),
            {"side_overrides": {"session_lost": "evaluation"}},
            None,
            None,
        ),
        (
            masked("agent_timeout", _ng_result_class="unknown"),
            {"side_overrides": {"agent_timeout": "evaluation"}},
            None,
            None,
        ),
        (masked(_ng_result_class="model"), {}, None, None),
        (
            masked("agent_timeout", _ng_result_class="evaluation"),
            {},
            "agent_timeout",
            None,
        ),
        # The class cannot register a kind the vocabulary does not know.
        (
            masked("osworld:proxy_setup_error", _ng_result_class="evaluation"),
            {},
            None,
            None,
        ),
        # side_overrides move kinds both ways.
        (masked(), {"side_overrides": {"session_lost": "model"}}, None, None),
        (
            masked("agent_timeout"),
            {"side_overrides": {"agent_timeout": "evaluation"}},
            "agent_timeout",
            None,
        ),
        # ... but an alias is no registered kind, whatever side it is moved to.
        (
            masked("timeout_exceeded"),
            {"side_overrides": {"agent_timeout": "evaluation"}},
            None,
            None,
        ),
        # regrade_kinds come from the policy.
        (
            masked(answer=True),
            {"regrade_kinds": ["session_lost"]},
            None,
            "session_lost",
        ),
        (
            masked("judge_failed", answer=True),
            {"regrade_kinds": []},
            "judge_failed",
            None,
        ),
        (
            masked("judge_invalid", answer=True),
            {"regrade_kinds": ["judge_unparseable"]},
            None,
            "judge_invalid",
        ),
        (
            masked("gdpval:judge_invalid", answer=True),
            {"regrade_kinds": ["gdpval:judge_invalid"]},
            None,
            "gdpval:judge_invalid",
        ),
        # A transport_* verify call is graded again under any policy.
        (
            masked("transport_unreachable", answer=True, failure_stage="verification"),
            {"regrade_kinds": []},
            None,
            "transport_unreachable",
        ),
    ],
)
def test_row_40_row_43_follow_the_policy(
    row: Row, policy: dict[str, Any], candidate: str | None, regrade: str | None
) -> None:
    chosen = RecoveryPolicy.model_validate(policy)
    assert masked_candidate_kind(row, policy=chosen) == candidate
    assert masked_regrade_kind(row, policy=chosen) == regrade


# ROW-11: the masked rules and recovery's saved-answer test read the same facts.

ANSWER_SHAPES: list[Row] = [
    {},
    {"response": ANSWER},
    {"response": {"output": [], "status": "completed"}},
    {"response": {"output": [], "status": None}},
    {
        "response": {
            "output": [],
            "status": "completed",
            "metadata": {"ng_no_generation": "true"},
        }
    },
    {"response": {}},
    {"response": {"error": "boom"}},
    {"_ng_failure_response": ANSWER},
    {"_ng_failure_partial_response": {"output": []}},
    {"_ng_collector_projection": {"kept_answer": True}},
    {"_ng_collector_projection": {"kept_answer": False}, "response": ANSWER},
]


@pytest.mark.parametrize("shape", ANSWER_SHAPES)
def test_row_11_masked_rules_use_the_saved_answer_test(shape: Row) -> None:
    row = {"mask_sample": True, "failure_kind": "session_lost", **shape}
    kept = keeps_saved_answer(row)
    assert (masked_infrastructure_kind(row) is None) is kept
    assert (masked_kept_answer_kind(row) is not None) is kept
    regrade = {**row, "failure_kind": "judge_failed"}
    assert (masked_regrade_kind(regrade) is not None) is kept
