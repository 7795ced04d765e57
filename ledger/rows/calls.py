"""A row's captured model calls and its wall time (ROW-23, ROW-30).

Each call is reduced to the facts a server fault is read from. A field the
source lacks is ``None``: unknown, never "no fault". The summary stored in
events counts clean calls and keeps only the last call and the calls that
carry failure evidence, so an agent with hundreds of calls stays a small event.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ledger.rows.facts import CallFacts, CallsSummary, FailureEventFacts
from ledger.rows.values import (
    as_float,
    as_int,
    as_list,
    as_mapping,
    as_str,
    as_timestamp,
    dig,
    is_mapping,
)

__all__ = [
    "calls_span",
    "calls_summary",
    "has_failure_evidence",
    "http_status",
    "model_calls",
    "reduce_call",
    "rollout_wallclock",
]


def http_status(value: object) -> int | None:
    """An HTTP status code (an integer from 100 to 599), else ``None``."""
    status = as_int(value)
    return status if status is not None and 100 <= status <= 599 else None


def _call_events(value: object) -> tuple[FailureEventFacts, ...]:
    # ROW-30: each event reduced to its kind and HTTP status; an entry that is
    # not an object carries nothing and is left out.
    return tuple(
        FailureEventFacts(
            kind=as_str(event.get("failure_kind")),
            http_status=http_status(event.get("http_status")),
        )
        for event in as_list(value) or ()
        if is_mapping(event)
    )


def _duration(value: object) -> float | None:
    duration = as_float(value)
    return duration if duration is not None and duration >= 0 else None


def reduce_call(call: object, *, duration_key: str = "duration_ms") -> CallFacts:
    """One call object reduced to the fields of ROW-30 (a non-object: all unknown)."""
    source = as_mapping(call)
    return CallFacts(
        status_code=http_status(source.get("status_code")),
        upstream_status_code=http_status(source.get("upstream_status_code")),
        error_category=as_str(source.get("error_category")),
        failure_events=_call_events(source.get("failure_events")),
        started_at=as_timestamp(source.get("started_at")),
        duration_ms=_duration(source.get(duration_key)),
    )


def _capture_call(call: object) -> CallFacts:
    # ROW-30: in `ng_model_call_capture.calls`, duration_ms is latency_total_ms.
    return reduce_call(call, duration_key="latency_total_ms")


def _trajectory_call(call: object) -> CallFacts:
    # ROW-30: a trajectory call keeps its status and category under
    # response_metadata; the call's own keys are read where that lacks one.
    source = as_mapping(call)
    meta = as_mapping(source.get("response_metadata"))
    merged = {**source, **{k: v for k, v in meta.items() if v is not None}}
    return reduce_call(merged)


def model_calls(row: Mapping[str, Any]) -> tuple[CallFacts, ...]:
    """The row's captured model calls in capture order, reduced (ROW-30).

    The first source that holds a list is read: the collector projection, then
    ``ng_model_call_capture.calls``, then ``ng_trajectory.model_calls`` (an
    empty list is a source that captured no call). Decision: an entry that is
    not an object stays in place as a call with every field unknown, so the
    last call is still the last one captured.
    """
    # The three sources, read at once (dig is pure): no generator per row (P-7).
    for calls, reduce in (
        (dig(row, "_ng_collector_projection", "model_calls"), reduce_call),
        (dig(row, "ng_model_call_capture", "calls"), _capture_call),
        (dig(row, "ng_trajectory", "model_calls"), _trajectory_call),
    ):
        items = as_list(calls)
        if items is not None:
            return tuple(reduce(call) for call in items)
    return ()


def calls_span(calls: Iterable[CallFacts]) -> float | None:
    """Latest ``started_at + duration_ms/1000`` minus earliest ``started_at``."""
    timed = [
        (c.started_at, c.started_at + c.duration_ms / 1000)
        for c in calls
        if c.started_at is not None and c.duration_ms is not None
    ]
    if not timed:
        return None
    span = max(end for _, end in timed) - min(start for start, _ in timed)
    return span if math.isfinite(span) else None


def has_failure_evidence(call: CallFacts) -> bool:
    """A status >= 400 (own or upstream), an error category, or failure events."""
    statuses = (call.status_code, call.upstream_status_code)
    return (
        any(s is not None and s >= 400 for s in statuses)
        or call.error_category is not None
        or bool(call.failure_events)
    )


_NO_CALLS = CallsSummary(count=0, span=None, last=None, evidence=())


def calls_summary(calls: Sequence[CallFacts]) -> CallsSummary:
    """The compact summary of ROW-30 stored in the facts."""
    if not calls:
        return _NO_CALLS  # frozen: one shared value for every row without calls
    return CallsSummary(
        count=len(calls),
        span=calls_span(calls),
        last=calls[-1] if calls else None,
        evidence=tuple((i, c) for i, c in enumerate(calls) if has_failure_evidence(c)),
    )


def _positive(value: object) -> float | None:
    number = as_float(value)
    return number if number is not None and number > 0 else None


def rollout_wallclock(
    row: Mapping[str, Any], *, calls: Sequence[CallFacts] | None = None
) -> float | None:
    """Best-effort wall time of the attempt in seconds, positive and finite (ROW-23).

    ``elapsed_seconds``, else ``response.metadata.elapsed_seconds``, else the span
    of the captured calls (``calls``: the row's calls when already reduced).
    Decision: a value that is not a positive finite number is absent, so the
    next source is read.
    """
    for value in (
        row.get("elapsed_seconds"),
        dig(row, "response", "metadata", "elapsed_seconds"),
    ):
        seconds = _positive(value)
        if seconds is not None:
            return seconds
    return _positive(calls_span(model_calls(row) if calls is None else calls))
