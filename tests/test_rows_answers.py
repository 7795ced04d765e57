"""Responses, generations, saved answers and grades (ROW-1..ROW-12)."""

from __future__ import annotations

from typing import Any

import pytest

from ledger import (
    NG_NO_GENERATION_METADATA,
    RecoveryPolicy,
    has_native_partial,
    has_recorded_grade,
    has_saved_generation,
    keeps_response,
    keeps_saved_answer,
)
from tests.internals import (
    counts_as_generation,
    is_diagnostic_error,
    is_legacy_placeholder,
    is_placeholder,
    is_typed_response,
)

Row = dict[str, Any]

MESSAGE = {
    "type": "message",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "42"}],
}
EMPTY_MESSAGE = {
    "type": "message",
    "role": "assistant",
    "content": [{"type": "output_text", "text": ""}],
}
ANSWER = {"id": "resp_1", "object": "response", "output": [MESSAGE], "status": None}
COMPLETED_EMPTY = {"output": [], "status": "completed"}
NO_GENERATION = {
    "output": [EMPTY_MESSAGE],
    "status": "completed",
    "metadata": {NG_NO_GENERATION_METADATA: "true"},
}
DIAGNOSTIC = {"error": "boom", "status_code": 500}


# ROW-1: typed responses and diagnostic error objects.


@pytest.mark.parametrize(
    ("value", "typed", "diagnostic"),
    [
        ({"output": []}, True, False),
        ({"output": None}, True, False),
        ({"object": "response"}, True, False),
        ({"object": "response", "error": "x"}, True, False),
        ({"output": [], "error": "x", "status": "failed"}, True, False),
        ({}, False, False),
        (DIAGNOSTIC, False, True),
        (
            {"message": "m", "detail": "d", "code": 1, "type": "t", "status": 500},
            False,
            True,
        ),
        ({"error": "x", "id": "resp_1"}, False, False),
        ({"object": "chat.completion", "choices": []}, False, False),
        ([], False, False),
        ("response", False, False),
        (None, False, False),
    ],
)
def test_row_1_typed_response_and_diagnostic_error(
    value: object, typed: bool, diagnostic: bool
) -> None:
    assert is_typed_response(value) is typed
    assert is_diagnostic_error(value) is diagnostic


# ROW-2: a typed response counts as generation with an output item or a status.


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (COMPLETED_EMPTY, True),
        ({"output": [MESSAGE]}, True),
        ({"output": [{"type": "reasoning"}], "status": None}, True),
        ({"output": [], "status": "failed"}, True),
        ({"object": "response", "status": "incomplete"}, True),
        ({"output": [], "status": None}, False),
        ({"output": []}, False),
        ({"object": "response"}, False),
        # Wrong types are absent: a non-list output has no items, a non-string
        # status is no status.
        ({"output": {"0": MESSAGE}}, False),
        ({"output": "text"}, False),
        ({"output": [], "status": 1}, False),
        ({"output": [], "status": ""}, False),
        ({}, False),
        (DIAGNOSTIC, False),
        ({"status": "completed"}, False),
    ],
)
def test_row_2_counts_as_generation(value: object, expected: bool) -> None:
    assert counts_as_generation(value) is expected


# ROW-3: placeholders.


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"output": [], "status": None}, True),
        ({"object": "response"}, True),
        (NO_GENERATION, True),
        ({**NO_GENERATION, "metadata": {NG_NO_GENERATION_METADATA: True}}, True),
        ({**NO_GENERATION, "metadata": {NG_NO_GENERATION_METADATA: "True"}}, True),
        ({**NO_GENERATION, "metadata": {NG_NO_GENERATION_METADATA: "false"}}, False),
        ({**NO_GENERATION, "metadata": {NG_NO_GENERATION_METADATA: 1}}, False),
        ({**NO_GENERATION, "metadata": "ng_no_generation"}, False),
        (COMPLETED_EMPTY, False),
        (ANSWER, False),
        # Not typed, so not a response at all (ROW-1), let alone a placeholder.
        ({}, False),
        (DIAGNOSTIC, False),
    ],
)
def test_row_3_placeholder_response_is_not_generation(
    value: object, expected: bool
) -> None:
    assert is_placeholder(value) is expected
    assert has_saved_generation({"response": value}) is (
        counts_as_generation(value) and not expected
    )


