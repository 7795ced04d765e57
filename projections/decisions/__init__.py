"""Decisions, the gate and coverage (REC-20..REC-57): one rollout's decision,
whether a run may resume, what is complete, what a plan releases. Pure.
"""

from ledger import lazy_exports

__all__ = [
    "ConfigDiff",
    "Coverage",
    "Decision",
    "GateVerdict",
    "HeldItem",
    "Plan",
    "RejudgeItem",
    "RunDecisions",
    "check_complete",
    "config_diff",
    "coverage",
    "decide",
    "decide_all",
    "gate",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ConfigDiff": "projections.decisions.config_changes",
        "Coverage": "projections.decisions.completion",
        "Decision": "projections.decisions.rules",
        "GateVerdict": "projections.decisions.drift_gate",
        "HeldItem": "projections.decisions.plan",
        "Plan": "projections.decisions.plan",
        "RejudgeItem": "projections.decisions.plan",
        "RunDecisions": "projections.decisions.every_rollout",
        "check_complete": "projections.decisions.completion",
        "config_diff": "projections.decisions.config_changes",
        "coverage": "projections.decisions.completion",
        "decide": "projections.decisions.rules",
        "decide_all": "projections.decisions.rules",
        "gate": "projections.decisions.drift_gate",
    },
)
