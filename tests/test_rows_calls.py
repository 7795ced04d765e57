"""Model calls, server faults, sandbox faults, timeouts and route failures
(ROW-30..ROW-37)."""

from __future__ import annotations

from typing import Any

import pytest

from ledger import (
    RecoveryPolicy,
    faults_own_window,
    is_final_agent_timeout,
    is_infrastructure_agent_timeout,
    is_server_fault_call,
    model_calls,
    route_failure,
    sandbox_or_tool_fault,
)
from tests.internals import CallFacts, FailureEventFacts, calls_span, calls_summary

Row = dict[str, Any]

ANSWER = {
    "output": [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "x"}],
        }
    ],
    "status": None,
}


def capture(*calls: object, **row: Any) -> Row:
    """A row with an `ng_model_call_capture` attachment holding ``calls``."""
    return {"ng_model_call_capture": {"calls": list(calls)}, **row}


def call(
    status: int = 200, start: float = 0.0, ms: float = 1000.0, **extra: Any
) -> Row:
    """One capture call (`latency_total_ms` is its duration)."""
    return {"status_code": status, "started_at": start, "latency_total_ms": ms, **extra}


# ROW-30: model calls, reduced.


def test_row_30_capture_calls_are_reduced() -> None:
    row = capture(
        {
            "model_call_id": "c1",
            "status_code": 502,
            "error_category": "upstream_error",
            "started_at": "2026-08-22T10:00:00Z",
            "completed_at": "2026-08-22T10:00:02Z",
            "latency_total_ms": 2000,
            "request": {"big": "payload"},
        },
        {"status_code": 200, "started_at": 1787392810.5, "latency_total_ms": 12.5},
    )
    assert model_calls(row) == (
        CallFacts(
            status_code=502,
            error_category="upstream_error",
            started_at=1787392800.0,
            duration_ms=2000.0,
        ),
        CallFacts(status_code=200, started_at=1787392810.5, duration_ms=12.5),
    )


def test_row_30_trajectory_calls_read_response_metadata() -> None:
    row = {
        "ng_trajectory": {
            "model_calls": [
                {
                    "started_at": "2026-08-22T10:00:00+02:00",
                    "duration_ms": 300,
                    "response_metadata": {
                        "status_code": 429,
                        "error_category": "rate_limit",
                    },
                    "failure_events": [
                        {"failure_kind": "provider_unavailable", "http_status": 429}
                    ],
                }
            ]
        }
    }
    assert model_calls(row) == (
        CallFacts(
            status_code=429,
            error_category="rate_limit",
            failure_events=(
                FailureEventFacts(kind="provider_unavailable", http_status=429),
            ),
            started_at=1787385600.0,
            duration_ms=300.0,
        ),
    )


@pytest.mark.parametrize(
    ("row", "statuses"),
    [
        # The collector projection wins, then the capture, then the trajectory.
        (
            {
                "_ng_collector_projection": {"model_calls": [{"status_code": 201}]},
                "ng_model_call_capture": {"calls": [{"status_code": 202}]},
                "ng_trajectory": {
                    "model_calls": [{"response_metadata": {"status_code": 203}}]
                },
            },
            [201],
        ),
        (
            {
                "ng_model_call_capture": {"calls": [{"status_code": 202}]},
                "ng_trajectory": {
                    "model_calls": [{"response_metadata": {"status_code": 203}}]
                },
            },
            [202],
        ),
        (
            {
                "ng_trajectory": {
                    "model_calls": [{"response_metadata": {"status_code": 203}}]
                }
            },
            [203],
        ),
        # A source that holds no list is absent; an empty list captured no call.
        (
            {
                "_ng_collector_projection": {"kept_answer": True},
                "ng_model_call_capture": {"calls": "gone"},
                "ng_trajectory": {"model_calls": [{"status_code": 203}]},
            },
            [203],
        ),
        (
            {
                "ng_model_call_capture": {"calls": []},
                "ng_trajectory": {"model_calls": [{"status_code": 203}]},
            },
            [],
        ),
        # Decision: an entry that is not an object stays, all unknown.
        (capture({"status_code": 500}, "garbage", None), [500, None, None]),
        ({}, []),
        ({"ng_model_call_capture": None}, []),
    ],
)
def test_row_30_sources_in_order(row: Row, statuses: list[int | None]) -> None:
    assert [c.status_code for c in model_calls(row)] == statuses


