"""Every policy-independent fact of one row, computed at once (rows.md, api.md).

``row_facts`` never raises: whatever JSON value it is given (a row of wrong
types, a list, a huge or deeply nested value), it returns a :class:`RowFacts`,
and the same row always gives the same facts, encoded byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ledger.facts import Delivery, RejudgmentRef, RowFacts
from ledger.rows_answers import (
    grade_record,
    has_native_partial,
    has_saved_generation,
    is_legacy_placeholder,
    keeps_response,
    keeps_saved_answer,
    result_reward,
)
from ledger.rows_calls import calls_summary, model_calls, rollout_wallclock
from ledger.rows_kinds import (
    applied_result_class,
    failure_events,
    final_context,
    own_failure_kind,
    record_failure,
    row_kind,
    selected_failure_kind,
)
from ledger.rows_values import as_count, as_mapping, as_str, dig

__all__ = ["is_masked", "mask_owner", "row_facts"]

_DELIVERIES: Final[Mapping[str, Delivery]] = {
    "not_sent": "not_sent",
    "possibly_delivered": "possibly_delivered",
    "delivered": "delivered",
}


def row_facts(row: object) -> RowFacts:
    """The facts stored in ``result_saved`` / ``failure_saved`` for ``row``."""
    source = as_mapping(row)
    calls = model_calls(source)
    context = final_context(source)
    kind = row_kind(source)
    return RowFacts(
        run_id=as_str(source.get("_ng_run_id")),
        row_kind=kind,
        selected_kind=selected_failure_kind(source),
        own_kind=own_failure_kind(source),
        failure_class=as_str(source.get("_ng_failure_class")),
        stage=context.stage,
        source=context.source,
        record_source=as_str(dig(source, "_ng_failure_record", "source")),
        terminal=_terminal(source),
        delivery=None if kind == "result" else _delivery(source),
        has_saved_generation=has_saved_generation(source),
        legacy_placeholder=is_legacy_placeholder(source),
        keeps_response=keeps_response(source),
        has_native_partial=has_native_partial(source),
        keeps_saved_answer=keeps_saved_answer(source),
        grade_record=grade_record(source),
        reward=result_reward(source),
        masked=is_masked(source),
        mask_owner=mask_owner(source),
        omitted=kind == "omission",
        rejudgment_of=_rejudgment(source),
        result_class=applied_result_class(source),
        wallclock=rollout_wallclock(source, calls=calls),
        failure_events=failure_events(source),
        calls=calls_summary(calls),
        record_failure=record_failure(source),
    )


def _terminal(row: Mapping[str, Any]) -> bool:
    # REC-14: stamped by the producer, on the row or in the typed record.
    stamped = dig(row, "_ng_failure_record", "failure", "terminal")
    return row.get("_ng_failure_terminal") is True or stamped is True


def _delivery(row: Mapping[str, Any]) -> Delivery:
    # rows.md: a failure without a typed record, or without a delivery that is
    # one of the three values, counts as possibly delivered.
    delivery = dig(row, "_ng_failure_record", "delivery")
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
    if not isinstance(ref, Mapping):
        return None
    return RejudgmentRef(
        admission_id=as_str(ref.get("admission_id")),
        task=as_count(ref.get("task")),
        rollout=as_count(ref.get("rollout")),
        attempt=as_count(ref.get("attempt")),
    )
