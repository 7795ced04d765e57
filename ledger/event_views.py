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
]


class RunCreatedPolicy(msgspec.Struct, tag_field="kind", tag="run_created"):
    """``run_created`` for the policy read: its policy, not its index."""

    policy: dict[str, Any] = {}


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
    ResultSavedRawFacts: ev.ResultSaved,
    FailureSavedRawFacts: ev.FailureSaved,
    ResultSavedLocation: ev.ResultSaved,
    FailureSavedLocation: ev.FailureSaved,
    JudgeOutcomeLocation: ev.JudgeOutcomeSaved,
}
