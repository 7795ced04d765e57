"""Multistage rollouts in the fold: saved stages and continuations (ROW-64).

NeMo Gym 0.7.0's multistage environments write one row per stage of a
rollout. Its rows at different stages are stages of one attempt, never
duplicates: a result row of a stage before the final one saves that stage and
leaves the attempt unfinished; the final stage's result row, or a failure at
any stage, is the attempt's outcome, as any row is. A rollout's saved stages
are never run again: a later attempt (after a failed stage, or a cut
continuation) starts at the first stage not saved. Pure, like the fold.
"""

from __future__ import annotations

from typing import Any

from ledger import events as ev
from ledger.event_views import ResultSavedRawFacts
from projections.fold.state import RolloutState

__all__ = ["continuation_cut", "stage_reserved", "stage_row"]

#: The bodies of a row routed to ``OUT``: a row that saves its stage.
_RESULTS = frozenset({ev.ResultSaved, ResultSavedRawFacts})


def stage_row(rollout: RolloutState, body: Any, seq: int, final: int) -> bool:
    """Fold a stage row's stage; whether that was all (no outcome to take).

    ``False`` leaves the row to the fold as the attempt's outcome: a failure
    at any stage, or the final stage's result row (its stage is then saved
    here, unless the row is late).
    """
    if type(body) not in _RESULTS:
        return False  # a failed stage ends its attempt
    stage: int = body.stage_index
    attempt: int = body.attempt
    latest = rollout.latest
    if latest is not None and attempt < latest.attempt:
        if stage != final:
            rollout.superseded += 1  # REC-2: a late stage of an older attempt
            return True
        return False  # the fold marks the late outcome (REC-2)
    stages = rollout.stages
    if stages is not None and stage in stages:
        rollout.duplicates += 1  # REC-1: a stage is saved once
        return True
    record = rollout.add_attempt(attempt)
    if stage == final and record.has_outcome:
        return False  # the attempt ended already: the fold counts a duplicate
    rollout.save_stage(stage, attempt, seq)
    return stage != final


def stage_reserved(rollout: RolloutState, body: ev.AttemptReserved, seq: int) -> None:
    """Remember the rollout's latest continuation: attempt, stage and seq."""
    assert body.stage_index is not None
    rollout.continue_at(body.attempt, body.stage_index, seq)


def continuation_cut(rollout: RolloutState, attempt: int) -> bool:
    """Whether ``attempt`` was continued at its next stage and saved nothing since.

    Its collector was cut off before the stage's row (REC-4: an unknown
    attempt): the next attempt continues at that stage.
    """
    continued = rollout.continued
    return (
        continued is not None
        and continued[0] == attempt
        and continued[1] == rollout.next_stage()
    )
