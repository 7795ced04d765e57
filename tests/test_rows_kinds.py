"""Routing, kinds, stages, time, ids and applied classes (ROW-20..ROW-24, ROW-50)."""

from __future__ import annotations

from typing import Any

import pytest

from ledger import (
    RowError,
    applied_result_class,
    final_context,
    rollout_id,
    rollout_wallclock,
    selected_failure_kind,
)
from tests.internals import FinalContext, own_failure_kind, row_kind, row_route

Row = dict[str, Any]


def record(**fields: Any) -> Row:
    """A typed failure record (rows.md), with the given fields."""
    return {"schema_version": 1, "source": "environment", **fields}


# Routing (rows.md, "Routing").


@pytest.mark.parametrize(
    ("row", "route", "kind"),
    [
        ({"reward": 1.0}, "result", "result"),
        ({"mask_sample": True, "failure_kind": "session_lost"}, "result", "result"),
        ({}, "result", "result"),
        ({"_ng_failure_class": "transient"}, "failure", "failure"),
        ({"_ng_failure_record": record(failure={})}, "failure", "failure"),
        (
            {
                "_ng_failure_class": "skipped",
                "_ng_failure_terminal": True,
                "_ng_omitted": True,
            },
            "omission",
            "omission",
        ),
        ({"_ng_omitted": True}, "omission", "omission"),
        # `_ng_no_persist`: written nowhere; the facts still name the row's kind.
        (
            {"_ng_no_persist": True, "_ng_failure_class": "kill_shaped"},
            "nowhere",
            "failure",
        ),
        ({"_ng_no_persist": True, "_ng_omitted": True}, "nowhere", "omission"),
        # Wrong types are absent: such a row is written, never silently dropped.
        (
            {"_ng_no_persist": "yes", "_ng_failure_class": "kill_shaped"},
            "failure",
            "failure",
        ),
        ({"_ng_failure_class": None}, "result", "result"),
        ({"_ng_failure_class": ""}, "result", "result"),
        ({"_ng_failure_record": "boom"}, "result", "result"),
        ({"_ng_omitted": 1, "_ng_failure_class": "skipped"}, "failure", "failure"),
    ],
)
def test_routing_of_rows(row: Row, route: str, kind: str) -> None:
    assert row_route(row) == route
    assert row_kind(row) == kind


# ROW-20: the selected failure kind.

EVENTS = [
    {"failure_kind": "transport_peer_drop", "stage": "agent", "source": "model"},
    {"failure_kind": "session_lost", "stage": "seed", "source": "session"},
]


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        # The selected event's kind wins over everything else.
        (
            {
                "_ng_failure_class": "transient",
                "_ng_failure_record": record(
                    failure={"failure_kind": "agent_run_error"},
                    failure_events=EVENTS,
                    selected_event=1,
                ),
            },
            "session_lost",
        ),
        (
            {"_ng_failure_record": record(failure_events=EVENTS, selected_event=0)},
            "transport_peer_drop",
        ),
        # A selected index that names no event: None, never the row's own kind.
        (
            {
                "failure_kind": "agent_timeout",
                "_ng_failure_record": record(
                    failure={"failure_kind": "agent_timeout"},
                    failure_events=EVENTS,
                    selected_event=2,
                ),
            },
            None,
        ),
        (
            {
                "_ng_failure_record": record(
                    failure={"failure_kind": "x"}, selected_event=0
                )
            },
            None,
        ),
        (
            {"_ng_failure_record": record(failure_events=EVENTS, selected_event=-1)},
            None,
        ),
        (
            {
                "_ng_failure_record": record(
                    failure_events=["session_lost"], selected_event=0
                )
            },
            None,
        ),
        (
            {
                "_ng_failure_record": record(
                    failure_events=[{"stage": "agent"}], selected_event=0
                )
            },
            None,
        ),
        # Decision: a selected_event that is no integer is absent.
        (
            {
                "_ng_failure_record": record(
                    failure={"failure_kind": "judge_failed"},
                    failure_events=EVENTS,
                    selected_event="1",
                )
            },
            "judge_failed",
        ),
        (
            {
                "_ng_failure_record": record(
                    failure={"failure_kind": "judge_failed"},
                    failure_events=EVENTS,
                    selected_event=None,
                )
            },
            "judge_failed",
        ),
        (
            {
                "_ng_failure_record": record(
                    failure={"failure_kind": "judge_failed"},
                    failure_events=EVENTS,
                    selected_event=True,
                )
            },
            "judge_failed",
        ),
        # Otherwise the row's own kind, in order.
        (
            {
                "_ng_failure_record": record(
                    failure={"failure_kind": "verifier_error"}
                ),
                "failure_kind": "session_lost",
                "_ng_failure_class": "transient",
                "agent_timeout_error": 1,
            },
            "verifier_error",
        ),
        (
            {
                "failure_kind": "session_lost",
                "_ng_failure_class": "transient",
                "agent_timeout_error": 1,
            },
            "session_lost",
        ),
        (
            {"_ng_failure_class": "timeout_exceeded", "agent_timeout_error": 1},
            "timeout_exceeded",
        ),
        ({"agent_timeout_error": 1}, "agent_timeout"),
        ({"agent_timeout_error": True}, "agent_timeout"),
        ({"agent_timeout_error": 0}, None),
        ({"agent_timeout_error": None}, None),
        ({"failure_kind": 7, "agent_timeout_error": 1}, "agent_timeout"),
        (
            {
                "_ng_failure_record": record(failure={"failure_kind": ""}),
                "failure_kind": "session_lost",
            },
            "session_lost",
        ),
        ({}, None),
    ],
)
def test_row_20_selected_failure_kind(row: Row, expected: str | None) -> None:
    assert selected_failure_kind(row) == expected


