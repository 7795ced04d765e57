"""Partial views of events: one kind's body decoded for the fields a reader needs.

A view is a Struct with its event's tag and a subset of its fields, each of the
event's type or left undecoded (``msgspec.Raw``). Decoding a stored body with a
view skips what the reader does not use (P-3, P-4: an index of one entry per
rollout, an outcome's facts); a body a view does not decode is decoded in full
by its reader, for the error ``Ledger.events`` raises. ``VIEWS`` names each
view's event, and a test keeps every view a subset of it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ledger import events as ev
from ledger.event_base import NonNegative

__all__ = [
    "VIEWS",
    "FailureSavedLocation",
    "FailureSavedRawFacts",
    "JudgeOutcomeLocation",
    "ResultSavedLocation",
    "ResultSavedRawFacts",
    "RunCreatedPolicy",
    "RunCreatedRawIndex",
]


class RunCreatedPolicy(msgspec.Struct, tag_field="kind", tag="run_created"):
    """``run_created`` for the policy read: its policy, not its index."""

    policy: dict[str, Any] = {}


def _raw_index_view() -> type[msgspec.Struct]:
    """``run_created`` whole but for its index, left as bytes: derived, never
    written twice, so a field added to the event is read here too."""
    fields: list[Any] = []
    for field in msgspec.structs.fields(ev.RunCreated):
        kind = msgspec.Raw if field.name == "index" else field.type
        if field.default is not msgspec.NODEFAULT:
            fields.append((field.name, kind, field.default))
        elif field.default_factory is not msgspec.NODEFAULT:
            factory = field.default_factory
            fields.append((field.name, kind, msgspec.field(default_factory=factory)))
        else:
            fields.append((field.name, kind))
    return msgspec.defstruct(
        "RunCreatedRawIndex",
        fields,
        tag_field="kind",
        tag="run_created",
        kw_only=True,
        frozen=True,
        module=__name__,
    )


#: ``run_created`` for replay's first step (P-3, P-9): its index, one entry per
#: rollout, is decoded an entry at a time as the fold takes it, never held as
#: a million tuples beside the state built from them.
RunCreatedRawIndex = _raw_index_view()


class ResultSavedRawFacts(
    msgspec.Struct, tag_field="kind", tag="result_saved", kw_only=True
):
    """``result_saved`` as replay's fast path folds it: the facts left as bytes."""

    task: NonNegative
    rollout: NonNegative
    attempt: NonNegative
    location: ev.Location
    facts: msgspec.Raw
    stage_index: NonNegative | None = None  # ROW-64
    final_stage_index: NonNegative | None = None


class FailureSavedRawFacts(
    msgspec.Struct, tag_field="kind", tag="failure_saved", kw_only=True
):
    """``failure_saved`` as replay's fast path folds it: the facts left as bytes."""

    task: NonNegative
    rollout: NonNegative
    attempt: NonNegative
    location: ev.Location
    sidecar_line: NonNegative
    facts: msgspec.Raw
    stage_index: NonNegative | None = None  # ROW-64
    final_stage_index: NonNegative | None = None


class ResultSavedLocation(msgspec.Struct, tag_field="kind", tag="result_saved"):
    """Where a ``result_saved`` outcome's row is, read without its facts."""

    location: ev.Location


class FailureSavedLocation(msgspec.Struct, tag_field="kind", tag="failure_saved"):
    """Where a ``failure_saved`` outcome's row is, read without its facts."""

    location: ev.Location


class JudgeOutcomeLocation(msgspec.Struct, tag_field="kind", tag="judge_outcome_saved"):
    """Where a ``judge_outcome_saved`` row is."""

    location: ev.Location


#: Each view and the event it reads part of.
VIEWS: dict[type[msgspec.Struct], type[ev.Event]] = {
    RunCreatedPolicy: ev.RunCreated,
    RunCreatedRawIndex: ev.RunCreated,
    ResultSavedRawFacts: ev.ResultSaved,
    FailureSavedRawFacts: ev.FailureSaved,
    ResultSavedLocation: ev.ResultSaved,
    FailureSavedLocation: ev.FailureSaved,
    JudgeOutcomeLocation: ev.JudgeOutcomeSaved,
}
