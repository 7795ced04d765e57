"""row_facts: every policy-independent fact at once, and the rules over stored facts
(rows.md, "Facts stored in events")."""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import (
    FAILURE_KINDS,
    RecoveryPolicy,
    RowError,
    RowFacts,
    facts_rules,
    rollout_id,
    row_facts,
)
from tests.internals import (
    KIND_ALIASES,
    LEGACY_FAILURE_CLASSES,
    STAGES,
    CallFacts,
    CallsSummary,
    FailureEventFacts,
    RejudgmentRef,
    has_failure_evidence,
    reduce_call,
)
from tests.internals import rules as rows

Row = dict[str, Any]
ENCODER = msgspec.json.Encoder(order="deterministic")
DECODER = msgspec.json.Decoder(RowFacts)

MESSAGE: Row = {
    "type": "message",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "x"}],
}
ANSWER: Row = {
    "id": "resp_1",
    "object": "response",
    "output": [MESSAGE],
    "status": None,
}


# The facts of whole rows.


def test_facts_of_a_typed_failure_row() -> None:
    row = {
        "_ng_task_index": 3,
        "_ng_rollout_index": 0,
        "_ng_attempt_index": 1,
        "_ng_run_id": "run-7",
        "_ng_failure_class": "timeout_exceeded",
        "_ng_failure_terminal": False,
        "_ng_failure_record": {
            "schema_version": 1,
            "source": "environment",
            "delivery": "delivered",
            "failure": {
                "failure_kind": "agent_timeout",
                "stage": "agent",
                "terminal": True,
            },
            "http_status": 504,
            "failure_events": [
                {
                    "failure_kind": "session_lost",
                    "http_status": 503,
                    "stage": "seed",
                    "source": "session",
                },
                "not an event",
            ],
            "selected_event": 0,
        },
        "reward": 0.0,
        "response": ANSWER,
        "elapsed_seconds": 42.0,
        "ng_model_call_capture": {
            "calls": [
                {"status_code": 200, "started_at": 0.0, "latency_total_ms": 1000},
                {"status_code": 503, "started_at": 1.0, "latency_total_ms": 500},
                {"status_code": 200, "started_at": 2.0, "latency_total_ms": 1000},
            ]
        },
    }
    assert row_facts(row) == RowFacts(
        run_id="run-7",
        row_kind="failure",
        selected_kind="session_lost",
        own_kind="agent_timeout",
        failure_class="timeout_exceeded",
        stage="seed",
        source="session",
        record_source="environment",
        terminal=True,
        delivery="delivered",
        has_saved_generation=True,
        legacy_placeholder=False,
        keeps_response=True,
        has_native_partial=False,
        keeps_saved_answer=True,
        grade_record=None,
        reward=None,
        masked=False,
        mask_owner=None,
        omitted=False,
        rejudgment_of=None,
        result_class=None,
        wallclock=42.0,
        failure_events=(
            FailureEventFacts(
                kind="session_lost", stage="seed", source="session", http_status=503
            ),
        ),
        calls=CallsSummary(
            count=3,
            span=3.0,
            last=CallFacts(status_code=200, started_at=2.0, duration_ms=1000.0),
            evidence=(
                (1, CallFacts(status_code=503, started_at=1.0, duration_ms=500.0)),
            ),
        ),
        record_failure=FailureEventFacts(
            kind="agent_timeout", stage="agent", source="environment", http_status=504
        ),
    )


