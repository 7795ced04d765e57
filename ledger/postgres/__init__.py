"""Runs kept in PostgreSQL (SC-1..SC-7): the store, its schema, the run lock and
the copies between a folder and a database.
"""

from ledger.lazy import lazy_exports

__all__ = [
    "PostgresStore",
    "is_postgres_url",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "PostgresStore": "ledger.postgres.store",
        "is_postgres_url": "ledger.postgres.url",
    },
)