def test_row_20_own_kind_ignores_the_selected_event() -> None:
    row = {
        "_ng_failure_record": record(
            failure={"failure_kind": "agent_timeout"},
            failure_events=EVENTS,
            selected_event=9,
        )
    }
    assert selected_failure_kind(row) is None
    assert own_failure_kind(row) == "agent_timeout"


# ROW-21: the final stage and source.


def sandbox(role: str, outcome: str = "failed", **extra: Any) -> Row:
    """One `ng_agent_observations` sandbox record."""
    return {"type": "sandbox", "role": role, "outcome": outcome, **extra}


@pytest.mark.parametrize(
    ("row", "stage", "source"),
    [
        (
            {
                "failure_stage": "verification",
                "_ng_failure_record": record(
                    failure={"stage": "agent"}, failure_events=EVENTS, selected_event=1
                ),
            },
            "seed",
            "session",
        ),
        (
            {
                "_ng_failure_record": record(
                    source="collector", failure={"stage": "admission"}
                )
            },
            "admission",
            "collector",
        ),
        # Decision: stage and source fall back one by one.
        (
            {
                "_ng_failure_record": record(
                    failure={"stage": "agent"},
                    failure_events=[{"failure_kind": "provider_oom_killed"}],
                    selected_event=0,
                )
            },
            "agent",
            "environment",
        ),
        # An index that names no event leaves the record's context.
        (
            {
                "_ng_failure_record": record(
                    failure={"stage": "seed"}, failure_events=EVENTS, selected_event=5
                )
            },
            "seed",
            "environment",
        ),
        ({"failure_stage": "verification"}, "verification", None),
        (
            {"failure_stage": "verification", "_ng_failure_record": record(failure={})},
            "verification",
            "environment",
        ),
        ({"failure_stage": 3}, None, None),
        ({}, None, None),
        # Only when nothing names a stage: the last failed sandbox observation.
        ({"ng_agent_observations": {"records": [sandbox("agent")]}}, "agent", None),
        (
            {"ng_agent_observations": {"records": [sandbox("verifier", "timeout")]}},
            "verification",
            None,
        ),
        (
            {"ng_agent_observations": {"records": [sandbox("environment", "oom")]}},
            "seed",
            None,
        ),
        (
            {"ng_agent_observations": {"records": [sandbox("agent", "sandbox_error")]}},
            "agent",
            None,
        ),
        (
            {
                "ng_agent_observations": {
                    "records": [sandbox("agent"), sandbox("environment", "oom")]
                }
            },
            "seed",
            None,
        ),
        (
            {
                "failure_stage": "agent",
                "ng_agent_observations": {"records": [sandbox("environment", "oom")]},
            },
            "agent",
            None,
        ),
        # Recovered records never supply the final stage.
        (
            {
                "ng_agent_observations": {
                    "records": [
                        sandbox("agent"),
                        sandbox("environment", "oom", recovered=True),
                    ]
                }
            },
            "agent",
            None,
        ),
        (
            {"ng_agent_observations": {"records": [sandbox("agent", recovered=True)]}},
            None,
            None,
        ),
        # Not failed, not a sandbox, or an unknown role: no stage.
        (
            {"ng_agent_observations": {"records": [sandbox("agent", "completed")]}},
            None,
            None,
        ),
        (
            {"ng_agent_observations": {"records": [sandbox("agent", "unknown")]}},
            None,
            None,
        ),
        (
            {
                "ng_agent_observations": {
                    "records": [{**sandbox("agent"), "type": "tool_call"}]
                }
            },
            None,
            None,
        ),
        (
            {
                "ng_agent_observations": {
                    "records": [sandbox("agent"), sandbox("judge")]
                }
            },
            None,
            None,
        ),
        ({"ng_agent_observations": {"records": "sandbox"}}, None, None),
        (
            {"ng_agent_observations": {"records": [None, 3, sandbox("verifier")]}},
            "verification",
            None,
        ),
    ],
)
def test_row_21_final_context(row: Row, stage: str | None, source: str | None) -> None:
    assert final_context(row) == FinalContext(stage=stage, source=source)


# ROW-23: the best-effort wall clock.


