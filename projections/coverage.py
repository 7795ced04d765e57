"""Coverage (REC-41), completion (REC-40) and the budget exclusion (REC-16)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec

from ledger.errors import RecoveryIncomplete
from projections.decide import (
    DECISION_VALUES,
    Decision,
    counted_failures,
    decide_all,
    free_attempts,
)
from projections.state import RunState

__all__ = ["Coverage", "check_complete", "coverage", "excluded_sidecar_lines"]

Decisions = dict[tuple[int, int], Decision]

# REC-41: each decision's split, with every key present even at zero.
_SPLITS = {
    "complete": ("graded", "graded_failure", "settled_zero", "rejudged", "infra_cut",
                 "unscored"),
    "retry": ("unknown", "free", "failed"),
    "held": ("masked_without_artifact", "route_kept_response", "kept_answer",
             "unaccepted_omission"),
    "exhausted": ("cap", "free_attempts"),
    "omitted": ("accepted",),
}  # fmt: skip
_SUSPECT_FREE_ATTEMPTS = 3  # REC-4


class Coverage(msgspec.Struct, frozen=True):
    """What a run has and lacks, as ``coverage.json`` holds it (REC-41)."""

    as_of_seq: int
    expected: int
    decisions: dict[str, int]
    complete: dict[str, int]
    retry: dict[str, int]
    held: dict[str, int]
    exhausted: dict[str, int]
    omitted: dict[str, int]
    masked: int
    suspect: int
    tasks: dict[str, int]
    failure_kinds: dict[str, int]
    totals: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        """The plain JSON value of ``coverage.json`` and ``status --json``."""
        result: dict[str, Any] = msgspec.to_builtins(self)
        return result


def excluded_sidecar_lines(state: RunState) -> int:
    """The sidecar lines the budget reset in force excludes (0 when none, REC-16)."""
    return state.excluded_lines


def _split(decisions: Decisions, value: str) -> dict[str, int]:
    counts = Counter(d.reason for d in decisions.values() if d.value == value)
    return {reason: counts.get(reason, 0) for reason in _SPLITS[value]}


def _tasks(state: RunState, decisions: Decisions) -> dict[str, int]:
    tasks = {"complete": 0, "partial": 0, "none": 0}
    for task, rollouts in state.rollouts.items():
        done = sum(
            decisions[task, r].value in ("complete", "omitted") for r in rollouts
        )
        complete = sum(decisions[task, r].value == "complete" for r in rollouts)
        if done == len(rollouts) and complete:
            tasks["complete"] += 1
        elif complete:
            tasks["partial"] += 1
        else:
            tasks["none"] += 1
    return tasks


def _per_rollout(
    state: RunState, decisions: Decisions
) -> tuple[int, int, Counter[str]]:
    masked = suspect = 0
    kinds: Counter[str] = Counter()
    for (task, index), decision in decisions.items():
        rollout = state.rollout(task, index)
        selected = rollout.selected()
        masked += selected is not None and selected.masked
        suspect += free_attempts(rollout, state.before_seq) >= _SUSPECT_FREE_ATTEMPTS
        if decision.value != "complete" and decision.kind is not None:
            kinds[decision.kind] += 1
    return masked, suspect, kinds


def _totals(state: RunState) -> dict[str, int]:
    totals = Counter[str]()
    for rollouts in state.rollouts.values():
        for rollout in rollouts.values():
            totals["attempts_reserved"] += sum(a.reserved for a in rollout.attempts)
            totals["outcomes"] += sum(a.has_outcome for a in rollout.attempts)
            totals["outcomes"] += rollout.duplicates
            totals["duplicates"] += rollout.duplicates
            totals["superseded"] += rollout.superseded
    return {
        "attempts_reserved": totals["attempts_reserved"],
        "outcomes": totals["outcomes"],
        "duplicates": totals["duplicates"],
        "superseded": totals["superseded"],
        "counted_failures": _counted_failures(state),
        "excluded_sidecar_lines": state.excluded_lines,
        "extension": state.extension,
        "drift_acceptances": len(state.drift),
        "overrides": state.overrides,
    }


def _counted_failures(state: RunState) -> int:
    return sum(
        counted_failures(rollout, state.before_seq)
        for rollouts in state.rollouts.values()
        for rollout in rollouts.values()
    )


def coverage(state: RunState, decisions: Decisions | None = None) -> Coverage:
    """REC-41: counts that add up to ``expected``, each split to its decision."""
    decisions = decide_all(state) if decisions is None else decisions
    values = Counter(d.value for d in decisions.values())
    masked, suspect, kinds = _per_rollout(state, decisions)
    return Coverage(
        as_of_seq=state.as_of_seq,
        expected=state.expected,
        decisions={value: values.get(value, 0) for value in DECISION_VALUES},
        complete=_split(decisions, "complete"),
        retry=_split(decisions, "retry"),
        held=_split(decisions, "held"),
        exhausted=_split(decisions, "exhausted"),
        omitted=_split(decisions, "omitted"),
        masked=masked,
        suspect=suspect,
        tasks=_tasks(state, decisions),
        failure_kinds=dict(sorted(kinds.items())),
        totals=_totals(state),
    )


_HELP = {
    "pending": "rollout-ledger resume",
    "retry": "rollout-ledger resume",
    "rejudge": "rollout-ledger resume",
    "held": "rollout-ledger approve",
    "exhausted": "rollout-ledger extend-attempts",
    "terminal": "rollout-ledger history",
}


def check_complete(state: RunState, decisions: Decisions | None = None) -> None:
    """REC-40: raise ``RecoveryIncomplete`` unless all are complete or omitted."""
    decisions = decide_all(state) if decisions is None else decisions
    unfinished = Counter(
        d.value for d in decisions.values() if d.value not in ("complete", "omitted")
    )
    if not unfinished:
        return
    retryable = any(unfinished[v] for v in ("pending", "retry", "rejudge"))
    parts = ", ".join(f"{n} {value}" for value, n in sorted(unfinished.items()))
    helps = sorted({_HELP[value] for value in unfinished})
    raise RecoveryIncomplete(
        f"the saved results are valid, but {sum(unfinished.values())} of "
        f"{len(decisions)} rollouts are unfinished ({parts}); next: "
        + " / ".join(f"`{command}`" for command in helps),
        retryable=retryable,
        counts=dict(unfinished),
    )