@pytest.mark.parametrize(
    ("raw", "reduced"),
    [
        # A field the source lacks is unknown, never "no fault".
        ({}, CallFacts()),
        ({"status_code": "503"}, CallFacts()),
        ({"status_code": True}, CallFacts()),
        ({"status_code": 503.0}, CallFacts(status_code=503)),
        ({"status_code": 99}, CallFacts()),
        ({"status_code": 600}, CallFacts()),
        ({"status_code": 10**30}, CallFacts()),
        ({"upstream_status_code": 503}, CallFacts(upstream_status_code=503)),
        ({"error_category": ""}, CallFacts()),
        ({"error_category": ["timeout"]}, CallFacts()),
        ({"started_at": "yesterday"}, CallFacts()),
        ({"started_at": "2026-08-22T10:00:00"}, CallFacts(started_at=1787392800.0)),
        ({"started_at": "99999-01-01T00:00:00"}, CallFacts()),
        ({"started_at": float("nan")}, CallFacts()),
        ({"latency_total_ms": -5}, CallFacts()),
        ({"duration_ms": 5}, CallFacts()),
        (
            {
                "failure_events": [
                    {
                        "failure_kind": "session_lost",
                        "stage": "agent",
                        "http_status": 503,
                    },
                    "x",
                ]
            },
            CallFacts(
                failure_events=(
                    FailureEventFacts(kind="session_lost", http_status=503),
                )
            ),
        ),
        ({"failure_events": {"failure_kind": "session_lost"}}, CallFacts()),
    ],
)
def test_row_30_wrong_types_are_unknown(raw: Row, reduced: CallFacts) -> None:
    assert model_calls(capture(raw)) == (reduced,)


@pytest.mark.parametrize(
    ("calls", "span"),
    [
        ([], None),
        ([CallFacts(started_at=10.0, duration_ms=500.0)], 0.5),
        (
            [
                CallFacts(started_at=10.0, duration_ms=1000.0),
                CallFacts(started_at=20.0, duration_ms=2000.0),
                CallFacts(started_at=12.0, duration_ms=20000.0),
            ],
            22.0,
        ),
        # Only calls with both a start and a duration.
        (
            [CallFacts(started_at=0.0), CallFacts(started_at=5.0, duration_ms=1000.0)],
            1.0,
        ),
        ([CallFacts(duration_ms=1000.0)], None),
        (
            [
                CallFacts(started_at=1.7e308, duration_ms=1.0),
                CallFacts(started_at=-1.7e308, duration_ms=1.0),
            ],
            None,
        ),
    ],
)
def test_row_30_span_of_calls(calls: list[CallFacts], span: float | None) -> None:
    assert calls_span(calls) == span


def test_row_30_summary_keeps_last_and_evidence_only() -> None:
    calls = [
        CallFacts(status_code=200, started_at=0.0, duration_ms=1000.0),
        CallFacts(status_code=404),
        CallFacts(status_code=200, upstream_status_code=502),
        CallFacts(error_category="stream_truncated"),
        CallFacts(failure_events=(FailureEventFacts(kind="cancelled"),)),
        CallFacts(status_code=399),
        CallFacts(status_code=200, started_at=9.0, duration_ms=1000.0),
    ]
    summary = calls_summary(calls)
    assert summary.count == 7
    assert summary.span == 10.0
    assert summary.last == calls[-1]
    assert [index for index, _ in summary.evidence] == [1, 2, 3, 4]
    assert calls_summary([]).last is None


