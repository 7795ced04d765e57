"""Routing, kinds, stages, identity and applied class of a row (ROW-20..24, ROW-50)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Literal, NamedTuple

from ledger.errors import RowError
from ledger.identity.secrets.patterns import redact_secrets
from ledger.rows.answers import is_sidecar_row
from ledger.rows.calls import http_status
from ledger.rows.facts import FailureEventFacts, RowKind
from ledger.rows.values import (
    as_count,
    as_int,
    as_list,
    as_mapping,
    as_str,
    brief,
    dig,
    is_mapping,
    is_true,
)

__all__ = [
    "OMISSION_REASON_LIMIT",
    "FinalContext",
    "RecordFacts",
    "applied_result_class",
    "failure_events",
    "final_context",
    "omission_reason",
    "own_failure_kind",
    "record_facts",
    "record_failure",
    "rollout_id",
    "row_kind",
    "row_route",
    "selected_failure_kind",
]

_ROLLOUT_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_CAPTURE_SUFFIX: Final = re.compile(r"-a[0-9]+\Z")
# ROW-21: a sandbox observation's role and the stage it stands for.
_ROLE_STAGES: Final = {
    "agent": "agent",
    "verifier": "verification",
    "environment": "seed",
}
# ROW-21, decision: every outcome but `completed` is a failure, except `unknown`,
# which is no evidence either way.
_FAILED_OUTCOMES: Final = frozenset(
    {"failed", "timeout", "oom", "sandbox_error", "cancelled"}
)


# Routing (rows.md, "Routing").


def row_route(
    row: Mapping[str, Any],
) -> Literal["nowhere", "omission", "failure", "result"]:
    """Where ``Ledger.record`` sends the row: nowhere, the sidecar, or ``OUT``."""
    if row.get("_ng_no_persist") is True:
        return "nowhere"
    return row_kind(row)


#: The longest omission reason an event keeps (its ``Reason`` bound).
OMISSION_REASON_LIMIT = 2000


def omission_reason(row: Mapping[str, Any]) -> str:
    """An omission's reason as its event keeps it: ``_ng_failure_message``, with
    every credential-shaped value redacted before it is cut to the bound (ID-13),
    so neither a secret nor a prefix of one is stored."""
    return redact_secrets(str(row.get("_ng_failure_message") or ""))[
        :OMISSION_REASON_LIMIT
    ]


def row_kind(row: Mapping[str, Any]) -> RowKind:
    """``omission``, ``failure`` or ``result``: routing, ``_ng_no_persist`` aside."""
    if row.get("_ng_omitted") is True:
        return "omission"
    return "failure" if is_sidecar_row(row) else "result"


# ROW-20: the selected failure kind.


def _record(row: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_mapping(row.get("_ng_failure_record"))


#: Mappings whose emptiness means every ``get`` gives ``None``.
_PLAIN_MAPPINGS: Final = (dict, MappingProxyType)


def _selected_event(record: Mapping[str, Any]) -> tuple[bool, Mapping[str, Any] | None]:
    # Decision: `selected_event` is present when it is an integer (an integral
    # float too; null, a bool or another type is absent). An index outside the
    # events, negative ones included, or an entry that is no object names no event.
    index = as_int(record.get("selected_event"))
    if index is None:
        return False, None
    events = as_list(record.get("failure_events")) or ()
    event = events[index] if 0 <= index < len(events) else None
    return True, event if is_mapping(event) else None


def _own_kind(row: Mapping[str, Any], record: Mapping[str, Any]) -> str | None:
    # own_failure_kind with the record already read (it is _record(row)).
    for value in (
        dig(record, "failure", "failure_kind"),
        row.get("failure_kind"),
        row.get("_ng_failure_class"),
    ):
        kind = as_str(value)
        if kind is not None:
            return kind
    return "agent_timeout" if row.get("agent_timeout_error") else None


def own_failure_kind(row: Mapping[str, Any]) -> str | None:
    """The row's own kind, whatever event its record selects (ROW-20).

    The record's ``failure.failure_kind``, else ``failure_kind``, else
    ``_ng_failure_class``, else ``agent_timeout`` for a truthy
    ``agent_timeout_error`` (the legacy Harbor flag), else ``None``.
    """
    for value in (
        dig(row, "_ng_failure_record", "failure", "failure_kind"),
        row.get("failure_kind"),
        row.get("_ng_failure_class"),
    ):
        kind = as_str(value)
        if kind is not None:
            return kind
    # The legacy Harbor flag is an int; any truthy JSON value sets it.
    return "agent_timeout" if row.get("agent_timeout_error") else None


def selected_failure_kind(row: Mapping[str, Any]) -> str | None:
    """The selected event's kind, else the row's own kind (ROW-20).

    A record that selects an event by an index that names none gives ``None``,
    never the row's own kind.
    """
    selects, event = _selected_event(_record(row))
    if selects:
        return None if event is None else as_str(event.get("failure_kind"))
    return own_failure_kind(row)


# ROW-21: the final stage and source.


class FinalContext(NamedTuple):
    """The stage and source a row's failure finally happened in (ROW-21)."""

    stage: str | None
    source: str | None


