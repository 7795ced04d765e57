"""``decide``: REC-20 for one rollout, in the spec's order, as a value.

A decision says what recovery does with a rollout (``value``), which attempt
it concerns, the rule that decided (``"REC-20.5c"``, ``"REC-4"``, ...), the
selected failure kind and the reason (the splits of coverage, REC-41).
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from projections.state import Attempt, Judgment, RolloutState, RunState

__all__ = [
    "DECISION_VALUES",
    "Decision",
    "counted_failures",
    "decide",
    "decide_all",
    "free_attempts",
]

DECISION_VALUES = (
    "pending", "retry", "rejudge", "complete",
    "held", "terminal", "exhausted", "omitted",
)  # fmt: skip


class Decision(msgspec.Struct, frozen=True, gc=False):
    """What recovery does with one rollout, and why (REC-20)."""

    value: str
    attempt: int
    rule: str
    kind: str | None
    reason: str
    score: float | None = None  # the decided score of a complete rollout (CLI-12)


class _Budget:
    """REC-13 and REC-4 for one rollout: counted failures and free attempts."""

    def __init__(self, state: RunState, rollout: RolloutState) -> None:
        self.cap = state.cap
        self.max_free = int(state.policy.get("max_free_attempts", 5))
        after = state.before_seq  # REC-16: only outcomes after the latest reset count
        self.counted = counted_failures(rollout, after)
        self.free = free_attempts(rollout, after)

    def counted_retry(self, attempt: int, rule: str, kind: str | None) -> Decision:
        if self.counted >= self.cap:
            return Decision("exhausted", attempt, rule, kind, "cap")
        return Decision("retry", attempt + 1, rule, kind, "failed")

    def counted_rejudge(
        self, attempt: int, rule: str, kind: str | None, reason: str
    ) -> Decision:
        if self.counted >= self.cap:
            return Decision("exhausted", attempt, rule, kind, "cap")
        return Decision("rejudge", attempt, rule, kind, reason)

    def free_retry(
        self, attempt: int, rule: str, kind: str | None, reason: str
    ) -> Decision:
        # REC-4: a rollout that keeps killing its collector stops here.
        if self.free >= self.max_free:
            return Decision("exhausted", attempt, "REC-4", kind, "free_attempts")
        return Decision("retry", attempt + 1, rule, kind, reason)


def counted_failures(rollout: RolloutState, after: int) -> int:
    """REC-13: a rollout's counted outcomes recorded after ``after`` (a reset)."""
    # REC-16: what counts is when the outcome was recorded, so an outcome from
    # before a reset stays excluded even when an approval names it afterwards.
    # REC-25: an approval makes the outcome of the attempt it names counted.
    count = sum(
        a.has_outcome and a.seq > after and (a.counted or rollout.approved(a.attempt))
        for a in rollout.attempts
    )
    failed = (j for j in rollout.all_judgments() if j.outcome == "failed")
    return count + sum(j.outcome_seq > after for j in failed)  # REC-32


def free_attempts(rollout: RolloutState, after: int) -> int:
    """REC-4: unknown attempts and free outcomes of a rollout after ``after``."""
    return sum((a.unknown or a.free) and a.seq > after for a in rollout.attempts)


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
    return Decision("held", outcome.attempt, outcome.rule, outcome.kind, outcome.reason)


def _complete(outcome: Attempt) -> Decision:
    score = {"graded": outcome.reward, "settled_zero": 0.0}.get(
        outcome.reason, outcome.grade
    )
    if outcome.reason == "unscored":
        score = None
    return Decision(
        "complete", outcome.attempt, outcome.rule, outcome.kind, outcome.reason, score
    )


def _infrastructure(outcome: Attempt, budget: _Budget) -> Decision:
    # REC-20.4d / 5c: counted, retry; at the cap a recorded grade stands (infra_cut).
    if budget.counted >= budget.cap and outcome.grade is not None:
        return Decision("complete", outcome.attempt, outcome.rule, outcome.kind,
                        "infra_cut", outcome.grade)  # fmt: skip
    return budget.counted_retry(outcome.attempt, outcome.rule, outcome.kind)


def _by_action(rollout: RolloutState, outcome: Attempt, budget: _Budget) -> Decision:
    attempt, rule, kind = outcome.attempt, outcome.rule, outcome.kind
    action = outcome.action
    if action == "complete":
        return _complete(outcome)
    if action == "held":
        return _held(rollout, outcome, budget)
    if action == "terminal":
        return Decision("terminal", attempt, rule, kind, "terminal")
    if action == "free":
        return budget.free_retry(attempt, rule, kind, "free")
    if action == "retry":
        return budget.counted_retry(attempt, rule, kind)
    if action == "rejudge":
        return budget.counted_rejudge(attempt, rule, kind, outcome.reason)
    return _infrastructure(outcome, budget)  # "infra"


def _omission(
    rollout: RolloutState, outcome: Attempt, budget: _Budget, task_complete: bool
) -> Decision:
    # REC-35: accepted only alongside completed tasks; an approval reopens it.
    if task_complete:
        return Decision("omitted", outcome.attempt, "REC-35", outcome.kind, "accepted")
    return _held(rollout, outcome, budget)


def _decide(
    state: RunState, task: int, index: int, task_complete: Callable[[], bool]
) -> Decision:
    rollout = state.rollout(task, index)
    outcome = rollout.selected()
    if outcome is None:
        return Decision("pending", 0, "REC-20.1", None, "pending")
    budget = _Budget(state, rollout)
    if not outcome.has_outcome:  # REC-4: reserved without outcome, an unknown attempt
        return budget.free_retry(outcome.attempt, "REC-20.1", None, "unknown")
    if outcome.row_kind == "omission":
        return _omission(rollout, outcome, budget, task_complete())
    judgments = rollout.judgments_of(outcome.attempt)
    if judgments:
        return _judged(judgments, outcome, budget)
    return _by_action(rollout, outcome, budget)


def _never() -> bool:
    return False


def _always() -> bool:
    return True


def decide(state: RunState, task: int, rollout: int) -> Decision:
    """REC-20 on the rollout's selected attempt (``KeyError`` for an unknown key)."""

    def task_complete() -> bool:
        others = (r for r in state.rollouts[task] if r != rollout)
        return any(_decide(state, task, r, _never).value == "complete" for r in others)

    return _decide(state, task, rollout, task_complete)


def _omission_selected(state: RunState, task: int, index: int) -> bool:
    selected = state.rollout(task, index).selected()
    return (
        selected is not None
        and selected.has_outcome
        and selected.row_kind == "omission"
    )


def decide_all(state: RunState) -> dict[tuple[int, int], Decision]:
    """Every rollout's decision, in materialized order (omissions decided last)."""
    decisions = {key: _decide(state, *key, _never) for key in state.ordered_keys()}
    complete_tasks = {
        task for (task, _), d in decisions.items() if d.value == "complete"
    }
    for key in decisions:
        # REC-35 before REC-25: an omission alongside a complete rollout is
        # accepted, approved or not (an approval reopens only a held one), so
        # every selected omission is decided again, as `decide` decides it.
        if key[0] in complete_tasks and _omission_selected(state, *key):
            decisions[key] = _decide(state, *key, _always)
    return decisions
