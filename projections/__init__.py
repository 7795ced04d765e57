"""The read side of rollout-ledger: pure folds of the event log into views.

``replay`` folds events into a ``RunState``; ``decide`` applies REC-20 to one
rollout; ``coverage`` and ``check_complete`` summarize; ``replan`` releases what
the decisions allow. Everything not in ``__all__`` is private and may move.
"""

from projections.coverage import (
    Coverage,
    check_complete,
    coverage,
    excluded_sidecar_lines,
)
from projections.decide import Decision, decide, decide_all
from projections.fold import replay
from projections.plan import HeldItem, Plan, RejudgeItem
from projections.resume import replan
from projections.state import RunState

__all__ = [
    "Coverage",
    "Decision",
    "HeldItem",
    "Plan",
    "RejudgeItem",
    "RunState",
    "check_complete",
    "coverage",
    "decide",
    "decide_all",
    "excluded_sidecar_lines",
    "replan",
    "replay",
]