def final_context(row: Mapping[str, Any]) -> FinalContext:
    """The stage and source the row's failure finally happened in (ROW-21).

    The selected event's, else the record's (its failure's stage, its own
    source), else the row's ``failure_stage``, else its ``_ng_failure_stage``
    (ROW-60); only when none names a stage, the last failed sandbox
    observation that was not recovered.

    Decision: each of stage and source falls back on its own, so a selected
    event without a stage takes the record failure's stage.
    """
    record = _record(row)
    _, event = _selected_event(record)
    stage = _first_str(
        dig(event, "stage"), dig(record, "failure", "stage"), *_row_stages(row)
    )
    source = _first_str(dig(event, "source"), record.get("source"))
    if stage is None:
        stage = _observed_stage(row)
    return FinalContext(stage=stage, source=source)


def _row_stages(row: Mapping[str, Any]) -> tuple[object, object]:
    # ROW-60: NeMo Gym 0.7.0 writes the stage as `_ng_failure_stage` (episode
    # failures), with the meaning of a result row's `failure_stage`.
    return row.get("failure_stage"), row.get("_ng_failure_stage")


def _first_str(*values: object) -> str | None:
    return next((s for s in map(as_str, values) if s is not None), None)


def _observed_stage(row: Mapping[str, Any]) -> str | None:
    # ROW-21: the last failed sandbox record supplies the stage; a record marked
    # recovered was salvaged after the fact and never does.
    records = as_list(dig(row, "ng_agent_observations", "records")) or ()
    failed = [r for r in records if _failed_sandbox(r)]
    if not failed:
        return None
    role = as_mapping(failed[-1]).get("role")
    return _ROLE_STAGES.get(role) if isinstance(role, str) else None


def _failed_sandbox(record: object) -> bool:
    item = as_mapping(record)
    return (
        item.get("type") == "sandbox"
        and as_str(item.get("outcome")) in _FAILED_OUTCOMES
        and not is_true(item.get("recovered"))
    )


# The typed failure record's events (ROW-33).


def _event_facts(
    event: Mapping[str, Any], *, source: object = None
) -> FailureEventFacts:
    return FailureEventFacts(
        kind=as_str(event.get("failure_kind")),
        stage=as_str(event.get("stage")),
        source=as_str(event.get("source", source)),
        http_status=http_status(event.get("http_status")),
    )


def failure_events(row: Mapping[str, Any]) -> tuple[FailureEventFacts, ...]:
    """The typed record's ``failure_events``, each as kind, stage, source, status."""
    events: Sequence[Any] = as_list(_record(row).get("failure_events")) or ()
    return tuple(_event_facts(e) for e in events if is_mapping(e))


def record_failure(row: Mapping[str, Any]) -> FailureEventFacts | None:
    """The typed record's own failure, with the record's source and HTTP status."""
    return _record_failure(_record(row))


