"""The recovery policy (REC-60): its model, how its events change it, approvals."""

from ledger.lazy import lazy_exports

__all__ = [
    "RecoveryPolicy",
    "policy_from_events",
    "read_approvals",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "RecoveryPolicy": "ledger.policy.model",
        "policy_from_events": "ledger.policy.log",
        "read_approvals": "ledger.policy.approvals",
    },
)