# ROW-4: has_saved_generation.


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"response": ANSWER}, True),
        ({"response": COMPLETED_EMPTY}, True),
        ({"response": {"output": [], "status": None}}, False),
        ({"response": NO_GENERATION}, False),
        ({"response": {}}, False),
        ({"response": DIAGNOSTIC}, False),
        ({}, False),
        ({"response": None}, False),
        ({"response": [ANSWER]}, False),
        # ROW-4: `_ng_failure_response` is diagnostic only, never a generation.
        ({"_ng_failure_response": ANSWER}, False),
        # A native partial response is a kept answer (ROW-7), not a generation.
        ({"_ng_failure_partial_response": ANSWER}, False),
        # A judge failure keeps the model's real answer in `response`.
        ({"response": ANSWER, "_ng_failure_class": "judge_failed"}, True),
    ],
)
def test_row_4_has_saved_generation(row: Row, expected: bool) -> None:
    assert has_saved_generation(row) is expected


# ROW-5: legacy failure placeholders.


LEGACY_CLASSES = [
    "timeout_exceeded",
    "remote_agent_error",
    "kill_shaped",
    "transient",
    "legitimate",
    "incomplete",
    "skipped",
    "permanent",
]
PINCHBENCH = {"output": [EMPTY_MESSAGE], "status": None}
STIRRUP = {
    "id": "resp_abc-timeout",
    "output": [{**MESSAGE, "content": [{"type": "output_text", "text": "Timed out"}]}],
}


@pytest.mark.parametrize("failure_class", LEGACY_CLASSES)
def test_row_5_every_legacy_class_builds_placeholders(failure_class: str) -> None:
    row = {"_ng_failure_class": failure_class, "response": PINCHBENCH}
    assert is_legacy_placeholder(row)
    assert not has_saved_generation(row)


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        # The id suffixes, whatever the output holds.
        *(
            (
                {
                    "_ng_failure_class": "transient",
                    "response": {**STIRRUP, "id": f"r{s}"},
                },
                True,
            )
            for s in ("-failed", "-timeout", "-killed", "-skipped", "-incomplete")
        ),
        (
            {"_ng_failure_class": "transient", "response": {**STIRRUP, "id": "r-ok"}},
            False,
        ),
        ({"_ng_failure_class": "transient", "response": {**STIRRUP, "id": 5}}, False),
        # Exactly one assistant message whose text is empty.
        ({"_ng_failure_class": "timeout_exceeded", "response": PINCHBENCH}, True),
        (
            {
                "_ng_failure_class": "timeout_exceeded",
                "response": {"output": [{**EMPTY_MESSAGE, "content": []}]},
            },
            True,
        ),
        (
            {
                "_ng_failure_class": "timeout_exceeded",
                "response": {"output": [{**EMPTY_MESSAGE, "content": ""}]},
            },
            True,
        ),
        # ROW-61: every assistant message empty, however many.
        (
            {
                "_ng_failure_class": "timeout_exceeded",
                "response": {"output": [EMPTY_MESSAGE, EMPTY_MESSAGE]},
            },
            True,
        ),
        (
            {
                "_ng_failure_class": "timeout_exceeded",
                "response": {"output": [MESSAGE]},
            },
            False,
        ),
        (
            {
                "_ng_failure_class": "timeout_exceeded",
                "response": {"output": [{**EMPTY_MESSAGE, "role": "user"}]},
            },
            False,
        ),
        (
            {
                "_ng_failure_class": "timeout_exceeded",
                "response": {"output": [{**EMPTY_MESSAGE, "type": "reasoning"}]},
            },
            False,
        ),
        (
            {
                "_ng_failure_class": "timeout_exceeded",
                "response": {
                    "output": [
                        {
                            **EMPTY_MESSAGE,
                            "content": [{"type": "refusal", "refusal": "no"}],
                        }
                    ]
                },
            },
            False,
        ),
        # ROW-61: on a failure row of any class, never on a result row.
        ({"_ng_failure_class": "judge_failed", "response": PINCHBENCH}, True),
        ({"_ng_failure_class": "agent_timeout", "response": PINCHBENCH}, True),
        ({"_ng_failure_class": "tau2_agent_error", "response": PINCHBENCH}, True),
        # ROW-61: the new id suffixes, and harbor's failed status without output.
        *(
            (
                {
                    "_ng_failure_class": "permanent",
                    "response": {**STIRRUP, "id": f"r{s}"},
                },
                True,
            )
            for s in ("_failed", "-error", "-permanent-failure")
        ),
        (
            {
                "_ng_failure_class": "harbor_failed",
                "response": {"output": [], "status": "failed"},
            },
            True,
        ),
        (
            {
                "_ng_failure_class": "harbor_failed",
                "response": {"output": [MESSAGE], "status": "failed"},
            },
            False,
        ),
        (
            {
                "_ng_failure_class": "timeout_exceeded",
                "response": {"output": [EMPTY_MESSAGE, {"type": "function_call"}]},
            },
            False,
        ),
        ({"response": PINCHBENCH}, False),
        ({"response": {**STIRRUP, "id": "r-failed"}}, False),
        ({"_ng_failure_class": ["transient"], "response": PINCHBENCH}, False),
        ({"_ng_failure_class": "transient", "response": DIAGNOSTIC}, False),
    ],
)
def test_row_5_legacy_failure_placeholder(row: Row, expected: bool) -> None:
    assert is_legacy_placeholder(row) is expected
    if expected:
        assert not has_saved_generation(row)


