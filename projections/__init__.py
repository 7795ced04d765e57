"""The read side of rollout-ledger: pure folds of the event log into views.

``replay`` folds events into a ``RunState``; ``decide`` applies REC-20 to one
rollout; ``coverage`` and ``check_complete`` summarize; ``gate`` and ``resume``
check and plan; ``replan`` releases what the decisions allow; ``publish``,
``verify``, ``history`` (with its ``History`` and ``HistoryEntry`` values) and
``selected_results`` serve the command line, as do ``config_diff`` and the
operator actions (``approve``, ``reset_budget``, ``extend_attempts``,
``set_policy``). Everything not in ``__all__`` is
private and may move.
"""

from projections.actions import (
    OperatorResult,
    approve,
    extend_attempts,
    held_attempts,
    reset_budget,
    set_policy,
)
from projections.config_diff import ConfigDiff, KeyDiff, config_diff
from projections.coverage import (
    Coverage,
    check_complete,
    coverage,
    excluded_sidecar_lines,
)
from projections.decide import Decision, decide, decide_all
from projections.gate import GateVerdict, gate
from projections.history import History, HistoryEntry, history
from projections.importing import import_run
from projections.plan import HeldItem, Plan, RejudgeItem
from projections.publish import publish
from projections.replan import replan
from projections.replay import replay
from projections.results import selected_results
from projections.resume import Resume, resume
from projections.state import RunState
from projections.verify import Finding, verify

__all__ = [
    "ConfigDiff",
    "Coverage",
    "Decision",
    "Finding",
    "GateVerdict",
    "HeldItem",
    "History",
    "HistoryEntry",
    "KeyDiff",
    "OperatorResult",
    "Plan",
    "RejudgeItem",
    "Resume",
    "RunState",
    "approve",
    "check_complete",
    "config_diff",
    "coverage",
    "decide",
    "decide_all",
    "excluded_sidecar_lines",
    "extend_attempts",
    "gate",
    "held_attempts",
    "history",
    "import_run",
    "publish",
    "replan",
    "replay",
    "reset_budget",
    "resume",
    "selected_results",
    "set_policy",
    "verify",
]
