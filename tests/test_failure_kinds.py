"""The failure-kind vocabulary, its aliases and its classifier (ROW-22, ROW-34)."""

from __future__ import annotations

import pytest

from ledger import (
    FAILURE_KINDS,
    RecoveryPolicy,
    is_namespaced,
    is_registered,
    kind_is,
    side,
)
from tests.internals import KIND_ALIASES, canonical_kind, is_transport_kind

EVALUATION = [
    "transport_unreachable",
    "transport_peer_drop",
    "transport_timeout",
    "transport_local_resource",
    "agent_request_failed",
    "agent_run_error",
    "environment_server_failed",
    "protocol_violation",
    "judge_failed",
    "judge_unparseable",
    "verifier_error",
    "provider_unavailable",
    "provider_quota_exhausted",
    "session_lost",
    "session_expired",
    "session_release_failed",
    "cancelled",
    "kill_shaped",
    "shutdown",
    "persistence_failed",
    "cohort_incomplete",
]
MODEL = ["agent_timeout", "agent_command_not_allowed"]


# ROW-34: the registered vocabulary.


def test_row_34_vocabulary_is_exactly_the_table() -> None:
    assert {*EVALUATION, *MODEL, "provider_oom_killed"} == FAILURE_KINDS
    assert len(FAILURE_KINDS) == 24


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("session_lost", True),
        ("provider_oom_killed", True),
        ("agent_timeout", True),
        # ROW-34: aliases and producer classes are not registered names.
        ("timeout_exceeded", False),
        ("judge_invalid", False),
        ("remote_agent_error", False),
        ("transient", False),
        ("skipped", False),
        ("gdpval:judge_invalid", False),
        ("Session_Lost", False),
        ("session_lost\n", False),
        ("", False),
        (None, False),
        (7, False),
        (["session_lost"], False),
    ],
)
def test_row_34_is_registered(kind: object, expected: bool) -> None:
    assert is_registered(kind) is expected


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("gdpval:judge_invalid", True),
        ("osworld:proxy_setup_error", True),
        ("a:b", True),
        ("session_lost", False),
        ("Gdpval:judge", False),
        ("gdpval:", False),
        (":judge", False),
        ("gdpval:judge:extra", False),
        ("gdpval:judge\n", False),
        ("1server:kind", False),
        (None, False),
        ({"a": "b"}, False),
    ],
)
def test_row_34_is_namespaced(kind: object, expected: bool) -> None:
    assert is_namespaced(kind) is expected


# ROW-22: one alias table for every comparison of kinds.


def test_row_22_alias_table() -> None:
    assert dict(KIND_ALIASES) == {
        "timeout_exceeded": "agent_timeout",
        "judge_invalid": "judge_unparseable",
        "remote_agent_error": "agent_run_error",
    }


@pytest.mark.parametrize(
    ("kind", "wanted", "expected"),
    [
        ("timeout_exceeded", ("agent_timeout",), True),
        ("agent_timeout", ("timeout_exceeded",), True),
        ("timeout_exceeded", ("timeout_exceeded",), True),
        ("judge_invalid", ("judge_unparseable",), True),
        ("judge_unparseable", ("judge_failed", "judge_invalid"), True),
        ("remote_agent_error", ("agent_run_error",), True),
        ("agent_run_error", ("agent_request_failed",), False),
        # ROW-22: other routing names are producer classes, matched only as written.
        ("transient", ("transient",), True),
        ("transient", ("agent_timeout",), False),
        ("agent_timeout", (), False),
        (None, ("agent_timeout",), False),
        (3, ("agent_timeout",), False),
    ],
)
def test_row_22_kind_is_matches_aliases(
    kind: object, wanted: tuple[str, ...], expected: bool
) -> None:
    assert kind_is(kind, *wanted) is expected


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("timeout_exceeded", "agent_timeout"),
        ("session_lost", "session_lost"),
        ("whatever", "whatever"),
        (None, None),
        (1.5, None),
    ],
)
def test_row_22_canonical_kind(kind: object, expected: str | None) -> None:
    assert canonical_kind(kind) == expected


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("transport_timeout", True),
        ("transport_unreachable", True),
        ("transport_weird", True),
        ("transport_x:y", False),
        ("agent_request_failed", False),
        (None, False),
    ],
)
def test_row_37_transport_kinds_by_prefix(kind: object, expected: bool) -> None:
    assert is_transport_kind(kind) is expected


