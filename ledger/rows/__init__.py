"""A collector's row in facts (ROW-*): its kind, side, failure kinds and calls."""

from ledger.lazy import lazy_exports

__all__ = [
    "FAILURE_KINDS",
    "RowFacts",
    "kind_info",
    "row_facts",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "FAILURE_KINDS": "ledger.rows.failure_kinds",
        "RowFacts": "ledger.rows.facts",
        "kind_info": "ledger.rows.failure_kinds",
        "row_facts": "ledger.rows.all_facts",
    },
)
