"""The policy-independent facts of one row, stored in `result_saved` / `failure_saved`.

Field names and order follow rows.md, "Facts stored in events". Because the
encoder keeps Struct fields in definition order, a new field goes at the end of
its class, with a default (house style, "Evolve without breaking").
"""

from __future__ import annotations

import msgspec

__all__ = ["CallFacts", "CallsSummary", "FailureEventFacts", "RejudgmentRef", "RowFacts"]


class FailureEventFacts(msgspec.Struct, frozen=True, kw_only=True):
    """One failure event of a failure record or a model call (ROW-30, ROW-33)."""

    kind: str | None = None
    stage: str | None = None
    source: str | None = None
    http_status: int | None = None


class CallFacts(msgspec.Struct, frozen=True, kw_only=True):
    """One captured model call reduced to the fields of ROW-30."""

    status_code: int | None = None
    upstream_status_code: int | None = None
    error_category: str | None = None
    failure_events: tuple[FailureEventFacts, ...] = ()
    started_at: float | None = None
    duration_ms: float | None = None


class CallsSummary(msgspec.Struct, frozen=True, kw_only=True):
    """A compact summary of ROW-30: clean calls are only counted.

    ``evidence`` holds every call that carries failure evidence (a status of 400
    or more, a non-null ``error_category``, or failure events), each with its
    position in capture order, so an agent with hundreds of calls stays small.
    """

    count: int = 0
    span: float | None = None
    last: CallFacts | None = None
    evidence: tuple[tuple[int, CallFacts], ...] = ()


class RejudgmentRef(msgspec.Struct, frozen=True, kw_only=True):
    """What ``_ng_rejudgment`` names: an admission, or a plan file's key (CLI-5)."""

    admission_id: str | None = None
    task: int | None = None
    rollout: int | None = None
    attempt: int | None = None


class RowFacts(msgspec.Struct, frozen=True, kw_only=True):
    """Every policy-independent answer about one saved row (rows.md)."""

    run_id: str | None = None
    row_kind: str = "result"  # "result", "failure" or "omission"
    selected_kind: str | None = None
    own_kind: str | None = None
    failure_class: str | None = None
    stage: str | None = None
    source: str | None = None
    record_source: str | None = None
    terminal: bool = False
    delivery: str | None = None
    has_saved_generation: bool = False
    legacy_placeholder: bool = False
    keeps_response: bool = False
    has_native_partial: bool = False
    keeps_saved_answer: bool = False
    grade_record: float | None = None
    reward: float | None = None
    masked: bool = False
    mask_owner: str | None = None
    omitted: bool = False
    rejudgment_of: RejudgmentRef | None = None
    result_class: str | None = None
    wallclock: float | None = None
    failure_events: tuple[FailureEventFacts, ...] = ()
    calls: CallsSummary = CallsSummary()
