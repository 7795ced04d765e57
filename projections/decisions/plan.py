"""Which attempts a plan releases, in which order, and what it holds (REC-3, REC-56).

Pure: the plan's keys come from the state and its decisions; reading the rows
to dispatch and appending the release happen in ``projections.operations.release``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from projections.decisions.rules import Decision
from projections.fold.state import RolloutState, RunState

__all__ = ["HeldItem", "Plan", "PlanKeys", "RejudgeItem", "in_flight", "plan_keys"]

Key = tuple[int, int, int]


class RejudgeItem(msgspec.Struct, frozen=True, omit_defaults=True):
    """A saved answer to judge again, and where its row is (REC-30).

    ROW-63: when the row names a kept deliverable, the item carries
    ``reuse_cached_deliverable`` and ``deliverables_dir``, so the collector
    judges that deliverable instead of sampling again; otherwise neither
    appears in the item's JSON.
    """

    task: int
    rollout: int
    attempt: int
    file: str
    offset: int
    length: int
    reuse_cached_deliverable: bool = False
    deliverables_dir: str | None = None


class HeldItem(msgspec.Struct, frozen=True):
    """A rollout the plan does not run, and why."""

    task: int
    rollout: int
    attempt: int
    reason: str
    kind: str | None


class Plan(msgspec.Struct):
    """What to dispatch, what to re-judge, and what is held (REC-56)."""

    dispatch: list[dict[str, Any]]
    rejudge: list[RejudgeItem]
    held: list[HeldItem]
    counts: dict[str, int]


class PlanKeys(msgspec.Struct, frozen=True):
    """The attempts a plan releases, before any file is read."""

    dispatch: tuple[Key, ...]
    rejudge: tuple[Key, ...]
    held: tuple[HeldItem, ...]
    in_flight: int


def in_flight(state: RunState, rollout: RolloutState) -> bool:
    """REC-3: reserved or admitted since the latest resume_started, without outcome."""
    since = state.latest_resume_seq
    reserved = any(a.unknown and a.seq > since for a in rollout.newest_first())
    continued = rollout.continued if rollout.extras is not None else None
    if continued is not None and continued[2] > since:  # ROW-64: a continuation
        record = rollout.attempt(continued[0])
        reserved = reserved or (record is not None and not record.has_outcome)
    admitted = any(j.outcome is None and j.seq > since for j in rollout.all_judgments())
    return reserved or admitted


def _wallclock(rollout: RolloutState) -> float:
    return rollout.wallclock or 0.0


def plan_keys(
    state: RunState,
    decisions: dict[tuple[int, int], Decision],
    *,
    skip_in_flight: bool = False,
    longest_first: bool = False,
) -> PlanKeys:
    """The attempts to release for dispatch and re-judgment, and the held rollouts."""
    keys = list(decisions)  # materialized order
    if longest_first:  # REC-56: longest first by the earlier wallclock
        keys.sort(key=lambda key: -_wallclock(state.rollout(*key)))
    dispatch, rejudge, held, flying = [], [], [], 0
    for task, index in keys:
        decision = decisions[task, index]
        if skip_in_flight and in_flight(state, state.rollout(task, index)):
            flying += 1
        elif decision.value in ("pending", "retry"):
            dispatch.append((task, index, decision.attempt))
        elif decision.value == "rejudge":
            rejudge.append((task, index, decision.attempt))
        elif decision.value == "held":
            held.append(
                HeldItem(task, index, decision.attempt, decision.reason, decision.kind)
            )
    return PlanKeys(tuple(dispatch), tuple(rejudge), tuple(held), flying)