def test_facts_of_a_masked_result_row() -> None:
    row = {
        "mask_sample": True,
        "_ng_mask_owner": "environment",
        "failure_kind": "judge_failed",
        "failure_stage": "verification",
        "_ng_result_class": "unknown",
        "_ng_grade": {"status": "completed", "reward": 1},
        "reward": 0,
        "_ng_rejudgment": {"task": 1, "rollout": 2, "attempt": 3},
        "response": {"output": [], "status": "completed"},
    }
    facts = row_facts(row)
    assert facts.row_kind == "result"
    assert facts.delivery is None
    assert (facts.selected_kind, facts.own_kind, facts.stage) == (
        "judge_failed",
        "judge_failed",
        "verification",
    )
    assert (facts.grade_record, facts.reward) == (1.0, 0.0)
    assert (facts.masked, facts.mask_owner, facts.result_class) == (
        True,
        "environment",
        "unknown",
    )
    assert facts.rejudgment_of == RejudgmentRef(task=1, rollout=2, attempt=3)
    assert facts.has_saved_generation
    assert facts.keeps_saved_answer
    assert facts.calls == CallsSummary()


@pytest.mark.parametrize(
    ("row", "field", "expected"),
    [
        (
            {
                "_ng_omitted": True,
                "_ng_failure_class": "skipped",
                "_ng_failure_terminal": True,
            },
            "omitted",
            True,
        ),
        (
            {"_ng_omitted": True, "_ng_failure_class": "skipped"},
            "delivery",
            "possibly_delivered",
        ),
        ({"_ng_failure_class": "transient"}, "delivery", "possibly_delivered"),
        ({"_ng_failure_record": {"delivery": "not_sent"}}, "delivery", "not_sent"),
        (
            {"_ng_failure_record": {"delivery": ["not_sent"]}},
            "delivery",
            "possibly_delivered",
        ),
        (
            {"_ng_failure_class": "skipped", "_ng_failure_terminal": True},
            "terminal",
            True,
        ),
        # REC-81: any JSON-true stamp counts, as NeMo Gym 0.7.0 reads it.
        (
            {"_ng_failure_class": "skipped", "_ng_failure_terminal": "true"},
            "terminal",
            True,
        ),
        ({"_ng_failure_terminal": 0}, "terminal", False),
        ({"_ng_failure_record": {"failure": {"terminal": 1}}}, "terminal", False),
        ({"_ng_failure_record": {"failure": {"terminal": True}}}, "terminal", True),
        ({"mask_sample": True}, "mask_owner", "environment"),
        (
            {"mask_sample": True, "_ng_mask_owner": "token_capture"},
            "mask_owner",
            "token_capture",
        ),
        ({"mask_sample": True, "_ng_mask_owner": 3}, "mask_owner", "environment"),
        ({"_ng_mask_owner": "token_capture"}, "mask_owner", "token_capture"),
        ({}, "mask_owner", None),
        (
            {"_ng_rejudgment": {"admission_id": "adm-1"}},
            "rejudgment_of",
            RejudgmentRef(admission_id="adm-1"),
        ),
        ({"_ng_rejudgment": {}}, "rejudgment_of", RejudgmentRef()),
        ({"_ng_rejudgment": "adm-1"}, "rejudgment_of", None),
        ({"_ng_run_id": 5}, "run_id", None),
        ({"reward": float("nan")}, "reward", None),
        ({"reward": 10**400}, "reward", None),
        (
            {"_ng_grade": {"status": "completed", "reward": float("inf")}},
            "grade_record",
            None,
        ),
        ({"_ng_failure_class": "transient", "reward": 0.0}, "reward", None),
        # Indexes beyond a signed 64-bit integer cannot be stored: absent.
        (
            {"_ng_rejudgment": {"task": 2**63 - 1}},
            "rejudgment_of",
            RejudgmentRef(task=2**63 - 1),
        ),
        (
            {"_ng_rejudgment": {"task": 2**63, "attempt": 10**5000}},
            "rejudgment_of",
            RejudgmentRef(),
        ),
        # A lone surrogate is no text (it cannot be encoded as UTF-8): absent.
        ({"failure_kind": "session_\ud800"}, "selected_kind", None),
        ({"_ng_run_id": "\udfff"}, "run_id", None),
        ({"_ng_run_id": "run-é"}, "run_id", "run-é"),
    ],
)
def test_single_facts(row: Row, field: str, expected: object) -> None:
    assert getattr(row_facts(row), field) == expected