# ROW-31: a server-fault call.


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # HTTP evidence: 5xx other than 504, or 429, own or upstream.
        ({"status_code": 500}, True),
        ({"status_code": 502}, True),
        ({"status_code": 503}, True),
        ({"status_code": 599}, True),
        ({"status_code": 429}, True),
        ({"status_code": 200, "upstream_status_code": 503}, True),
        ({"status_code": 502, "upstream_status_code": 504}, True),
        ({"status_code": 504}, False),
        ({"status_code": 408}, False),
        ({"status_code": 404}, False),
        ({"status_code": 401}, False),
        ({"status_code": 200}, False),
        ({"upstream_status_code": 504}, False),
        ({}, False),
        # Error categories.
        ({"error_category": "upstream_error"}, True),
        ({"error_category": "connection"}, True),
        ({"error_category": "rate_limit"}, True),
        ({"error_category": "timeout"}, False),
        ({"error_category": "stream_truncated"}, False),
        ({"error_category": "incomplete"}, False),
        ({"error_category": "cancelled"}, False),
        ({"error_category": "auth"}, False),
        ({"error_category": "exception"}, False),
        # Failure events whose kind classifies evaluation-side.
        ({"failure_events": [{"failure_kind": "transport_unreachable"}]}, True),
        ({"failure_events": [{"failure_kind": "provider_unavailable"}]}, True),
        ({"failure_events": [{"failure_kind": "kill_shaped"}]}, True),
        ({"failure_events": [{"failure_kind": "transport_timeout"}]}, False),
        ({"failure_events": [{"failure_kind": "cancelled"}]}, False),
        ({"failure_events": [{"failure_kind": "agent_timeout"}]}, False),
        ({"failure_events": [{"failure_kind": "provider_oom_killed"}]}, False),
        ({"failure_events": [{"failure_kind": "openai:overloaded"}]}, False),
        ({"failure_events": [{"failure_kind": None, "http_status": 503}]}, False),
        # Non-material evidence never vetoes material evidence on the same call.
        ({"status_code": 504, "error_category": "upstream_error"}, True),
        ({"status_code": 503, "error_category": "timeout"}, True),
        (
            {"status_code": 408, "failure_events": [{"failure_kind": "session_lost"}]},
            True,
        ),
        (
            {
                "error_category": "stream_truncated",
                "failure_events": [{"failure_kind": "transport_timeout"}],
            },
            False,
        ),
    ],
)
def test_row_31_is_server_fault_call(raw: Row, expected: bool) -> None:
    assert is_server_fault_call(raw) is expected
    assert (
        is_server_fault_call(
            model_calls({"_ng_collector_projection": {"model_calls": [raw]}})[0]
        )
        is expected
    )


def test_row_31_event_kinds_follow_the_policy() -> None:
    lost = {"failure_events": [{"failure_kind": "session_lost"}]}
    timeout = {"failure_events": [{"failure_kind": "timeout_exceeded"}]}
    policy = RecoveryPolicy(
        side_overrides={"session_lost": "model", "agent_timeout": "evaluation"}
    )
    assert is_server_fault_call(lost)
    assert not is_server_fault_call(lost, policy=policy)
    assert not is_server_fault_call(timeout)
    assert is_server_fault_call(timeout, policy=policy)
    # HTTP evidence is not the classifier's to move.
    assert is_server_fault_call({"status_code": 503}, policy=policy)


# ROW-32: faults that own the window.


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        # The last call faulted: no window needed.
        (capture(call(200, 0), call(503, 5)), True),
        (capture(call(200, 0), {"status_code": 503}), True),
        (capture(call(200, 0), call(200, 5, upstream_status_code=502)), True),
        # An early fault that a retry recovered within a long window is the model's.
        (capture(call(502, 0, 2000), call(200, 2, 1000), elapsed_seconds=100), False),
        (capture(call(502, 0, 2000), call(200, 2, 98000)), False),
        # The share clause: faulted durations fill at least half the window.
        (capture(call(502, 0, 5000), call(200, 5, 1000), elapsed_seconds=10), True),
        (capture(call(502, 0, 4999), call(200, 5, 1000), elapsed_seconds=10), False),
        (
            capture(
                call(502, 0, 3000),
                call(429, 3, 2000),
                call(200, 5, 1),
                elapsed_seconds=10,
            ),
            True,
        ),
        # The window is the wall clock, else the span of the calls.
        (capture(call(502, 0, 6000), call(200, 6, 4000)), True),
        (capture(call(502, 0, 6000), call(200, 6, 4000), elapsed_seconds=100), False),
        (
            capture(
                call(502, 0, 6000),
                call(200, 6, 4000),
                response={"metadata": {"elapsed_seconds": 11}},
            ),
            True,
        ),
        # Unknown durations count 0; no window, no share clause.
        (capture({"status_code": 502}, {"status_code": 200}, elapsed_seconds=1), False),
        (
            capture(
                {"status_code": 502, "latency_total_ms": 5000}, {"status_code": 200}
            ),
            False,
        ),
        # Non-material evidence never owns anything.
        (
            capture(
                call(200, 0, 9000, error_category="stream_truncated"),
                call(200, 9, 1000, error_category="stream_truncated"),
            ),
            False,
        ),
        (capture(call(504, 0, 9000), call(408, 9, 1000)), False),
        (capture(call(200, 0), call(200, 1, error_category="timeout")), False),
        ({}, False),
        ({"elapsed_seconds": 10}, False),
    ],
)
def test_row_32_faults_own_window(row: Row, expected: bool) -> None:
    assert faults_own_window(row) is expected