# ROW-34: the classifier.


@pytest.mark.parametrize("kind", EVALUATION)
def test_row_34_evaluation_side_kinds(kind: str) -> None:
    assert side(kind) == "evaluation"
    assert side(kind, "verification") == "evaluation"


@pytest.mark.parametrize("kind", MODEL)
def test_row_34_model_side_kinds(kind: str) -> None:
    assert side(kind) == "model"
    assert side(kind, "agent") == "model"


@pytest.mark.parametrize(
    ("stage", "expected"),
    [
        ("agent", "model"),
        ("seed", "evaluation"),
        ("admission", "evaluation"),
        ("verification", "evaluation"),
        ("cleanup", "evaluation"),
        (None, None),
        ("elsewhere", None),
        (3, None),
    ],
)
def test_row_34_provider_oom_killed_by_stage(
    stage: object, expected: str | None
) -> None:
    assert side("provider_oom_killed", stage) == expected


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("timeout_exceeded", "model"),
        ("judge_invalid", "evaluation"),
        ("remote_agent_error", "evaluation"),
        ("transient", None),
        ("legitimate", None),
        ("gdpval:judge_invalid", None),
        ("not_a_kind", None),
        (None, None),
        ({"kind": "session_lost"}, None),
    ],
)
def test_row_34_aliases_apply_and_unregistered_is_none(
    kind: object, expected: str | None
) -> None:
    assert side(kind) == expected


@pytest.mark.parametrize(
    ("kind", "stage", "overrides", "expected"),
    [
        ("session_lost", None, {"session_lost": "model"}, "model"),
        ("agent_timeout", None, {"agent_timeout": "evaluation"}, "evaluation"),
        # An override named by its alias is stored under the shared name.
        ("agent_timeout", None, {"timeout_exceeded": "evaluation"}, "evaluation"),
        ("timeout_exceeded", None, {"agent_timeout": "evaluation"}, "evaluation"),
        ("session_lost", None, {"session_expired": "model"}, "evaluation"),
        # Decision: an override moves provider_oom_killed at any stage, even unknown.
        (
            "provider_oom_killed",
            None,
            {"provider_oom_killed": "evaluation"},
            "evaluation",
        ),
        ("provider_oom_killed", "seed", {"provider_oom_killed": "model"}, "model"),
    ],
)
def test_row_34_policy_side_overrides(
    kind: str, stage: str | None, overrides: dict[str, str], expected: str
) -> None:
    policy = RecoveryPolicy.model_validate({"side_overrides": overrides})
    assert side(kind, stage, policy=policy) == expected


@pytest.mark.parametrize(
    ("kind", "result_class", "expected"),
    [
        ("session_lost", "model", "model"),
        ("agent_timeout", "evaluation", "evaluation"),
        ("session_lost", "unknown", None),
        ("agent_timeout", "unknown", None),
        # The applied class answers even for an unregistered kind or none.
        ("gdpval:judge_invalid", "evaluation", "evaluation"),
        (None, "model", "model"),
        # Decision: a class this version does not know reads as unknown.
        ("session_lost", "infrastructure", None),
    ],
)
def test_row_34_result_class_decides_first(
    kind: object, result_class: str, expected: str | None
) -> None:
    assert side(kind, result_class=result_class) == expected


def test_row_34_rec_62_result_class_decides_before_policy() -> None:
    policy = RecoveryPolicy(side_overrides={"session_lost": "model"})
    assert (
        side("session_lost", policy=policy, result_class="evaluation") == "evaluation"
    )
    assert side("session_lost", policy=policy, result_class="unknown") is None
    assert side("session_lost", policy=policy, result_class=None) == "model"
