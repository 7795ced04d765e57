"""``decide``: REC-20 for one rollout, in the spec's order, as a value.

A decision says what recovery does with a rollout (``value``), which attempt
it concerns, the rule that decided (``"REC-20.5c"``, ``"REC-4"``, ...), the
selected failure kind and the reason (the splits of coverage, REC-41).

``decide_all`` decides every rollout of a state (P-3, P-4: hundreds of
thousands): an attempt's branch fields are read from tables indexed by its
code, REC-13's and REC-4's counts are computed only when a branch needs them,
and equal decisions share one object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import msgspec

from projections.decisions.classify import BRANCHES
from projections.fold.stages import continuation_cut
from projections.fold.state import (
    CODE_SHIFT,
    RESERVED,
    Attempt,
    Judgment,
    RolloutState,
    RunState,
)

__all__ = [
    "DECISION_VALUES",
    "Decision",
    "TaskDecisions",
    "counted_failures",
    "decide",
    "decide_all",
    "free_attempts",
]

DECISION_VALUES = (
    "pending", "retry", "rejudge", "complete",
    "held", "terminal", "exhausted", "omitted",
)  # fmt: skip

# Each branch's fields, indexed by ``Attempt.code``; COUNTED and FREE by
# ``Attempt.bits >> CODE_SHIFT`` (the code plus one: 0 is no outcome, False).
_RULE = tuple(branch.rule for branch in BRANCHES)
_ACTION = tuple(branch.action for branch in BRANCHES)
_REASON = tuple(branch.reason for branch in BRANCHES)
_COUNTED = (False, *(branch.counted for branch in BRANCHES))
_FREE = (False, *(branch.free for branch in BRANCHES))


class Decision(msgspec.Struct, frozen=True, gc=False):
    """What recovery does with one rollout, and why (REC-20)."""

    value: str
    attempt: int
    rule: str
    kind: str | None
    reason: str
    score: float | None = None  # the decided score of a complete rollout (CLI-12)


_SHARED = 4096  # at most this many distinct decisions are kept shared
_PENDING = Decision("pending", 0, "REC-20.1", None, "pending")


class _Limits(msgspec.Struct, frozen=True, gc=False):
    """What every rollout's budget reads from the state (REC-11, REC-4, REC-16)."""

    cap: int
    max_free: int
    after: int  # REC-16: only outcomes after the latest reset count

    @classmethod
    def of(cls, state: RunState) -> _Limits:
        max_free = int(state.policy.get("max_free_attempts", 5))
        return cls(state.cap, max_free, state.before_seq)


class _Budget:
    """REC-13 and REC-4 for one rollout: counted failures and free attempts.

    Each count is computed the first time a branch reads it (most rollouts
    complete and read neither).
    """

    __slots__ = ("_counted", "_free", "limits", "rollout")

    def __init__(self, limits: _Limits, rollout: RolloutState) -> None:
        self.limits = limits
        self.rollout = rollout
        self._counted: int | None = None
        self._free: int | None = None

    @property
    def counted(self) -> int:
        if self._counted is None:
            self._counted = counted_failures(self.rollout, self.limits.after)
        return self._counted

    @property
    def free(self) -> int:
        if self._free is None:
            self._free = free_attempts(self.rollout, self.limits.after)
        return self._free

    def counted_retry(self, attempt: int, rule: str, kind: str | None) -> Decision:
        if self.counted >= self.limits.cap:
            return Decision("exhausted", attempt, rule, kind, "cap")
        return Decision("retry", attempt + 1, rule, kind, "failed")

    def counted_rejudge(
        self, attempt: int, rule: str, kind: str | None, reason: str
    ) -> Decision:
        if self.counted >= self.limits.cap:
            return Decision("exhausted", attempt, rule, kind, "cap")
        return Decision("rejudge", attempt, rule, kind, reason)

    def free_retry(
        self, attempt: int, rule: str, kind: str | None, reason: str
    ) -> Decision:
        # REC-4: a rollout that keeps killing its collector stops here.
        if self.free >= self.limits.max_free:
            return Decision("exhausted", attempt, "REC-4", kind, "free_attempts")
        return Decision("retry", attempt + 1, rule, kind, reason)


