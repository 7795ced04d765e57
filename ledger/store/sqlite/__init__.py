"""The SQLite event store beside ``OUT`` (EV-10..EV-13): schema, writes, reads."""

from ledger.lazy import lazy_exports

__all__ = [
    "SCHEMA_VERSION",
    "SQLiteStore",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "SCHEMA_VERSION": "ledger.store.sqlite.schema",
        "SQLiteStore": "ledger.store.sqlite.store",
    },
)
