"""The report's model (issue 16): one context dict, its charts and trails. Pure."""

from ledger import lazy_exports

__all__ = [
    "report_context",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "report_context": "projections.report.context",
    },
)