def test_row_5_result_row_with_empty_message_still_counts() -> None:
    # An unmarked copy in OUT looks like a generation (nemo_gym_formats.md, case 54).
    assert has_saved_generation({"response": PINCHBENCH})


# ROW-6: keeps_response.


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"response": ANSWER}, True),
        ({"response": {"output": [], "status": None}}, True),
        ({"response": NO_GENERATION}, True),
        ({"_ng_failure_response": {"output": []}}, True),
        ({"_ng_failure_partial_response": {"object": "response"}}, True),
        ({"response": {}}, False),
        ({"response": DIAGNOSTIC}, False),
        ({"_ng_failure_response": DIAGNOSTIC}, False),
        ({"_ng_failure_partial_response": "partial"}, False),
        ({}, False),
    ],
)
def test_row_6_keeps_response(row: Row, expected: bool) -> None:
    assert keeps_response(row) is expected


# ROW-7: native partial responses.


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"_ng_failure_partial_response": {"output": []}}, True),
        ({"_ng_failure_partial_response": {"output": [], "status": None}}, True),
        ({"_ng_failure_partial_response": ANSWER}, True),
        ({"_ng_failure_partial_response": {}}, False),
        ({"_ng_failure_partial_response": DIAGNOSTIC}, False),
        ({"_ng_failure_response": ANSWER}, False),
        ({}, False),
    ],
)
def test_row_7_has_native_partial(row: Row, expected: bool) -> None:
    assert has_native_partial(row) is expected


# ROW-10: keeps_saved_answer.


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"response": ANSWER}, True),
        ({"response": COMPLETED_EMPTY}, True),
        ({"_ng_failure_partial_response": {"output": []}}, True),
        # `_ng_failure_response` is rejected by the outcome policy: diagnostic only.
        ({"_ng_failure_response": ANSWER}, False),
        (
            {
                "_ng_failure_response": ANSWER,
                "_ng_failure_partial_response": {"output": []},
            },
            True,
        ),
        ({"response": NO_GENERATION}, False),
        ({"response": {}}, False),
        ({"response": DIAGNOSTIC}, False),
        ({}, False),
        # A collector projection's own flag decides, either way.
        ({"_ng_collector_projection": {"kept_answer": True}}, True),
        (
            {"_ng_collector_projection": {"kept_answer": False}, "response": ANSWER},
            False,
        ),
        # Decision: a projection without a boolean flag falls back on the responses.
        (
            {"_ng_collector_projection": {"kept_answer": "yes"}, "response": ANSWER},
            True,
        ),
        ({"_ng_collector_projection": {}, "response": ANSWER}, True),
        ({"_ng_collector_projection": True}, False),
    ],
)
def test_row_10_keeps_saved_answer(row: Row, expected: bool) -> None:
    assert keeps_saved_answer(row) is expected


# ROW-12: a recorded grade.