def test_row_32_fault_share_comes_from_the_policy() -> None:
    row = capture(call(502, 0, 2000), call(200, 2, 1000), elapsed_seconds=10)
    assert not faults_own_window(row)
    assert faults_own_window(row, policy=RecoveryPolicy(fault_share=0.2))
    assert not faults_own_window(row, policy=RecoveryPolicy(fault_share=0.21))
    full = capture(call(502, 0, 10000), call(200, 10, 0), elapsed_seconds=10)
    assert faults_own_window(full, policy=RecoveryPolicy(fault_share=1))


# ROW-33: sandbox, session, provider or tool-server faults.


def failure_row(*events: Row, failure: Row | None = None, **record: Any) -> Row:
    """A failure row whose typed record holds ``events`` and its own ``failure``."""
    return {
        "_ng_failure_class": "agent_timeout",
        "_ng_failure_record": {
            "source": "environment",
            "failure": failure
            or {"failure_kind": "agent_timeout", "stage": "verification"},
            "failure_events": list(events),
            **record,
        },
    }


def event(
    kind: str | None, stage: str | None = "agent", source: str | None = "sandbox"
) -> Row:
    """One failure event of a typed record."""
    return {"failure_kind": kind, "stage": stage, "source": source}


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (failure_row(event("provider_unavailable")), True),
        (failure_row(event("session_lost", "seed", "session")), True),
        (
            failure_row(event("environment_server_failed", "admission", "tool_server")),
            True,
        ),
        (failure_row(event("transport_peer_drop", "agent", "provider")), True),
        # Sources of another component qualify by the kind's family only.
        (failure_row(event("session_expired", "agent", None)), True),
        (failure_row(event("provider_quota_exhausted", "seed", "model")), True),
        (failure_row(event("environment_server_failed", "agent", "environment")), True),
        (failure_row(event("transport_peer_drop", "agent", "model")), False),
        (failure_row(event("verifier_error", "agent", "collector")), False),
        # The stage must be known and inside the agent's window.
        (failure_row(event("session_lost", "cleanup", "sandbox")), False),
        (failure_row(event("session_release_failed", "cleanup", "session")), False),
        (failure_row(event("provider_unavailable", "verification")), False),
        (failure_row(event("provider_unavailable", None)), False),
        (failure_row(event("provider_unavailable", "later")), False),
        # The kind must classify evaluation-side: the prefix assigns nothing.
        (failure_row(event("provider_oom_killed", "agent")), False),
        (failure_row(event("provider_oom_killed", "seed")), True),
        (failure_row(event("provider_oom_killed", "admission", "provider")), True),
        (failure_row(event("agent_timeout", "agent")), False),
        (
            failure_row(event("agent_command_not_allowed", "agent", "tool_server")),
            False,
        ),
        (failure_row(event("sandbox:disk_full", "agent")), False),
        (failure_row(event("provider_sandbox_weird", "agent")), False),
        (failure_row(event(None, "agent")), False),
        # The record's own failure counts too, with the record's source.
        (failure_row(failure={"failure_kind": "session_lost", "stage": "agent"}), True),
        (
            failure_row(
                failure={"failure_kind": "provider_oom_killed", "stage": "seed"}
            ),
            True,
        ),
        (
            failure_row(
                failure={"failure_kind": "provider_oom_killed", "stage": "agent"}
            ),
            False,
        ),
        (
            failure_row(
                failure={"failure_kind": "transport_unreachable", "stage": "agent"}
            ),
            False,
        ),
        (
            failure_row(failure={"failure_kind": "session_lost", "stage": "cleanup"}),
            False,
        ),
        (failure_row(), False),
        # Only the typed record: a result row's failure_kind is not an event.
        ({"failure_kind": "session_lost", "failure_stage": "agent"}, False),
        ({}, False),
    ],
)
def test_row_33_sandbox_or_tool_fault(row: Row, expected: bool) -> None:
    assert sandbox_or_tool_fault(row) is expected


