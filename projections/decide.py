"""``decide``: REC-20 for one rollout, in the spec's order, as a value.

A decision says what recovery does with a rollout (``value``), which attempt
it concerns, the rule that decided (``"REC-20.5c"``, ``"REC-4"``, ...), the
selected failure kind and the reason (the splits of coverage, REC-41).
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from projections.state import Judgment, Outcome, RolloutState, RunState

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


class Decision(msgspec.Struct, frozen=True):
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
    count = 0
    for attempt, outcome in rollout.outcomes.items():
        approved = rollout.approvals.get(attempt)
        if outcome.counted and outcome.seq > after:
            count += 1
        elif approved is not None and max(outcome.seq, approved) > after:
            count += 1  # REC-25: an approval makes the held outcome counted
    for judgments in rollout.judgments.values():
        count += sum(j.outcome == "failed" and j.outcome_seq > after for j in judgments)
    return count


def free_attempts(rollout: RolloutState, after: int) -> int:
    """REC-4: unknown attempts and free outcomes of a rollout after ``after``."""
    unknown = sum(
        seq > after
        for attempt, seq in rollout.reserved.items()
        if attempt not in rollout.outcomes
    )
    return unknown + sum(o.free and o.seq > after for o in rollout.outcomes.values())


def _judged(judgments: list[Judgment], attempt: int, budget: _Budget) -> Decision:
    latest = judgments[-1]
    if latest.outcome is None:  # REC-33: cut off; judge-only calls are safe to repeat
        return Decision("rejudge", attempt, "REC-20.3", None, "open_admission")
    graded = [j for j in judgments if j.outcome == "graded"]
    if latest.outcome == "graded":  # REC-31: the newest closed graded admission
        return Decision(
            "complete", attempt, "REC-20.3", None, "rejudged", graded[-1].reward
        )
    return budget.counted_rejudge(
        attempt, "REC-20.3", latest.failure_kind, "judge_failed"
    )


def _held(rollout: RolloutState, outcome: Outcome, budget: _Budget) -> Decision:
    if outcome.attempt in rollout.approvals:  # REC-25: exactly this attempt reopens
        return budget.counted_retry(outcome.attempt, "REC-25", outcome.kind)
    return Decision("held", outcome.attempt, outcome.rule, outcome.kind, outcome.reason)


def _complete(outcome: Outcome) -> Decision:
    score = {"graded": outcome.reward, "settled_zero": 0.0}.get(
        outcome.reason, outcome.grade
    )
    if outcome.reason == "unscored":
        score = None
    return Decision(
        "complete", outcome.attempt, outcome.rule, outcome.kind, outcome.reason, score
    )


def _infrastructure(outcome: Outcome, budget: _Budget) -> Decision:
    # REC-20.4d / 5c: counted, retry; at the cap a recorded grade stands (infra_cut).
    if budget.counted >= budget.cap and outcome.grade is not None:
        return Decision("complete", outcome.attempt, outcome.rule, outcome.kind,
                        "infra_cut", outcome.grade)  # fmt: skip
    return budget.counted_retry(outcome.attempt, outcome.rule, outcome.kind)


def _by_action(rollout: RolloutState, outcome: Outcome, budget: _Budget) -> Decision:
    attempt, rule, kind = outcome.attempt, outcome.rule, outcome.kind
    actions: dict[str, Callable[[], Decision]] = {
        "complete": lambda: _complete(outcome),
        "held": lambda: _held(rollout, outcome, budget),
        "terminal": lambda: Decision("terminal", attempt, rule, kind, "terminal"),
        "free": lambda: budget.free_retry(attempt, rule, kind, "free"),
        "retry": lambda: budget.counted_retry(attempt, rule, kind),
        "rejudge": lambda: budget.counted_rejudge(attempt, rule, kind, outcome.reason),
        "infra": lambda: _infrastructure(outcome, budget),
    }
    return actions[outcome.action]()


def _omission(
    rollout: RolloutState, outcome: Outcome, budget: _Budget, task_complete: bool
) -> Decision:
    # REC-35: accepted only alongside completed tasks; an approval reopens it.
    if task_complete:
        return Decision("omitted", outcome.attempt, "REC-35", outcome.kind, "accepted")
    return _held(rollout, outcome, budget)


def _decide(
    state: RunState, task: int, index: int, task_complete: Callable[[], bool]
) -> Decision:
    rollout = state.rollout(task, index)
    selected = rollout.selected_attempt()
    if selected is None:
        return Decision("pending", 0, "REC-20.1", None, "pending")
    budget = _Budget(state, rollout)
    outcome = rollout.outcomes.get(selected)
    if outcome is None:  # REC-4: reserved without outcome, an unknown attempt
        return budget.free_retry(selected, "REC-20.1", None, "unknown")
    if outcome.row_kind == "omission":
        return _omission(rollout, outcome, budget, task_complete())
    judgments = rollout.judgments.get(selected)
    if judgments:
        return _judged(judgments, selected, budget)
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


def decide_all(state: RunState) -> dict[tuple[int, int], Decision]:
    """Every rollout's decision, in materialized order (omissions decided last)."""
    decisions = {key: _decide(state, *key, _never) for key in state.ordered_keys()}
    complete_tasks = {
        task for (task, _), d in decisions.items() if d.value == "complete"
    }
    for key, decision in decisions.items():
        if decision.reason == "unaccepted_omission":
            accepted = _always if key[0] in complete_tasks else _never
            decisions[key] = _decide(state, *key, accepted)
    return decisions