def counted_failures(rollout: RolloutState, after: int) -> int:
    """REC-13: a rollout's counted outcomes recorded after ``after`` (a reset)."""
    # REC-16: what counts is when the outcome was recorded, so an outcome from
    # before a reset stays excluded even when an approval names it afterwards.
    # REC-25: an approval makes the outcome of the attempt it names counted.
    approvals = rollout.approvals
    count = 0
    a = rollout.latest
    while a is not None:  # fields, not properties (P-3: every rollout)
        outcome = a.bits >> CODE_SHIFT  # 0: no outcome
        if outcome and a.seq > after:
            approved = approvals is not None and a.attempt in approvals
            count += _COUNTED[outcome] or approved
        a = a.earlier
    if rollout.judgments is not None:  # REC-32: a failed judgment counts
        for judgments in rollout.judgments.values():
            count += sum(j.outcome == "failed" and j.outcome_seq > after
                         for j in judgments)  # fmt: skip
    return count


def free_attempts(rollout: RolloutState, after: int) -> int:
    """REC-4: unknown attempts and free outcomes of a rollout after ``after``."""
    count = 0
    a = rollout.latest
    while a is not None:  # unknown: no outcome (0) and reserved
        bits = a.bits
        outcome = bits >> CODE_SHIFT
        if (_FREE[outcome] or (not outcome and bits & RESERVED)) and a.seq > after:
            count += 1
        a = a.earlier
    return count


def _judged(judgments: list[Judgment], outcome: Attempt, budget: _Budget) -> Decision:
    latest, attempt = judgments[-1], outcome.attempt
    # REC-41: the kind is the selected outcome's (coverage counts it), unless a
    # failed judgment names its own.
    kind = latest.failure_kind or outcome.kind
    if latest.outcome is None:  # REC-33: cut off; judge-only calls are safe to repeat
        return Decision("rejudge", attempt, "REC-20.3", kind, "open_admission")
    graded = [j for j in judgments if j.outcome == "graded"]
    if latest.outcome == "graded":  # REC-31: the newest closed graded admission
        return Decision(
            "complete", attempt, "REC-20.3", kind, "rejudged", graded[-1].reward
        )
    return budget.counted_rejudge(attempt, "REC-20.3", kind, "judge_failed")


def _held(rollout: RolloutState, outcome: Attempt, budget: _Budget) -> Decision:
    if rollout.approved(outcome.attempt):  # REC-25: exactly this attempt reopens
        return budget.counted_retry(outcome.attempt, "REC-25", outcome.kind)
    code = outcome.code
    return Decision("held", outcome.attempt, _RULE[code], outcome.kind, _REASON[code])


def _complete(outcome: Attempt) -> Decision:
    reason = _REASON[outcome.code]
    if reason == "graded":
        score = outcome.reward
    elif reason == "settled_zero":
        score = 0.0
    elif reason == "unscored":
        score = None
    else:
        score = outcome.grade
    return Decision(
        "complete", outcome.attempt, _RULE[outcome.code], outcome.kind, reason, score
    )


def _infrastructure(outcome: Attempt, budget: _Budget) -> Decision:
    # REC-20.4d / 5c: counted, retry; at the cap a recorded grade stands (infra_cut).
    rule = _RULE[outcome.code]
    if budget.counted >= budget.limits.cap and outcome.grade is not None:
        return Decision("complete", outcome.attempt, rule, outcome.kind,
                        "infra_cut", outcome.grade)  # fmt: skip
    return budget.counted_retry(outcome.attempt, rule, outcome.kind)


def _by_action(rollout: RolloutState, outcome: Attempt, budget: _Budget) -> Decision:
    code = outcome.code
    action = _ACTION[code]
    if action == "complete":
        return _complete(outcome)
    if action == "held":
        return _held(rollout, outcome, budget)
    attempt, rule, kind = outcome.attempt, _RULE[code], outcome.kind
    if action == "terminal":
        return Decision("terminal", attempt, rule, kind, "terminal")
    if action == "free":
        return budget.free_retry(attempt, rule, kind, "free")
    if action == "retry":
        return budget.counted_retry(attempt, rule, kind)
    if action == "rejudge":
        return budget.counted_rejudge(attempt, rule, kind, _REASON[code])
    return _infrastructure(outcome, budget)  # "infra"


def _omission(
    rollout: RolloutState, outcome: Attempt, budget: _Budget, task_complete: bool
) -> Decision:
    # REC-35: accepted only alongside completed tasks; an approval reopens it.
    if task_complete:
        return Decision("omitted", outcome.attempt, "REC-35", outcome.kind, "accepted")
    return _held(rollout, outcome, budget)


