"""RecoveryPolicy: defaults, validation, immutability and digest (REC-60)."""

from __future__ import annotations

import copy
import hashlib
import json
import pickle
from typing import Any

import pydantic
import pytest

from ledger import RecoveryPolicy
from tests.internals import DEFAULT_POLICY


def test_rec_60_defaults() -> None:
    policy = RecoveryPolicy()
    assert policy.fault_share == 0.5
    assert dict(policy.side_overrides) == {}
    assert policy.regrade_kinds == ("judge_failed", "judge_unparseable")
    assert policy.retry_terminal_timeouts is False
    assert policy.max_free_attempts == 5
    assert policy.retry_invalid_judge_responses is False  # REC-82
    assert policy == DEFAULT_POLICY


def test_rec_60_plain_json_dict() -> None:
    assert RecoveryPolicy().to_json_dict() == {
        "fault_share": 0.5,
        "side_overrides": {},
        "regrade_kinds": ["judge_failed", "judge_unparseable"],
        "retry_terminal_timeouts": False,
        "max_free_attempts": 5,
        "retry_invalid_judge_responses": False,
    }


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"fault_share": 1},
        {"fault_share": 0.01, "retry_terminal_timeouts": True},
        {"side_overrides": {"session_lost": "model", "agent_timeout": "evaluation"}},
        {"regrade_kinds": ["gdpval:judge_invalid", "verifier_error"]},
        {"regrade_kinds": []},
        {"max_free_attempts": 1},
    ],
)
def test_rec_60_json_round_trip(fields: dict[str, Any]) -> None:
    policy = RecoveryPolicy.model_validate(fields)
    plain = policy.to_json_dict()
    assert json.loads(json.dumps(plain)) == plain
    again = RecoveryPolicy.model_validate(plain)
    assert again == policy
    assert again.digest() == policy.digest()
    assert hash(again) == hash(policy)


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"fault_shares": 0.5}, "fault_shares"),
        ({"fault_share": 0}, "fault_share"),
        ({"fault_share": -0.1}, "fault_share"),
        ({"fault_share": 1.01}, "fault_share"),
        ({"fault_share": float("nan")}, "fault_share"),
        ({"fault_share": True}, "fault_share"),
        ({"fault_share": "0.5"}, "fault_share"),
        ({"side_overrides": {"session_lost": "infrastructure"}}, "side_overrides"),
        (
            {
                "side_overrides": {
                    "timeout_exceeded": "model",
                    "agent_timeout": "evaluation",
                }
            },
            "side_overrides",
        ),
        ({"side_overrides": ["session_lost"]}, "side_overrides"),
        ({"regrade_kinds": [""]}, "regrade_kinds"),
        ({"regrade_kinds": ["judge failed"]}, "regrade_kinds"),
        ({"side_overrides": {"": "model"}}, "side_overrides"),
        ({"retry_invalid_judge_responses": 1}, "retry_invalid_judge_responses"),
        ({"regrade_kinds": "judge_failed"}, "regrade_kinds"),
        ({"regrade_kinds": [3]}, "regrade_kinds"),
        ({"retry_terminal_timeouts": "yes"}, "retry_terminal_timeouts"),
        ({"retry_terminal_timeouts": 1}, "retry_terminal_timeouts"),
        ({"max_free_attempts": 0}, "max_free_attempts"),
        ({"max_free_attempts": 2.0}, "max_free_attempts"),
    ],
)
def test_rec_60_refuses_unknown_fields_and_bad_values(
    fields: dict[str, Any], where: str
) -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        RecoveryPolicy.model_validate(fields)
    assert where in str(caught.value)


def test_rec_60_kind_names_are_normalized() -> None:
    policy = RecoveryPolicy(
        side_overrides={"timeout_exceeded": "evaluation", "session_lost": "model"},
        regrade_kinds=("judge_invalid", "judge_unparseable", "judge_failed"),
    )
    assert dict(policy.side_overrides) == {
        "agent_timeout": "evaluation",
        "session_lost": "model",
    }
    assert list(policy.side_overrides) == ["agent_timeout", "session_lost"]
    assert policy.regrade_kinds == ("judge_failed", "judge_unparseable")


def test_rec_60_frozen_all_the_way_down() -> None:
    policy = RecoveryPolicy(side_overrides={"session_lost": "model"})
    with pytest.raises(pydantic.ValidationError):
        policy.fault_share = 0.9  # type: ignore[misc]
    with pytest.raises(TypeError):
        policy.side_overrides["session_lost"] = "evaluation"  # type: ignore[index]
    assert {policy, RecoveryPolicy(side_overrides={"session_lost": "model"})} == {
        policy
    }


def test_rec_60_copies_and_pickles() -> None:
    policy = RecoveryPolicy(side_overrides={"session_lost": "model"}, fault_share=0.3)
    assert copy.deepcopy(policy) == policy
    assert pickle.loads(pickle.dumps(policy)) == policy
    assert RecoveryPolicy.model_validate_json(policy.model_dump_json()) == policy
    assert policy.side_overrides == {"session_lost": "model"}
    again = RecoveryPolicy(side_overrides=policy.side_overrides, fault_share=0.3)
    assert again == policy


@pytest.mark.parametrize(
    "fields",
    [
        {"side_overrides": {"sesion_lost": "model"}},
        {"side_overrides": {"gdpval:judge_invalid": "model"}},
        {"side_overrides": {"transient": "model"}},
        {"regrade_kinds": ["judge_faild"]},
    ],
)
def test_rec_80_the_value_alone_takes_any_class_name(fields: dict[str, Any]) -> None:
    """REC-80: whether a name is a class of the run is checked when the run's
    policy changes (tests/test_nemo_gym_070_policy.py), not by the value."""
    policy = RecoveryPolicy.model_validate(fields)
    assert RecoveryPolicy.model_validate(policy.to_json_dict()) == policy


def test_rec_60_digest_is_sha256_of_canonical_json() -> None:
    policy = RecoveryPolicy(side_overrides={"session_lost": "model"})
    canonical = json.dumps(
        policy.to_json_dict(), sort_keys=True, separators=(",", ":")
    ).encode()
    assert policy.digest() == hashlib.sha256(canonical).hexdigest()
    # Pinned: the defaults' digest changes only when a default or a field does.
    assert DEFAULT_POLICY.digest() == (
        "4cbe47d4038842d063ced0d99d6095c44f50d2e8892f41852162a5208a1d1bb9"
    )


def test_rec_60_digest_ignores_spelling_but_not_meaning() -> None:
    spelled = RecoveryPolicy(
        regrade_kinds=("judge_invalid", "judge_failed"),
        side_overrides={"timeout_exceeded": "evaluation"},
    )
    plain = RecoveryPolicy(side_overrides={"agent_timeout": "evaluation"})
    assert spelled.digest() == plain.digest()
    assert RecoveryPolicy(fault_share=0.6).digest() != DEFAULT_POLICY.digest()
    moved = RecoveryPolicy(retry_terminal_timeouts=True)
    assert moved.digest() != DEFAULT_POLICY.digest()
