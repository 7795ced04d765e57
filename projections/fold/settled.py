"""Settling a state: its settled rollouts summed, the others kept (P-8).

A rollout is settled when no event but one naming it (or one changing the
cap, the policy or the failure budget) can change its decision: complete,
terminal, exhausted, or accepted as omitted. ``settle`` moves such rollouts
out of a state into its ``settled`` sums (``RunState.settled``): what they
add to the plan's counts, the coverage and the reward figures, each an exact
sum in one order, so the same log gives the same bytes however often it was
settled (R-3). ``projections.fold.left`` stores the result.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping

import msgspec

from projections.decisions.completion import Tally
from projections.decisions.rules import Decision
from projections.figures.metrics import figure_slot
from projections.figures.sums import (
    Figures,
    Scores,
    figures_of_scores,
    merge_scores,
    pack_scores,
    sorted_scores,
    unpack_scores,
    updated,
)
from projections.fold.state import RolloutState, RunState, Settled

__all__ = ["SETTLED_VALUES", "settle"]

#: The decisions no event but one naming the rollout (or changing the cap, the
#: policy or the failure budget) can change.
SETTLED_VALUES = frozenset({"complete", "terminal", "exhausted", "omitted"})


_ENCODER = msgspec.msgpack.Encoder()
_FIGURES = msgspec.msgpack.Decoder(Figures)


class _Sums:
    """A ``Settled`` being added to, rollout by rollout."""

    def __init__(self, base: Settled | None, after: int) -> None:
        base = base or Settled()
        self.settled = msgspec.structs.replace(
            base,
            decisions={v: dict(r) for v, r in base.decisions.items()},
            tasks=dict(base.tasks),
            task_base=dict(base.task_base),
            failure_tasks=list(base.failure_tasks),
            missing_tasks=list(base.missing_tasks),
        )
        self.tally = Tally(base)
        self.tally.base = {}
        self.base = base
        self.new_tasks, self.new_scores = array("q"), array("d")
        self.after = after

    def add(self, task: int, rollout: RolloutState, decision: Decision) -> None:
        found = self.settled
        reasons = found.decisions.setdefault(decision.value, {})
        reasons[decision.reason] = reasons.get(decision.reason, 0) + 1
        found.rollouts += 1
        self.tally.add_kind(decision)
        self.tally.add_rollout(rollout, self.after)
        slot = figure_slot(rollout, decision)
        counter = "metric_masked" if slot == "masked" else slot
        setattr(found, counter, getattr(found, counter) + 1)
        if slot == "scored":
            self.new_tasks.append(task)
            self.new_scores.append(decision.score or 0.0)
        elif slot == "missing":
            found.missing_tasks.append(task)
        elif slot == "failure_classes":
            found.failure_tasks.append(task)

    def done(self) -> Settled:
        """The sums, each in one order (R-3: the same log, the same bytes).

        Lists and maps are sorted, so the sums of a prefix settled in one
        go or over several resumes encode alike. The lists were sorted
        before and grew by a few: sorting them again is close to linear.
        """
        found, tally = self.settled, self.tally
        found.decisions = {
            value: dict(sorted(reasons.items()))
            for value, reasons in sorted(found.decisions.items())
        }
        found.failure_tasks.sort()
        found.missing_tasks.sort()
        found.tasks = dict(sorted(tally.tasks.items()))
        found.kinds = dict(sorted(tally.kinds.items()))
        found.masked, found.suspect = tally.masked, tally.suspect
        found.reserved, found.outcomes = tally.reserved, tally.outcomes
        found.duplicates, found.superseded = tally.duplicates, tally.superseded
        found.counted = tally.counted
        found.task_base = dict(sorted(found.task_base.items()))
        base = self.base
        if self.new_tasks or not base.figures:  # else the base's, unread
            new = sorted_scores(self.new_tasks, self.new_scores)
            self.new_tasks, self.new_scores = array("q"), array("d")
            old: Scores = unpack_scores(base.scores)
            figures = None
            if base.figures:  # only the tasks that gained values, again
                added: dict[int, list[float]] = {}
                for task, score in zip(*new, strict=True):
                    added.setdefault(task, []).append(score)
                figures = updated(_FIGURES.decode(base.figures), old, added)
            scores = merge_scores(old, new)
            del old, new
            found.scores = pack_scores(scores)
            figures = figures or figures_of_scores(scores)
            found.figures = _ENCODER.encode(figures)
        return found


def settle(
    state: RunState,
    decisions: Mapping[tuple[int, int], Decision],
    *,
    consume: bool = False,
) -> RunState:
    """``state`` with its settled rollouts moved into ``settled`` (a new state).

    ``decisions`` are ``state``'s (``decide_all``). The rollouts kept are the
    same objects as ``state``'s: the caller no longer folds into ``state``.
    ``consume``: each task is taken out of ``state`` once summed, so its
    settled rollouts are freed as the sums grow (an import, P-9).
    """
    sums = _Sums(state.settled, state.before_seq)
    kept: dict[int, dict[int, RolloutState]] = {}
    for task in list(state.rollouts):
        by_rollout = state.rollouts[task]
        total, done, complete = sums.settled.task_base.pop(task, (0, 0, 0))
        keep: dict[int, RolloutState] = {}
        for index, rollout in by_rollout.items():
            decision = decisions[task, index]
            if decision.value not in SETTLED_VALUES:
                keep[index] = rollout
                continue
            sums.add(task, rollout, decision)
            total += 1
            done += decision.value in ("complete", "omitted")
            complete += decision.value == "complete"
        if keep:
            kept[task] = keep
            if total:
                sums.settled.task_base[task] = (total, done, complete)
        else:
            sums.tally.add_completion(total, done, complete)
        if consume:
            del state.rollouts[task]
    return msgspec.structs.replace(state, rollouts=kept, settled=sums.done())
