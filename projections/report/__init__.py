"""The report's model (issue 16): one context dict, its charts and trails, pure;
and the model a report keeps beside the log for the next one (``kept``, issue 30)."""

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