@pytest.mark.parametrize("value", [None, [], [1, 2], "row", 3, 2.5, True])
def test_a_value_that_is_no_object_has_empty_facts(value: object) -> None:
    assert row_facts(value) == RowFacts()


def test_huge_and_deep_values_are_read_without_recursion() -> None:
    deep: Any = "x"
    for _ in range(20_000):
        deep = [deep]
    row = {
        "response": {"output": deep, "status": "x" * 1_000_000},
        "_ng_failure_record": {
            "failure_events": [deep] * 1000,
            "selected_event": 10**100,
        },
        "ng_model_call_capture": {"calls": [{"status_code": 10**1000}] * 10_000},
    }
    facts = row_facts(row)
    assert facts.has_saved_generation
    assert facts.calls.count == 10_000
    assert facts.calls.evidence == ()


# Stored facts: deterministic bytes and a lossless round trip.


def test_facts_encode_deterministically_and_round_trip() -> None:
    facts = row_facts(
        {
            "mask_sample": True,
            "failure_kind": "session_lost",
            "reward": 0.5,
            "elapsed_seconds": 3,
        }
    )
    encoded = ENCODER.encode(facts)
    assert encoded == ENCODER.encode(
        row_facts(
            copy.deepcopy(
                {
                    "mask_sample": True,
                    "failure_kind": "session_lost",
                    "reward": 0.5,
                    "elapsed_seconds": 3,
                }
            )
        )
    )
    assert DECODER.decode(encoded) == facts


# Hypothesis strategies: arbitrary JSON, and rows shaped like the contract.

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.text(st.characters(categories=["Cs", "Ll"]), max_size=3),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=25,
)
KINDS = st.sampled_from(
    sorted(FAILURE_KINDS)
    + sorted(KIND_ALIASES)
    + sorted(LEGACY_FAILURE_CLASSES)
    + ["gdpval:judge_invalid", "junk", ""]
)
STAGE = st.sampled_from([*STAGES, None, "elsewhere"])
SOURCE = st.sampled_from(
    [
        "sandbox",
        "session",
        "provider",
        "tool_server",
        "model",
        "collector",
        "environment",
        None,
    ]
)
STATUS = st.sampled_from([None, 200, 400, 408, 429, 500, 502, 503, 504, "503", True])
CATEGORY = st.sampled_from(
    [
        None,
        "timeout",
        "rate_limit",
        "upstream_error",
        "connection",
        "stream_truncated",
        "cancelled",
        "incomplete",
        "auth",
    ]
)
SECONDS = st.floats(min_value=0, max_value=1000) | st.sampled_from(
    ["2026-08-22T10:00:00Z", "bad"]
)