class RecordFacts(NamedTuple):
    """What ``row_facts`` reads of a row's typed failure record, read once (P-7)."""

    selected_kind: str | None
    own_kind: str | None
    context: FinalContext
    events: tuple[FailureEventFacts, ...]
    failure: FailureEventFacts | None
    record: Mapping[str, Any]  # the record, an empty mapping when there is none


def record_facts(row: Mapping[str, Any]) -> RecordFacts:
    """``selected_failure_kind``, ``own_failure_kind``, ``final_context``,
    ``failure_events`` and ``record_failure`` of ``row``, the record read once."""
    record = _record(row)
    if not record and type(record) in _PLAIN_MAPPINGS:
        # No record (most rows): each rule above reads nothing from it.
        own = _own_kind(row, record)
        stage = _first_str(*_row_stages(row))
        if stage is None:
            stage = _observed_stage(row)
        return RecordFacts(own, own, FinalContext(stage, None), (), None, record)
    selects, event = _selected_event(record)
    own = _own_kind(row, record)
    if selects:
        selected = None if event is None else as_str(event.get("failure_kind"))
    else:
        selected = own
    stage = _first_str(
        dig(event, "stage"), dig(record, "failure", "stage"), *_row_stages(row)
    )
    source = _first_str(dig(event, "source"), record.get("source"))
    if stage is None:
        stage = _observed_stage(row)
    listed: Sequence[Any] = as_list(record.get("failure_events")) or ()
    events = tuple(_event_facts(e) for e in listed if is_mapping(e))
    failure = _record_failure(record)
    return RecordFacts(
        selected, own, FinalContext(stage, source), events, failure, record
    )


def _record_failure(record: Mapping[str, Any]) -> FailureEventFacts | None:
    failure = record.get("failure")
    if not is_mapping(failure):
        return None
    own = _event_facts(failure, source=record.get("source"))
    status = http_status(record.get("http_status"))
    return FailureEventFacts(
        kind=own.kind, stage=own.stage, source=own.source, http_status=status
    )


# ROW-24: the logical rollout id.


def rollout_id(row: Mapping[str, Any]) -> str:
    """``_ng_rollout_id``, else ``"<task>-<rollout>"`` (ROW-24).

    Raises:
        RowError: the id is malformed, ends in a capture suffix ``-a<N>``, or the
            row has no explicit id and no integer task and rollout indexes.
    """
    explicit = row.get("_ng_rollout_id")
    if explicit is None:  # Decision: JSON null is absent.
        return _derived_id(row)
    if not isinstance(explicit, str) or not _ROLLOUT_ID.fullmatch(explicit):
        raise RowError(
            f"{_where(row)}: _ng_rollout_id {brief(explicit)} must be a string "
            "matching ^[A-Za-z0-9][A-Za-z0-9._-]*$; fix the input row's "
            "_ng_rollout_id",
            key="_ng_rollout_id",
        )
    if _CAPTURE_SUFFIX.search(explicit):
        raise RowError(
            f"{_where(row)}: _ng_rollout_id {brief(explicit)} ends in -a<N>, which is "
            "reserved for capture keys; rename it in the input row",
            key="_ng_rollout_id",
        )
    return explicit


def _derived_id(row: Mapping[str, Any]) -> str:
    task = as_count(row.get("_ng_task_index"))
    rollout = as_count(row.get("_ng_rollout_index"))
    if task is None or rollout is None:
        raise RowError(
            f"{_where(row)} has no _ng_rollout_id and no integer _ng_task_index and "
            "_ng_rollout_index (each from 0 to 2**63-1); stamp the indexes on the "
            "input row",
            key="_ng_task_index" if task is None else "_ng_rollout_index",
        )
    return f"{task}-{rollout}"


def _where(row: Mapping[str, Any]) -> str:
    task, rollout = row.get("_ng_task_index"), row.get("_ng_rollout_index")
    return f"row (_ng_task_index={brief(task)}, _ng_rollout_index={brief(rollout)})"


# ROW-50: the class a producer applied.


def applied_result_class(row: Mapping[str, Any]) -> str | None:
    """``_ng_result_class`` kept exactly (a string); an explicit ``unknown`` stays."""
    return as_str(row.get("_ng_result_class"))