def _decide(
    limits: _Limits, rollout: RolloutState, task_complete: Callable[[], bool]
) -> Decision:
    outcome = rollout.latest  # REC-1: the selected attempt
    if outcome is None:
        return _PENDING
    budget = _Budget(limits, rollout)
    if outcome.code < 0:
        if (
            rollout.extras is not None
            and rollout.next_stage(outcome.attempt) is not None
            and not continuation_cut(rollout, outcome.attempt)
        ):
            # ROW-64: stages saved, the final one missing: unfinished, never
            # complete; it continues at its first missing stage (plan). A
            # continuation cut off before its stage's row is an unknown
            # attempt (REC-4), whose retry continues at that stage.
            return Decision("pending", outcome.attempt, "ROW-64", None, "unfinished")
        # REC-4: reserved without outcome, an unknown attempt
        return budget.free_retry(outcome.attempt, "REC-20.1", None, "unknown")
    if _ACTION[outcome.code] == "omission":
        return _omission(rollout, outcome, budget, task_complete())
    if rollout.judgments is not None:
        judgments = rollout.judgments.get(outcome.attempt)
        if judgments:
            return _judged(judgments, outcome, budget)
    return _by_action(rollout, outcome, budget)


def _never() -> bool:
    return False


def _always() -> bool:
    return True


def decide(state: RunState, task: int, rollout: int) -> Decision:
    """REC-20 on the rollout's selected attempt (``KeyError`` for an unknown key)."""
    limits = _Limits.of(state)

    def task_complete() -> bool:
        if state.settled is not None and state.settled.complete_in(task):
            return True  # P-8: a complete rollout of the task, left out
        others = (s for r, s in state.rollouts[task].items() if r != rollout)
        return any(_decide(limits, s, _never).value == "complete" for s in others)

    return _decide(limits, state.rollout(task, rollout), task_complete)


def _omission_selected(rollout: RolloutState) -> bool:
    code = -1 if rollout.latest is None else rollout.latest.code
    return code >= 0 and _ACTION[code] == "omission"


def decide_all(state: RunState) -> dict[tuple[int, int], Decision]:
    """Every rollout's decision, in materialized order (omissions decided last).

    On a state restored from the snapshot of what is left (``state.settled``),
    the rollouts it holds: the others' decisions are summed in ``settled``.
    """
    limits, shared = _Limits.of(state), dict[Decision, Decision]()
    decisions: dict[tuple[int, int], Decision] = {}
    omissions: list[tuple[tuple[int, int], RolloutState]] = []
    complete_tasks: set[int] = set()
    settled = state.settled  # P-8: the rollouts left out are all decided
    if settled is not None:
        complete_tasks.update(t for t in settled.task_base if settled.complete_in(t))
    for key, rollout in state.ordered_rollouts():
        decision = _decide(limits, rollout, _never)
        # Equal decisions are one object (P-3: most rollouts share a handful;
        # the table stops growing where scores are all distinct).
        found = shared.get(decision)
        if found is not None:
            decision = found
        elif len(shared) < _SHARED:
            shared[decision] = decision
        decisions[key] = decision
        if decision.value == "complete":
            complete_tasks.add(key[0])
        elif _omission_selected(rollout):
            omissions.append((key, rollout))
    for key, rollout in omissions:
        # REC-35 before REC-25: an omission alongside a complete rollout is
        # accepted, approved or not (an approval reopens only a held one), so
        # every selected omission is decided again, as `decide` decides it.
        if key[0] in complete_tasks:
            decisions[key] = _decide(limits, rollout, _always)
    return decisions


def _task_decisions(
    limits: _Limits, rollouts: dict[int, RolloutState]
) -> dict[int, Decision]:
    """One task's decisions, as ``decide_all`` gives them (REC-35 needs no more)."""
    decided = {
        index: _decide(limits, rollout, _never) for index, rollout in rollouts.items()
    }
    if any(decision.value == "complete" for decision in decided.values()):
        for index, rollout in rollouts.items():
            if _omission_selected(rollout):
                decided[index] = _decide(limits, rollout, _always)
    return decided


class TaskDecisions(Mapping[tuple[int, int], Decision]):
    """``decide_all``'s decisions, decided one task at a time as they are read.

    A rollout's decision depends on its task's rollouts alone, so this
    mapping holds one task's decisions where ``decide_all``'s dict holds
    every rollout's with its key (~100 MiB for a million, P-9). Keys come in
    the state's order; reading a task's keys together decides it once.
    """

    def __init__(self, state: RunState) -> None:
        self._state, self._limits = state, _Limits.of(state)
        self._task: int | None = None
        self._decided: dict[int, Decision] = {}

    def _of(self, task: int) -> dict[int, Decision]:
        if task != self._task:
            self._decided = _task_decisions(self._limits, self._state.rollouts[task])
            self._task = task
        return self._decided

    def __getitem__(self, key: tuple[int, int]) -> Decision:
        task, rollout = key
        return self._of(task)[rollout]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        for task, rollouts in self._state.rollouts.items():
            for rollout in rollouts:
                yield task, rollout

    def __len__(self) -> int:
        return self._state.expected