def test_row_33_the_classifier_assigns_responsibility() -> None:
    row = failure_row(event("session_lost", "agent", "session"))
    to_model = RecoveryPolicy(side_overrides={"session_lost": "model"})
    assert sandbox_or_tool_fault(row)
    assert not sandbox_or_tool_fault(row, policy=to_model)
    oom = failure_row(event("provider_oom_killed", "agent"))
    to_eval = RecoveryPolicy(side_overrides={"provider_oom_killed": "evaluation"})
    assert not sandbox_or_tool_fault(oom)
    assert sandbox_or_tool_fault(oom, policy=to_eval)


# ROW-35, ROW-36: agent timeouts.

CLEAN = capture(call(200, 0, 1000), call(200, 1, 1000), elapsed_seconds=600)
#: The policy's answer cut short by its deadline (ROW-62: not complete).
UNFINISHED = {**ANSWER, "status": "incomplete"}
AT_AGENT = {"failure_kind": "agent_timeout", "stage": "agent"}
HARBOR = {
    "reward": 0.0,
    "agent_timeout_error": 1,
    "response": {"output": [], "status": "completed"},
}


@pytest.mark.parametrize(
    ("row", "infrastructure", "final"),
    [
        # A clean agent timeout that kept an answer is the model's final result.
        (
            {**CLEAN, "_ng_failure_class": "agent_timeout", "response": ANSWER},
            False,
            True,
        ),
        # timeout_exceeded with the policy's answer unfinished; a complete one
        # was raised in verification (ROW-62), below.
        (
            {**CLEAN, "_ng_failure_class": "timeout_exceeded", "response": UNFINISHED},
            False,
            True,
        ),
        (
            {**CLEAN, "_ng_failure_class": "timeout_exceeded", "response": ANSWER},
            False,
            False,
        ),
        ({**CLEAN, "failure_kind": "agent_timeout", "response": ANSWER}, False, True),
        # No kept answer: it keeps its retry policy.
        ({**CLEAN, "_ng_failure_class": "agent_timeout"}, False, False),
        (
            {
                **CLEAN,
                "_ng_failure_class": "agent_timeout",
                "response": {"output": [], "status": None},
            },
            False,
            False,
        ),
        (
            {
                **CLEAN,
                "_ng_failure_class": "agent_timeout",
                "_ng_failure_response": ANSWER,
            },
            False,
            False,
        ),
        # A native partial response from cleanup is a kept answer.
        (
            {
                **CLEAN,
                "_ng_failure_class": "agent_timeout",
                "_ng_failure_partial_response": {"output": []},
            },
            False,
            True,
        ),
        # The last captured call returned 503: the evaluation's failure.
        (
            capture(
                call(200, 0),
                call(503, 1),
                _ng_failure_class="agent_timeout",
                response=ANSWER,
            ),
            True,
            False,
        ),
        (
            capture(call(200, 0), call(503, 1), _ng_failure_class="agent_timeout"),
            True,
            False,
        ),
        # An early 502 recovered by a retry in a long window: the model's time.
        (
            capture(
                call(502, 0, 2000),
                call(200, 2, 1000),
                elapsed_seconds=600,
                _ng_failure_class="timeout_exceeded",
                response=UNFINISHED,
            ),
            False,
            True,
        ),
        # Timeout, truncated-stream and cancellation evidence only: not material.
        (
            capture(
                call(200, 0, 1000, error_category="stream_truncated"),
                call(504, 1, 1000, error_category="timeout"),
                call(200, 2, 1000, error_category="cancelled"),
                _ng_failure_class="agent_timeout",
                response=ANSWER,
            ),
            False,
            True,
        ),
        # A sandbox or tool-server failure event in the window.
        # (The record's own failure at the agent stage: a timeout raised in
        # verification is the verifier's, never the agent's deadline, ROW-62.)
        (
            {
                **failure_row(event("session_lost"), failure=AT_AGENT),
                "response": ANSWER,
            },
            True,
            False,
        ),
        (
            {
                **failure_row(event("session_lost", "cleanup"), failure=AT_AGENT),
                "response": ANSWER,
            },
            False,
            True,
        ),
        ({**failure_row(event("session_lost")), "response": ANSWER}, False, False),
        # Harbor-style graded results: output [] with status completed is kept.
        (HARBOR, False, True),
        ({**HARBOR, **capture(call(200, 0), call(503, 1))}, True, False),
        ({**HARBOR, "agent_timeout_error": 0}, False, False),
        # Other kinds are no agent timeouts, whatever their window held.
        (
            capture(call(503, 0), _ng_failure_class="session_lost", response=ANSWER),
            False,
            False,
        ),
        (
            capture(call(503, 0), _ng_failure_class="transient", response=ANSWER),
            False,
            False,
        ),
        # The selected event decides the kind.
        (
            {
                **capture(call(503, 0)),
                "response": ANSWER,
                "_ng_failure_record": {
                    "failure": {"failure_kind": "agent_timeout"},
                    "failure_events": [{"failure_kind": "judge_failed"}],
                    "selected_event": 0,
                },
            },
            False,
            False,
        ),
    ],
)
def test_row_35_row_36_agent_timeouts(
    row: Row, infrastructure: bool, final: bool
) -> None:
    assert is_infrastructure_agent_timeout(row) is infrastructure
    assert is_final_agent_timeout(row) is final


