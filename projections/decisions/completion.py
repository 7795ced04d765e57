"""Coverage (REC-41), completion (REC-40) and the budget exclusion (REC-16)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from ledger import plural, redact_secrets
from ledger.errors import RecoveryIncomplete
from projections.decisions.rules import (
    DECISION_VALUES,
    Decision,
    counted_failures,
    decide_all,
    free_attempts,
)
from projections.fold.state import (
    CODE_SHIFT,
    MASKED,
    RESERVED,
    RolloutState,
    RunState,
    Settled,
)

__all__ = [
    "HELD_REASONS",
    "Coverage",
    "Tally",
    "check_complete",
    "coverage",
    "excluded_sidecar_lines",
]

Decisions = Mapping[tuple[int, int], Decision]

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
#: The reasons a held rollout can carry (``approve --held-because``).
HELD_REASONS: tuple[str, ...] = _SPLITS["held"]
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


def _splits(
    pairs: Counter[tuple[str, str]],
) -> tuple[Counter[str], dict[str, dict[str, int]]]:
    """Decisions per value, and per value the reasons of its split."""
    values: Counter[str] = Counter()
    for (value, _), count in pairs.items():
        values[value] += count
    splits = {
        value: {reason: pairs.get((value, reason), 0) for reason in reasons}
        for value, reasons in _SPLITS.items()
    }
    return values, splits


class Tally:
    """One pass over every rollout: task completion, flags and totals (P-3).

    Started from a state's ``settled`` sums (P-8), it adds the rollouts the
    state holds to what the ones it left out added.
    """

    def __init__(self, settled: Settled | None = None) -> None:
        self.tasks = {"complete": 0, "partial": 0, "none": 0}
        self.masked = self.suspect = 0
        self.reserved = self.outcomes = self.duplicates = self.superseded = 0
        self.counted = 0
        self.kinds: Counter[str] = Counter()
        #: Decisions per (value, reason): each decision is read once (P-9:
        #: decisions made a task at a time are made once per pass).
        self.pairs: Counter[tuple[str, str]] = Counter()
        self.base: dict[int, tuple[int, int, int]] = {}
        if settled is not None:  # P-8: the rollouts a state leaves out
            for value, reasons in settled.decisions.items():
                for reason, count in reasons.items():
                    self.pairs[value, reason] += count
            for name, count in settled.tasks.items():
                self.tasks[name] += count
            self.masked, self.suspect = settled.masked, settled.suspect
            self.reserved, self.outcomes = settled.reserved, settled.outcomes
            self.duplicates = settled.duplicates
            self.superseded, self.counted = settled.superseded, settled.counted
            self.kinds.update(settled.kinds)
            self.base = settled.task_base

    def add_task(self, state: RunState, task: int, decisions: Decisions) -> None:
        rollouts = state.rollouts[task]
        total, done, complete = self.base.get(task, (0, 0, 0))
        total += len(rollouts)
        after = state.before_seq
        for index, rollout in rollouts.items():
            decision = decisions[task, index]
            value = decision.value
            self.pairs[value, decision.reason] += 1
            complete += value == "complete"
            done += value in ("complete", "omitted")
            self.add_kind(decision)
            self.add_rollout(rollout, after)
        self.add_completion(total, done, complete)

    def add_kind(self, decision: Decision) -> None:
        """The failure kind of a rollout that is not complete, counted."""
        if decision.value != "complete" and decision.kind is not None:
            self.kinds[decision.kind] += 1

    def add_completion(self, total: int, done: int, complete: int) -> None:
        """One task of ``total`` rollouts, ``done`` of them done, ``complete``."""
        if done == total and complete:
            self.tasks["complete"] += 1
        elif complete:
            self.tasks["partial"] += 1
        else:
            self.tasks["none"] += 1

    def add_rollout(self, rollout: RolloutState, after: int) -> None:
        a = rollout.latest
        if a is not None:
            self.masked += a.bits & MASKED != 0
        while a is not None:  # bits: the code plus one, and the flags
            self.reserved += a.bits & RESERVED != 0
            self.outcomes += a.bits >> CODE_SHIFT != 0
            a = a.earlier
        self.outcomes += rollout.duplicates
        if rollout.extras is not None and rollout.stages:
            self.outcomes += _stage_rows(rollout)
        self.duplicates += rollout.duplicates
        self.superseded += rollout.superseded
        self.suspect += free_attempts(rollout, after) >= _SUSPECT_FREE_ATTEMPTS
        self.counted += counted_failures(rollout, after)


def _stage_rows(rollout: RolloutState) -> int:
    """ROW-64: the saved stage rows that are no attempt's outcome (its final's is)."""
    count = 0
    for attempt, seq in (rollout.stages or {}).values():
        record = rollout.attempt(attempt)
        count += record is None or not record.has_outcome or record.seq != seq
    return count


def _totals(state: RunState, tally: Tally) -> dict[str, int]:
    return {
        "attempts_reserved": tally.reserved,
        "outcomes": tally.outcomes,
        "duplicates": tally.duplicates,
        "superseded": tally.superseded,
        "counted_failures": tally.counted,
        "excluded_sidecar_lines": state.excluded_lines,
        "extension": state.extension,
        "drift_acceptances": len(state.drift),
        "overrides": state.overrides,
    }


def _safe_kinds(kinds: Counter[str]) -> dict[str, int]:
    # ID-13: a kind is a row's string; one a log written before redaction holds
    # is published with its credential-shaped parts as <redacted>.
    safe: Counter[str] = Counter()
    for kind, count in kinds.items():
        safe[redact_secrets(kind)] += count
    return dict(sorted(safe.items()))


def _kept(decisions: Decisions) -> Decisions:
    """The decisions of the rollouts a state keeps: a ``Resume.decisions``
    (``projections.decisions.every_rollout.RunDecisions``) also answers for the settled
    rollouts, which ``state.settled`` sums already."""
    kept: Decisions | None = getattr(decisions, "open", None)
    return decisions if kept is None else kept


def coverage(state: RunState, decisions: Decisions | None = None) -> Coverage:
    """REC-41: counts that add up to ``expected``, each split to its decision."""
    decisions = decide_all(state) if decisions is None else _kept(decisions)
    tally = Tally(state.settled)
    for task in state.rollouts:
        tally.add_task(state, task, decisions)
    values, splits = _splits(tally.pairs)
    return Coverage(
        as_of_seq=state.as_of_seq,
        expected=state.expected,
        decisions={value: values.get(value, 0) for value in DECISION_VALUES},
        complete=splits["complete"],
        retry=splits["retry"],
        held=splits["held"],
        exhausted=splits["exhausted"],
        omitted=splits["omitted"],
        masked=tally.masked,
        suspect=tally.suspect,
        tasks=tally.tasks,
        failure_kinds=_safe_kinds(tally.kinds),
        totals=_totals(state, tally),
    )


#: What ``check`` says to run, where the run's own commands are not known.
_RUN = (
    "rollout-ledger run OUT --config <collection.yaml> --global-config "
    "<servers.yaml> -- <your collector command, with {plan} and {output}>"
)
_HELP = {
    "pending": _RUN,
    "retry": _RUN,
    "rejudge": _RUN,
    "held": "rollout-ledger status OUT",
    "exhausted": 'rollout-ledger extend-attempts OUT 1 --reason "<why>"',
    "terminal": "rollout-ledger history OUT",
}


def check_complete(
    state: RunState,
    decisions: Decisions | None = None,
    *,
    steps: Callable[[Iterable[str], tuple[int, int] | None], list[str]] | None = None,
) -> None:
    """REC-40: raise ``RecoveryIncomplete`` unless all are complete or omitted.

    ``steps`` gives the commands to run next for the unfinished decisions,
    whole (``NextSteps.for_unfinished``, issue 28); without it the message
    names them with ``OUT`` and placeholders.
    """
    decisions = decide_all(state) if decisions is None else _kept(decisions)
    unfinished = Counter(
        d.value for d in decisions.values() if d.value not in ("complete", "omitted")
    )
    if state.settled is not None:  # P-8: terminal and exhausted, left out
        for value, reasons in state.settled.decisions.items():
            if value not in ("complete", "omitted"):
                unfinished[value] += sum(reasons.values())
    if not unfinished:
        return
    retryable = any(unfinished[v] for v in ("pending", "retry", "rejudge"))
    parts = ", ".join(f"{n} {value}" for value, n in sorted(unfinished.items()))
    if steps is None:
        helps = list(dict.fromkeys(_HELP[v] for v in sorted(unfinished)))
    else:
        terminal = next(
            (k for k, d in decisions.items() if d.value == "terminal"), None
        )
        helps = steps(unfinished, terminal)
    left = sum(unfinished.values())
    raise RecoveryIncomplete(
        f"the saved results are valid, but {left} of "
        f"{plural(state.expected, 'rollout')} {'is' if left == 1 else 'are'} "
        f"unfinished ({parts}); next: "
        + " / ".join(f"`{command}`" for command in helps),
        retryable=retryable,
        counts=dict(unfinished),
    )
