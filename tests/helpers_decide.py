"""What the decision tests (``tests/test_decide*.py``) share.

Each decision is asserted as its shape ``(value, attempt, rule, reason)``; a
plan as the attempts it dispatches or re-judges. The ``history`` fixture that
makes the runs is in ``tests/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from projections import Decision, Plan, coverage
from tests.helpers_history import History, failure

__all__ = [
    "JUDGE_FAILED",
    "Factory",
    "Shape",
    "dispatched",
    "rejudged",
    "routed",
    "shape",
    "totals",
]

Shape = tuple[str, int, str, str]
Factory = Callable[..., History]

#: A judge failure that kept its answer (REC-20.5g): re-judged, never rerun.
JUDGE_FAILED = failure("judge_failed", stage="verification", answer=True)


def shape(decision: Decision) -> Shape:
    return (decision.value, decision.attempt, decision.rule, decision.reason)


def dispatched(plan: Plan) -> set[tuple[int, int, int]]:
    return {
        (r["_ng_task_index"], r["_ng_rollout_index"], r["_ng_attempt_index"])
        for r in plan.dispatch
    }


def rejudged(plan: Plan) -> set[tuple[int, int, int]]:
    return {(item.task, item.rollout, item.attempt) for item in plan.rejudge}


def totals(run: History) -> dict[str, int]:
    result: dict[str, int] = coverage(run.state()).to_dict()["totals"]
    return result


def routed(delivery: str | None, **extra: Any) -> dict[str, Any]:
    """A collector's ``agent_request_failed`` with its delivery (REC-20.5f)."""
    return failure(
        "agent_request_failed", source="collector", delivery=delivery, **extra
    )