MASKED = {"mask_sample": True, "response": ANSWER, "reward": 0.0}


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        # `_ng_grade` completed with a numeric reward always counts.
        ({"_ng_grade": {"status": "completed", "reward": 0.5}}, True),
        ({"_ng_grade": {"status": "completed", "reward": 1}}, True),
        (
            {
                "_ng_failure_class": "judge_failed",
                "_ng_grade": {"status": "completed", "reward": 0},
            },
            True,
        ),
        (
            {
                **MASKED,
                "failure_kind": "session_lost",
                "_ng_grade": {"status": "completed", "reward": 1},
            },
            True,
        ),
        ({"_ng_grade": {"status": "failed", "reward": 0.5}}, False),
        ({"_ng_grade": {"status": "completed", "reward": True}}, False),
        ({"_ng_grade": {"status": "completed", "reward": "1"}}, False),
        ({"_ng_grade": {"status": "completed"}}, False),
        ({"_ng_grade": "completed"}, False),
        # On a failure row a reward is a placeholder, never a grade.
        (
            {"_ng_failure_class": "judge_failed", "reward": 0.0, "response": ANSWER},
            False,
        ),
        ({"_ng_failure_record": {"failure": {}}, "reward": 1.0}, False),
        ({"_ng_omitted": True, "reward": 0.0}, False),
        # On a result row a numeric reward counts ...
        ({"reward": 0.0}, True),
        ({"reward": 1}, True),
        ({"reward": None}, False),
        ({"reward": "1.0"}, False),
        ({"reward": False}, False),
        ({}, False),
        # ... except the placeholder of an environment-masked, evaluation-side row.
        ({**MASKED, "failure_kind": "session_lost"}, False),
        ({**MASKED, "failure_kind": "session_lost", "failure_stage": "agent"}, False),
        (
            {
                **MASKED,
                "failure_kind": "verifier_error",
                "failure_stage": "verification",
            },
            False,
        ),
        ({**MASKED, "failure_kind": "judge_failed"}, False),
        (
            {
                **MASKED,
                "failure_kind": "transport_timeout",
                "failure_stage": "verification",
            },
            False,
        ),
        (
            {
                **MASKED,
                "mask_sample": None,
                "instance_config": {"mask_sample": True},
                "failure_kind": "session_lost",
            },
            False,
        ),
        # Grading precedes cleanup: a cleanup failure leaves a real grade.
        (
            {
                **MASKED,
                "failure_kind": "session_release_failed",
                "failure_stage": "cleanup",
            },
            True,
        ),
        ({**MASKED, "failure_kind": "judge_failed", "failure_stage": "cleanup"}, True),
        # Not masked, masked by another owner, or a kind that is not evaluation-side.
        ({**MASKED, "mask_sample": False, "failure_kind": "session_lost"}, True),
        (
            {
                **MASKED,
                "_ng_mask_owner": "token_capture",
                "failure_kind": "session_lost",
            },
            True,
        ),
        ({**MASKED, "failure_kind": "agent_timeout"}, True),
        ({**MASKED, "failure_kind": "osworld:proxy_setup_error"}, True),
        ({**MASKED, "failure_kind": "not_a_kind"}, True),
        # ROW-34: an alias is no registered kind, so its row's reward stands.
        ({**MASKED, "failure_kind": "remote_agent_error"}, True),
        ({**MASKED, "failure_kind": "judge_invalid"}, True),
        ({**MASKED}, True),
        (
            {**MASKED, "failure_kind": "provider_oom_killed", "failure_stage": "agent"},
            True,
        ),
        (
            {**MASKED, "failure_kind": "provider_oom_killed", "failure_stage": "seed"},
            False,
        ),
        # An applied class decides the side (ROW-50).
        (
            {**MASKED, "failure_kind": "session_lost", "_ng_result_class": "unknown"},
            True,
        ),
        ({**MASKED, "failure_kind": "session_lost", "_ng_result_class": "model"}, True),
        # Literal reading of "a regrade row of ROW-43": it keeps a saved answer;
        # without one, a regrade kind's reward stands.
        ({**MASKED, "response": None, "failure_kind": "judge_failed"}, True),
        # A masked candidate without a saved answer still has a placeholder reward.
        ({**MASKED, "response": None, "failure_kind": "session_lost"}, False),
    ],
)
def test_row_12_has_recorded_grade(row: Row, expected: bool) -> None:
    assert has_recorded_grade(row) is expected


def test_row_12_policy_can_move_the_placeholder() -> None:
    row = {**MASKED, "failure_kind": "session_lost"}
    to_model = RecoveryPolicy(side_overrides={"session_lost": "model"})
    assert not has_recorded_grade(row)
    assert has_recorded_grade(row, policy=to_model)
    timeout = {**MASKED, "failure_kind": "agent_timeout"}
    to_eval = RecoveryPolicy(side_overrides={"agent_timeout": "evaluation"})
    assert has_recorded_grade(timeout)
    assert not has_recorded_grade(timeout, policy=to_eval)
