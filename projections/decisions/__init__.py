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
    "decide_all",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ConfigDiff": "projections.decisions.config_diff",
        "Coverage": "projections.decisions.coverage",
        "Decision": "projections.decisions.decide",
        "GateVerdict": "projections.decisions.gate",
        "HeldItem": "projections.decisions.plan",
        "Plan": "projections.decisions.plan",
        "RejudgeItem": "projections.decisions.plan",
        "RunDecisions": "projections.decisions.every_rollout",
        "check_complete": "projections.decisions.coverage",
        "decide_all": "projections.decisions.decide",
    },
)
