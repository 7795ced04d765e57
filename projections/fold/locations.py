"""Where an outcome event's row is, read off the event's raw body (P-4).

``result_saved``, ``failure_saved`` and ``judge_outcome_saved`` name the bytes
of their row; reading only the location (not the facts) keeps ``results`` and
``replan`` from decoding every event they locate. A body that does not decode
so is the caller's to decode in full, which names its error.
"""

from __future__ import annotations

import msgspec

from ledger.event_views import (
    FailureSavedLocation,
    JudgeOutcomeLocation,
    ResultSavedLocation,
)
from ledger.events import Location
from ledger.store.port import EventRow

__all__ = ["LOCATED_KINDS", "raw_location"]

_Located = ResultSavedLocation | FailureSavedLocation | JudgeOutcomeLocation
_LOCATION_DECODER = msgspec.json.Decoder(_Located)
_LOCATED: dict[type, str] = {
    ResultSavedLocation: "result_saved",
    FailureSavedLocation: "failure_saved",
    JudgeOutcomeLocation: "judge_outcome_saved",
}
#: The kinds of event that locate a row.
LOCATED_KINDS = frozenset(_LOCATED.values())


def raw_location(row: EventRow) -> Location | None:
    """The row location ``row``'s body names, or ``None``: not an outcome of
    those kinds, a body of another kind than the row's, or one that does not
    decode as a location."""
    if row.kind not in LOCATED_KINDS:
        return None
    try:
        view = _LOCATION_DECODER.decode(bytes(row.body))
    except (msgspec.DecodeError, RecursionError):
        return None
    return view.location if _LOCATED[type(view)] == row.kind else None
