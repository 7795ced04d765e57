"""Plain words for decisions, reasons, terms and rule ids, and their tables. Pure."""

from ledger import lazy_exports

__all__ = [
    "GLOSSARY",
    "GLOSSARY_SECTIONS",
    "REASON_LABELS",
    "RULE_WORDS",
    "decision_side",
    "describe_decision",
    "describe_kind",
    "describe_reason",
    "describe_rollout",
    "describe_rule",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "GLOSSARY": "projections.words.describe",
        "GLOSSARY_SECTIONS": "projections.words.describe",
        "REASON_LABELS": "projections.words.describe",
        "RULE_WORDS": "projections.words.describe",
        "decision_side": "projections.words.describe",
        "describe_decision": "projections.words.describe",
        "describe_kind": "projections.words.describe",
        "describe_reason": "projections.words.describe",
        "describe_rollout": "projections.words.describe",
        "describe_rule": "projections.words.describe",
    },
)
