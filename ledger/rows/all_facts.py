"""Every policy-independent fact of one row, computed at once (rows.md, api.md).

``row_facts`` never raises: whatever JSON value it is given (a row of wrong
types, a list, a huge or deeply nested value), it returns a :class:`RowFacts`,
and the same row always gives the same facts, encoded byte for byte. Every
string a row brings into its facts (kinds, stages, sources, categories) passes
through the one redaction of credential-shaped values (ID-13): a failure kind
that holds a bearer token or a URL password is stored, folded and published as
``<redacted>`` in its place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from ledger.identity.secrets.patterns import redact_secrets
from ledger.rows.answers import (
    answers,
    grade_record,
    is_sidecar_row,
    names_kept_deliverable,
    raised_after_policy,
)
from ledger.rows.calls import calls_summary, model_calls, rollout_wallclock
from ledger.rows.facts import (
    CallFacts,
    CallsSummary,
    Delivery,
    FailureEventFacts,
    RejudgmentRef,
    RowFacts,
    RowKind,
)
from ledger.rows.kinds import applied_result_class, record_facts
from ledger.rows.values import (
    as_count,
    as_float,
    as_mapping,
    as_str,
    dig,
    is_mapping,
)

__all__ = ["is_masked", "mask_owner", "row_facts"]

_DELIVERIES: Final[Mapping[str, Delivery]] = {
    "not_sent": "not_sent",
    "possibly_delivered": "possibly_delivered",
    "delivered": "delivered",
}


def row_facts(row: object) -> RowFacts:
    """The facts stored in ``result_saved`` / ``failure_saved`` for ``row``.

    Each rule's answer as its public function gives it, with what several
    rules share (the failure record, the response, ``is_sidecar_row``) read
    once (P-7: this runs once per recorded row).
    """
    source = as_mapping(row)
    calls = model_calls(source)
    record = record_facts(source)
    sidecar = is_sidecar_row(source)
    # row_kind, with is_sidecar_row's answer
    kind: RowKind = (
        "omission"
        if source.get("_ng_omitted") is True
        else "failure"
        if sidecar
        else "result"
    )
    kept = answers(source, sidecar=sidecar)
    stage, kept_answer = record.context.stage, kept.keeps_saved_answer
    if sidecar and raised_after_policy(
        source, kind=record.selected_kind, stage=stage, saved=kept.has_saved_generation
    ):
        # ROW-62, ROW-63: a verification failure; a kept deliverable is the
        # answer the collector judges again.
        stage = "verification"
        kept_answer = kept_answer or names_kept_deliverable(source)
    masked = is_masked(source)
    owner = as_str(source.get("_ng_mask_owner"))
    return _safe_facts(
        RowFacts(
            run_id=as_str(source.get("_ng_run_id")),
            row_kind=kind,
            selected_kind=record.selected_kind,
            own_kind=record.own_kind,
            failure_class=as_str(source.get("_ng_failure_class")),
            stage=stage,
            source=record.context.source,
            record_source=as_str(record.record.get("source")),
            terminal=_terminal(source, record.record),
            delivery=None if kind == "result" else _delivery(record.record),
            has_saved_generation=kept.has_saved_generation,
            legacy_placeholder=kept.legacy_placeholder,
            keeps_response=kept.keeps_response,
            has_native_partial=kept.has_native_partial,
            keeps_saved_answer=kept_answer,
            grade_record=grade_record(source),
            reward=None if sidecar else as_float(source.get("reward")),  # result_reward
            masked=masked,
            mask_owner=owner or ("environment" if masked else None),  # mask_owner
            omitted=kind == "omission",
            rejudgment_of=_rejudgment(source),
            result_class=applied_result_class(source),
            wallclock=rollout_wallclock(source, calls=calls),
            failure_events=record.events,
            calls=calls_summary(calls),
            record_failure=record.failure,
            invalid_judge_response=source.get("invalid_judge_response") is True,
        )
    )


def _terminal(row: Mapping[str, Any], record: Mapping[str, Any]) -> bool:
    # REC-14: stamped by the producer, on the row or in the typed record; REC-81:
    # any JSON-true row stamp counts, as NeMo Gym 0.7.0 reads it (`bool(...)`).
    stamped = dig(record, "failure", "terminal")
    return bool(row.get("_ng_failure_terminal")) or stamped is True


def _delivery(record: Mapping[str, Any]) -> Delivery:
    # rows.md: a failure without a typed record, or without a delivery that is
    # one of the three values, counts as possibly delivered.
    delivery = record.get("delivery")
    if not isinstance(delivery, str):
        return "possibly_delivered"
    return _DELIVERIES.get(delivery, "possibly_delivered")


def is_masked(row: Mapping[str, Any]) -> bool:
    """Whether ``mask_sample`` or the legacy ``instance_config.mask_sample`` is true."""
    nested = dig(row, "instance_config", "mask_sample")
    return row.get("mask_sample") is True or nested is True


def mask_owner(row: Mapping[str, Any]) -> str | None:
    """Who masked the row: ``_ng_mask_owner``, else ``environment`` when masked."""
    owner = as_str(row.get("_ng_mask_owner"))
    return owner or ("environment" if is_masked(row) else None)


def _rejudgment(row: Mapping[str, Any]) -> RejudgmentRef | None:
    # Decision: any object under `_ng_rejudgment` marks a re-judgment's outcome,
    # even when none of its fields can be read; another type is absent.
    ref = row.get("_ng_rejudgment")
    if not is_mapping(ref):
        return None
    return RejudgmentRef(
        admission_id=as_str(ref.get("admission_id")),
        task=as_count(ref.get("task")),
        rollout=as_count(ref.get("rollout")),
        attempt=as_count(ref.get("attempt")),
    )


# -- ID-13: no credential byte in the facts ---------------------------------------

_TEXT_FIELDS = (
    "run_id",
    "selected_kind",
    "own_kind",
    "failure_class",
    "stage",
    "source",
    "record_source",
    "mask_owner",
    "result_class",
)


def _text(value: str | None) -> str | None:
    return value if value is None else redact_secrets(value)


def _safe_event(event: FailureEventFacts) -> FailureEventFacts:
    kind, stage, source = _text(event.kind), _text(event.stage), _text(event.source)
    if (kind, stage, source) == (event.kind, event.stage, event.source):
        return event
    return msgspec.structs.replace(event, kind=kind, stage=stage, source=source)


def _safe_events(
    events: tuple[FailureEventFacts, ...],
) -> tuple[FailureEventFacts, ...]:
    return tuple(_safe_event(event) for event in events)


def _safe_call(call: CallFacts) -> CallFacts:
    category = _text(call.error_category)
    events = _safe_events(call.failure_events)
    if category == call.error_category and events == call.failure_events:
        return call
    return msgspec.structs.replace(call, error_category=category, failure_events=events)


def _safe_calls(calls: CallsSummary) -> CallsSummary:
    if calls.last is None and not calls.evidence:
        return calls
    last = None if calls.last is None else _safe_call(calls.last)
    evidence = tuple((index, _safe_call(call)) for index, call in calls.evidence)
    if last == calls.last and evidence == calls.evidence:
        return calls
    return msgspec.structs.replace(calls, last=last, evidence=evidence)


def _safe_facts(facts: RowFacts) -> RowFacts:
    """``facts`` with every string a row brought redacted (ID-13)."""
    changes: dict[str, Any] = {
        name: safe
        for name in _TEXT_FIELDS
        if (safe := _text(value := getattr(facts, name))) != value
    }
    events = _safe_events(facts.failure_events)
    if events != facts.failure_events:
        changes["failure_events"] = events
    calls = _safe_calls(facts.calls)
    if calls != facts.calls:
        changes["calls"] = calls
    failure = facts.record_failure
    if failure is not None and (safe_failure := _safe_event(failure)) != failure:
        changes["record_failure"] = safe_failure
    ref = facts.rejudgment_of
    if ref is not None and (admission := _text(ref.admission_id)) != ref.admission_id:
        changes["rejudgment_of"] = msgspec.structs.replace(ref, admission_id=admission)
    return msgspec.structs.replace(facts, **changes) if changes else facts
