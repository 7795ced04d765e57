"""A few words for each rule a decision names, for the audit trail (CLI-8)."""

from __future__ import annotations

__all__ = ["RULES"]

#: A few words for each rule a decision names (CLI-8: "REC-20.5a final agent
#: timeout").
RULES = {
    "REC-4": "free-attempt guard",
    "REC-20.1": "no outcome yet",
    "REC-20.2": "omission",
    "REC-20.3": "judge-only re-judgment",
    "REC-20.4a": "masked result with a regrade kind",
    "REC-20.4b": "masked infrastructure result",
    "REC-20.4c": "masked kept answer without a grade",
    "REC-20.4d": "infrastructure agent timeout",
    "REC-20.4e": "result",
    "REC-20.5a": "final agent timeout",
    "REC-20.5b": "terminal failure",
    "REC-20.5c": "infrastructure agent timeout",
    "REC-20.5d": "failure with a recorded grade",
    "REC-20.5e": "free lifecycle failure",
    "REC-20.5f": "route failure",
    "REC-20.5g": "regrade kind with a saved answer",
    "REC-20.5h": "kept saved answer",
    "REC-20.5i": "failure",
    "REC-81": "environment fault reopened by retry_terminal_timeouts",
    "REC-82": "invalid judge response",
    "REC-25": "approved rerun",
    "REC-35": "omission alongside completed tasks",
    "ROW-64": "multistage rollout whose final stage is not saved",
}
