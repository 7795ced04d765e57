"""The log and its stores: the store port, the hash chain, a run's files and
where a run lives (SQLite and memory in rooms of their own).
"""

from ledger.lazy import lazy_exports

__all__ = [
    "EventRow",
    "EventStore",
    "OpenRun",
    "RunFiles",
    "RunHome",
    "home_for",
    "resolve_out",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "EventRow": "ledger.store.port",
        "EventStore": "ledger.store.port",
        "OpenRun": "ledger.store.port",
        "RunFiles": "ledger.store.port",
        "RunHome": "ledger.store.port",
        "home_for": "ledger.store.registry",
        "resolve_out": "ledger.store.registry",
    },
)