def test_row_36_policy_moves_the_window_share() -> None:
    row = capture(
        call(502, 0, 2000),
        call(200, 2, 1000),
        elapsed_seconds=10,
        _ng_failure_class="agent_timeout",
        response=ANSWER,
    )
    strict = RecoveryPolicy(fault_share=0.2)
    assert is_final_agent_timeout(row)
    assert not is_final_agent_timeout(row, policy=strict)
    assert is_infrastructure_agent_timeout(row, policy=strict)


# ROW-37: route failures.


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (
            {
                "_ng_failure_class": "agent_request_failed",
                "error": "/run returned HTTP 500",
            },
            "possibly_delivered",
        ),
        (
            {
                "_ng_failure_record": {
                    "source": "collector",
                    "delivery": "not_sent",
                    "failure": {"failure_kind": "agent_request_failed"},
                }
            },
            "not_sent",
        ),
        (
            {
                "_ng_failure_record": {
                    "source": "environment",
                    "delivery": "delivered",
                    "failure": {"failure_kind": "agent_request_failed"},
                }
            },
            "delivered",
        ),
        (
            {
                "_ng_failure_record": {
                    "delivery": "maybe",
                    "failure": {"failure_kind": "agent_request_failed"},
                }
            },
            "possibly_delivered",
        ),
        (
            {
                "_ng_failure_record": {
                    "delivery": None,
                    "failure": {"failure_kind": "agent_request_failed"},
                }
            },
            "possibly_delivered",
        ),
        # A transport_* kind observed by the collector, outside verification.
        (
            {
                "_ng_failure_record": {
                    "source": "collector",
                    "delivery": "not_sent",
                    "failure": {"failure_kind": "transport_unreachable"},
                }
            },
            "not_sent",
        ),
        (
            {
                "_ng_failure_record": {
                    "source": "collector",
                    "failure": {
                        "failure_kind": "transport_peer_drop",
                        "stage": "agent",
                    },
                }
            },
            "possibly_delivered",
        ),
        (
            {
                "_ng_failure_record": {
                    "source": "collector",
                    "delivery": "not_sent",
                    "failure": {
                        "failure_kind": "transport_timeout",
                        "stage": "verification",
                    },
                }
            },
            None,
        ),
        (
            {
                "_ng_failure_record": {
                    "source": "environment",
                    "delivery": "delivered",
                    "failure": {"failure_kind": "transport_unreachable"},
                }
            },
            None,
        ),
        ({"_ng_failure_class": "transport_unreachable"}, None),
        # The selected event's kind and stage.
        (
            {
                "_ng_failure_record": {
                    "source": "collector",
                    "delivery": "delivered",
                    "failure": {"failure_kind": "agent_run_error"},
                    "failure_events": [
                        {"failure_kind": "transport_peer_drop", "stage": "agent"}
                    ],
                    "selected_event": 0,
                }
            },
            "delivered",
        ),
        # Other kinds are no route failures.
        ({"_ng_failure_class": "agent_run_error"}, None),
        ({"_ng_failure_class": "remote_agent_error"}, None),
        ({"_ng_failure_class": "session_lost"}, None),
        ({}, None),
    ],
)
def test_row_37_route_failure(row: Row, expected: str | None) -> None:
    assert route_failure(row) == expected
