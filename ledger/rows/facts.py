"""The policy-independent facts of one row, stored in `result_saved` / `failure_saved`.

Field names and order follow rows.md, "Facts stored in events". Because the
encoder keeps Struct fields in definition order, a new field goes at the end of
its class, with a default (house style, "Evolve without breaking"). Every value
is JSON-able and no float is NaN or infinite (the readers turn those into
``None``), so encoding is deterministic and never loses a value silently.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = [
    "CallFacts",
    "CallsSummary",
    "Delivery",
    "FailureEventFacts",
    "RejudgmentRef",
    "RowFacts",
    "RowKind",
]

#: Where a row was routed (rows.md, "Routing").
RowKind = Literal["result", "failure", "omission"]
#: Whether a failed request reached its server (the typed record's ``delivery``).
Delivery = Literal["not_sent", "possibly_delivered", "delivered"]


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
    or more, own or upstream, a non-null ``error_category``, or failure events),
    each as ``(index, call)`` with its position in capture order, so an agent
    with hundreds of calls stays small. ``last`` is the last call captured.
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
    """Every policy-independent answer about one saved row (rows.md).

    Computed by :func:`ledger.rows.all_facts.row_facts`; the policy-dependent rules
    read only these fields (:mod:`ledger.rows.policy_rules`), so replay never
    re-reads a row. Field by field:

    - ``run_id``: ``_ng_run_id``.
    - ``row_kind``: where the row was routed (rows.md, "Routing").
    - ``selected_kind`` (ROW-20), ``own_kind`` (ROW-20, the row's own kind),
      ``failure_class`` (``_ng_failure_class``), kept as written.
    - ``stage``, ``source``: the final context (ROW-21).
    - ``record_source``: the typed record's ``source``.
    - ``terminal``: ``_ng_failure_terminal`` or the record's ``failure.terminal``.
    - ``delivery``: the record's delivery on a sidecar row; a failure without one
      counts as ``possibly_delivered``; ``None`` on a result row.
    - ``has_saved_generation`` (ROW-4), ``legacy_placeholder`` (ROW-5 applied),
      ``keeps_response`` (ROW-6), ``has_native_partial`` (ROW-7),
      ``keeps_saved_answer`` (ROW-10).
    - ``grade_record``: the ``_ng_grade`` reward when completed (ROW-12).
    - ``reward``: a result row's numeric reward (ROW-12).
    - ``masked``, ``mask_owner`` (the owner when masked, default
      ``environment``), ``omitted``, ``rejudgment_of``.
    - ``result_class``: ``_ng_result_class`` as written (ROW-50).
    - ``wallclock``: ROW-23.
    - ``failure_events``: the record's events; ``calls``: ROW-30's summary.
    - ``record_failure``: the record's own failure (kind, stage, the record's
      source and HTTP status), which ROW-33 reads besides the events.
    - ``invalid_judge_response``: the row's ``invalid_judge_response`` is
      true, its judge's verdict could not be used (REC-82).
    """

    run_id: str | None = None
    row_kind: RowKind = "result"
    selected_kind: str | None = None
    own_kind: str | None = None
    failure_class: str | None = None
    stage: str | None = None
    source: str | None = None
    record_source: str | None = None
    terminal: bool = False
    delivery: Delivery | None = None
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
    # Added after rows.md's list (house style: new fields at the end, defaulted).
    record_failure: FailureEventFacts | None = None
    invalid_judge_response: bool = False