def some(specific: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly ``specific`` values, sometimes any JSON value (a wrong type)."""
    return st.one_of(specific, specific, specific, JSON)


def obj(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects with any subset of ``fields``."""
    return st.fixed_dictionaries({}, optional={k: some(v) for k, v in fields.items()})


EVENT = obj(failure_kind=KINDS, stage=STAGE, source=SOURCE, http_status=STATUS)
CALL = obj(
    status_code=STATUS,
    upstream_status_code=STATUS,
    error_category=CATEGORY,
    failure_events=st.lists(EVENT, max_size=2),
    started_at=SECONDS,
    latency_total_ms=st.floats(min_value=0, max_value=100_000),
    duration_ms=st.floats(min_value=0, max_value=100_000),
)
CALLS = st.lists(CALL, max_size=5)
RESPONSE = st.sampled_from(
    [
        ANSWER,
        {"output": [], "status": "completed"},
        {"output": [], "status": None},
        {"output": [MESSAGE | {"content": [{"text": ""}]}]},
        {"id": "r-timeout", "output": []},
        {"output": [], "status": "completed", "metadata": {"ng_no_generation": "true"}},
        {},
        {"error": "boom"},
    ]
)
RECORD = obj(
    source=st.sampled_from(["environment", "collector"]),
    delivery=st.sampled_from(["not_sent", "possibly_delivered", "delivered", "maybe"]),
    failure=obj(failure_kind=KINDS, stage=STAGE, terminal=st.booleans()),
    failure_events=st.lists(EVENT, max_size=3),
    selected_event=st.integers(min_value=-1, max_value=3),
    http_status=STATUS,
)
SANDBOX = obj(
    type=st.just("sandbox"),
    role=st.sampled_from(["agent", "verifier", "environment", "judge"]),
    outcome=st.sampled_from(["failed", "oom", "completed", "unknown"]),
    recovered=st.booleans(),
)
ROWS = obj(
    _ng_run_id=st.text(max_size=5),
    _ng_failure_class=KINDS,
    _ng_failure_terminal=st.booleans(),
    _ng_failure_record=RECORD,
    _ng_omitted=st.booleans(),
    failure_kind=KINDS,
    failure_stage=STAGE,
    agent_timeout_error=st.integers(0, 1),
    response=RESPONSE,
    _ng_failure_response=RESPONSE,
    _ng_failure_partial_response=RESPONSE,
    _ng_collector_projection=obj(kept_answer=st.booleans(), model_calls=CALLS),
    _ng_grade=obj(
        status=st.sampled_from(["completed", "failed"]), reward=st.floats(0, 1)
    ),
    reward=st.floats(0, 1),
    mask_sample=st.booleans(),
    instance_config=obj(mask_sample=st.booleans()),
    _ng_mask_owner=st.sampled_from(["environment", "token_capture"]),
    _ng_rejudgment=obj(admission_id=st.text(max_size=4)),
    _ng_result_class=st.sampled_from(["evaluation", "model", "unknown", "other"]),
    elapsed_seconds=st.floats(min_value=0, max_value=1000),
    ng_model_call_capture=obj(calls=CALLS),
    ng_trajectory=obj(
        model_calls=st.lists(
            obj(
                response_metadata=CALL,
                started_at=SECONDS,
                duration_ms=st.floats(0, 10**5),
            ),
            max_size=3,
        )
    ),
    ng_agent_observations=obj(records=st.lists(SANDBOX, max_size=3)),
)
#: Environment-masked result rows, the inputs of ROW-40 .. ROW-44.
MASKED_ROWS = st.fixed_dictionaries(
    {"mask_sample": st.just(True), "failure_kind": KINDS},
    optional={
        "response": RESPONSE,
        "_ng_failure_partial_response": RESPONSE,
        "_ng_grade": obj(status=st.just("completed"), reward=st.floats(0, 1)),
        "reward": st.floats(0, 1),
        "failure_stage": STAGE,
        "_ng_mask_owner": st.sampled_from(["environment", "token_capture"]),
        "_ng_result_class": st.sampled_from(["evaluation", "model", "unknown"]),
        "_ng_rejudgment": obj(admission_id=st.text(max_size=4)),
        "_ng_collector_projection": obj(kept_answer=st.booleans()),
    },
)
#: Failure rows with a typed record and events, the inputs of ROW-33 .. ROW-37.
FAILURE_ROWS = st.fixed_dictionaries(
    {
        "_ng_failure_record": st.fixed_dictionaries(
            {
                "source": st.sampled_from(["environment", "collector"]),
                "failure": obj(failure_kind=KINDS, stage=STAGE),
                "failure_events": st.lists(EVENT, min_size=1, max_size=3),
            },
            optional={
                "selected_event": st.integers(min_value=-1, max_value=3),
                "delivery": st.sampled_from(["not_sent", "delivered"]),
            },
        )
    },
    optional={
        "_ng_failure_class": KINDS,
        "response": RESPONSE,
        "_ng_failure_partial_response": RESPONSE,
        "elapsed_seconds": st.floats(min_value=0, max_value=100),
        "ng_model_call_capture": obj(calls=CALLS),
    },
)
CONTRACT_ROWS = ROWS | MASKED_ROWS | FAILURE_ROWS
POLICIES = st.none() | st.builds(
    RecoveryPolicy,
    fault_share=st.floats(min_value=0.01, max_value=1),
    side_overrides=st.dictionaries(
        st.sampled_from(sorted(FAILURE_KINDS)),
        st.sampled_from(["evaluation", "model"]),
        max_size=3,
    ),
    regrade_kinds=st.lists(
        st.sampled_from(
            [
                "judge_failed",
                "judge_unparseable",
                "session_lost",
                "transport_timeout",
                "gdpval:judge_invalid",
            ]
        ),
        max_size=3,
    ).map(tuple),
)

FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _floats(value: object) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [f for v in value.values() for f in _floats(v)]
    if isinstance(value, list):
        return [f for v in value for f in _floats(v)]
    return []


ROW_KEYS = [
    "response",
    "_ng_failure_record",
    "_ng_failure_class",
    "failure_kind",
    "failure_stage",
    "ng_model_call_capture",
    "ng_trajectory",
    "ng_agent_observations",
    "_ng_grade",
    "reward",
    "mask_sample",
    "instance_config",
    "_ng_rejudgment",
    "_ng_collector_projection",
    "elapsed_seconds",
    "_ng_failure_partial_response",
    "_ng_omitted",
    "_ng_result_class",
]
#: Any JSON value, or an object of the contract's keys holding any JSON values.
ANY_ROW = JSON | st.dictionaries(st.sampled_from(ROW_KEYS), JSON, max_size=8)


@FAST
@given(ANY_ROW)
def test_row_facts_never_raises_on_any_json_and_is_deterministic(value: object) -> None:
    facts = row_facts(value)
    encoded = ENCODER.encode(facts)
    assert encoded == ENCODER.encode(row_facts(copy.deepcopy(value)))
    assert DECODER.decode(encoded) == facts
    # msgspec would write NaN or infinity as null silently: none may be there.
    assert all(math.isfinite(f) for f in _floats(msgspec.to_builtins(facts)))


INDEX = st.integers(min_value=-2, max_value=2**64) | st.just(10**5000) | JSON


@FAST
@given(
    ANY_ROW
    | st.fixed_dictionaries(
        {"_ng_task_index": INDEX, "_ng_rollout_index": INDEX},
        optional={"_ng_rollout_id": st.none() | st.text(max_size=8) | JSON},
    )
)
def test_row_24_rollout_id_raises_only_row_error(value: object) -> None:
    row = value if isinstance(value, dict) else {}
    message = ""
    try:
        ident = rollout_id(row)
    except RowError as error:
        message = str(error)
        ident = "x"
    assert len(message) < 400  # a short message naming the row, never the whole value
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", ident)
    assert not re.search(r"-a[0-9]+\Z", ident)


# Each policy-dependent rule: rule(row) == rule(row_facts(row)), also on the
# facts as stored (encoded and decoded), so projections read the same answers.

RULES: list[tuple[Callable[..., object], Callable[..., object]]] = [
    (rows.has_recorded_grade, facts_rules.has_recorded_grade),
    (rows.faults_own_window, facts_rules.faults_own_window),
    (rows.sandbox_or_tool_fault, facts_rules.sandbox_or_tool_fault),
    (rows.is_infrastructure_agent_timeout, facts_rules.is_infrastructure_agent_timeout),
    (rows.is_final_agent_timeout, facts_rules.is_final_agent_timeout),
    (rows.masked_candidate_kind, facts_rules.masked_candidate_kind),
    (rows.masked_infrastructure_kind, facts_rules.masked_infrastructure_kind),
    (rows.masked_kept_answer_kind, facts_rules.masked_kept_answer_kind),
    (rows.masked_regrade_kind, facts_rules.masked_regrade_kind),
    (rows.masked_without_artifact_kind, facts_rules.masked_without_artifact_kind),
]


def test_every_policy_dependent_row_rule_has_a_facts_rule() -> None:
    names = {row_rule.__name__ for row_rule, _ in RULES}
    assert names == {facts_rule.__name__ for _, facts_rule in RULES}
    others = {"route_failure", "is_server_fault_call", "kind_side", "is_regrade"}
    assert names | others == set(facts_rules.__all__)


@FAST
@given(row=CONTRACT_ROWS, policy=POLICIES)
def test_row_rules_equal_facts_rules_over_stored_facts(
    row: Row, policy: RecoveryPolicy | None
) -> None:
    facts = row_facts(row)
    encoded = ENCODER.encode(facts)
    assert encoded == ENCODER.encode(row_facts(copy.deepcopy(row)))
    stored = DECODER.decode(encoded)
    assert stored == facts
    assert all(math.isfinite(f) for f in _floats(msgspec.to_builtins(facts)))
    for row_rule, facts_rule in RULES:
        expected = row_rule(row, policy=policy)
        assert facts_rule(facts, policy) == expected, row_rule.__name__
        assert facts_rule(stored, policy) == expected, row_rule.__name__
    assert rows.route_failure(row) == facts_rules.route_failure(stored)
    _rules_agree(facts, policy)


@FAST
@given(call=CALL, policy=POLICIES)
def test_row_31_call_rule_equals_facts_rule(
    call: Row, policy: RecoveryPolicy | None
) -> None:
    reduced = reduce_call(call)
    expected = rows.is_server_fault_call(call, policy=policy)
    assert facts_rules.is_server_fault_call(reduced, policy) == expected
    assert rows.is_server_fault_call(reduced, policy=policy) == expected
    # ROW-32 reads faulted calls from the summary's evidence: none is left out.
    assert not expected or has_failure_evidence(reduced)


def _rules_agree(facts: RowFacts, policy: RecoveryPolicy | None) -> None:
    # ROW-44 is ROW-42; ROW-41 and ROW-42 split ROW-40 by the saved answer (ROW-11).
    candidate = facts_rules.masked_candidate_kind(facts, policy)
    infra = facts_rules.masked_infrastructure_kind(facts, policy)
    kept = facts_rules.masked_kept_answer_kind(facts, policy)
    assert infra is None or (infra == candidate and not facts.keeps_saved_answer)
    assert kept is None or (kept == candidate and facts.keeps_saved_answer)
    assert facts_rules.masked_without_artifact_kind(facts, policy) == kept
    # ROW-40 and ROW-43 never name the same row.
    assert candidate is None or facts_rules.masked_regrade_kind(facts, policy) is None
    # ROW-36 excludes ROW-35.
    final = facts_rules.is_final_agent_timeout(facts, policy)
    assert not (final and facts_rules.is_infrastructure_agent_timeout(facts, policy))


API_ROW_NAMES = [
    "row_facts",
    "has_saved_generation",
    "keeps_response",
    "has_native_partial",
    "keeps_saved_answer",
    "has_recorded_grade",
    "selected_failure_kind",
    "final_context",
    "kind_is",
    "rollout_wallclock",
    "rollout_id",
    "model_calls",
    "is_server_fault_call",
    "faults_own_window",
    "sandbox_or_tool_fault",
    "is_infrastructure_agent_timeout",
    "is_final_agent_timeout",
    "route_failure",
    "masked_candidate_kind",
    "masked_infrastructure_kind",
    "masked_kept_answer_kind",
    "masked_regrade_kind",
    "masked_without_artifact_kind",
    "applied_result_class",
]


def test_every_row_function_of_api_md_is_in_ledger_rows() -> None:
    assert set(API_ROW_NAMES) <= set(rows.__all__)
    assert all(callable(getattr(rows, name)) for name in API_ROW_NAMES)
    assert all(getattr(rows, name).__doc__ for name in rows.__all__)