def capture(*calls: Row) -> Row:
    """An `ng_model_call_capture` attachment with the given calls."""
    return {"ng_model_call_capture": {"calls": list(calls)}}


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"elapsed_seconds": 12.5}, 12.5),
        ({"elapsed_seconds": 30}, 30.0),
        (
            {"elapsed_seconds": 12.5, "response": {"metadata": {"elapsed_seconds": 9}}},
            12.5,
        ),
        ({"response": {"metadata": {"elapsed_seconds": 9}}}, 9.0),
        (
            capture(
                {"started_at": 100.0, "latency_total_ms": 2000},
                {"started_at": 105.0, "latency_total_ms": 5000},
            ),
            10.0,
        ),
        (
            {
                **capture({"started_at": 100.0, "latency_total_ms": 2000}),
                "elapsed_seconds": 60,
            },
            60.0,
        ),
        # Decision: a value that is not a positive finite number is absent.
        ({"elapsed_seconds": 0, "response": {"metadata": {"elapsed_seconds": 4}}}, 4.0),
        ({"elapsed_seconds": -3}, None),
        ({"elapsed_seconds": "12"}, None),
        ({"elapsed_seconds": True}, None),
        ({"elapsed_seconds": 10**400}, None),
        ({"elapsed_seconds": float("inf")}, None),
        ({"elapsed_seconds": float("nan")}, None),
        (capture({"started_at": 100.0}), None),
        (capture({"started_at": 100.0, "latency_total_ms": 0}), None),
        ({}, None),
    ],
)
def test_row_23_rollout_wallclock(row: Row, expected: float | None) -> None:
    assert rollout_wallclock(row) == expected


# ROW-24: the logical rollout id.


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"_ng_task_index": 3, "_ng_rollout_index": 1}, "3-1"),
        ({"_ng_task_index": 0, "_ng_rollout_index": 0, "_ng_attempt_index": 2}, "0-0"),
        (
            {
                "_ng_rollout_id": "step7.0-0",
                "_ng_task_index": 0,
                "_ng_rollout_index": 0,
            },
            "step7.0-0",
        ),
        ({"_ng_rollout_id": "A_b-c.d"}, "A_b-c.d"),
        ({"_ng_rollout_id": "x-a"}, "x-a"),
        ({"_ng_rollout_id": "x-ab1"}, "x-ab1"),
        ({"_ng_rollout_id": "x-a1b"}, "x-a1b"),
        # Decision: an explicit null is absent.
        ({"_ng_rollout_id": None, "_ng_task_index": 2, "_ng_rollout_index": 0}, "2-0"),
    ],
)
def test_row_24_rollout_id(row: Row, expected: str) -> None:
    assert rollout_id(row) == expected


@pytest.mark.parametrize(
    ("row", "key"),
    [
        ({}, "_ng_task_index"),
        ({"_ng_task_index": 1}, "_ng_rollout_index"),
        ({"_ng_task_index": "1", "_ng_rollout_index": 0}, "_ng_task_index"),
        ({"_ng_task_index": 1.0, "_ng_rollout_index": 0}, "_ng_task_index"),
        ({"_ng_task_index": True, "_ng_rollout_index": 0}, "_ng_task_index"),
        ({"_ng_task_index": -1, "_ng_rollout_index": 0}, "_ng_task_index"),
        ({"_ng_task_index": 2**63, "_ng_rollout_index": 0}, "_ng_task_index"),
        ({"_ng_task_index": 0, "_ng_rollout_index": 10**5000}, "_ng_rollout_index"),
        ({"_ng_task_index": 1, "_ng_rollout_index": [0]}, "_ng_rollout_index"),
        ({"_ng_rollout_id": ""}, "_ng_rollout_id"),
        ({"_ng_rollout_id": "../bad"}, "_ng_rollout_id"),
        ({"_ng_rollout_id": ".hidden"}, "_ng_rollout_id"),
        ({"_ng_rollout_id": "a b"}, "_ng_rollout_id"),
        ({"_ng_rollout_id": "ok\n"}, "_ng_rollout_id"),
        ({"_ng_rollout_id": ["3-0"]}, "_ng_rollout_id"),
        ({"_ng_rollout_id": 30}, "_ng_rollout_id"),
        (
            {"_ng_rollout_id": "3-0-a2", "_ng_task_index": 3, "_ng_rollout_index": 0},
            "_ng_rollout_id",
        ),
        ({"_ng_rollout_id": "x-a0"}, "_ng_rollout_id"),
    ],
)
def test_row_24_invalid_rollout_id_is_a_row_error(row: Row, key: str) -> None:
    with pytest.raises(RowError) as caught:
        rollout_id(row)
    assert caught.value.key == key
    assert "row (" in str(caught.value)
    assert key in str(caught.value)


# ROW-50: the class a producer applied.


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"_ng_result_class": "evaluation"}, "evaluation"),
        ({"_ng_result_class": "model"}, "model"),
        ({"_ng_result_class": "unknown"}, "unknown"),
        ({"_ng_result_class": "Unknown "}, "Unknown "),
        ({"_ng_result_class": None}, None),
        ({"_ng_result_class": 1}, None),
        ({}, None),
    ],
)
def test_row_50_applied_result_class_kept_exactly(
    row: Row, expected: str | None
) -> None:
    assert applied_result_class(row) == expected
