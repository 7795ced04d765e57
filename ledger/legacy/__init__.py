"""Runs saved without a ledger (REC-70..REC-74): their rows read and recorded."""

from ledger.lazy import lazy_exports

__all__ = [
    "ImportReport",
    "import_legacy_run",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ImportReport": "ledger.legacy.importer",
        "import_legacy_run": "ledger.legacy.importer",
    },
)
