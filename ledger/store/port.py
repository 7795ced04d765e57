"""The store interface both backends implement (architecture.md, SC-6).

``Ledger`` needs only these members of a store, so it can hold a
:class:`ledger.store.sqlite.SQLiteStore` or a
:class:`ledger.postgres.store.PostgresStore` without knowing which; mypy checks
below that both conform.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

from ledger.store.sqlite import EventRow, NewEvent

__all__ = ["EventStore"]


class EventStore(Protocol):
    """Append with an expected seq, read from a seq, the head, and snapshots."""

    writable: bool

    def check_schema(self) -> int:
        """The stored schema version (refusing a newer one)."""
        ...

    def transaction(self) -> AbstractContextManager[object]:
        """One transaction: commit, or roll back on any exception."""
        ...

    def head(self) -> tuple[int, bytes]:
        """``(seq, hash)`` of the newest event."""
        ...

    def append_many(
        self, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[EventRow]:
        """Append ``events`` in one transaction, chained on the head."""
        ...

    def append_in_transaction(
        self, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[EventRow]:
        """Append inside a transaction the caller already holds."""
        ...

    def rows(
        self, from_seq: int = 1, *, kinds: Sequence[str] = ()
    ) -> Iterator[EventRow]:
        """Stored rows in ``seq`` order from ``from_seq``, streamed."""
        ...

    def distinct_kinds(self) -> set[str]:
        """Every kind stored in the log."""
        ...

    def last_rows(self, count: int) -> list[EventRow]:
        """The newest ``count`` rows, oldest first."""
        ...

    def save_snapshot(
        self,
        seq: int,
        head_hash: bytes,
        code_version: str,
        policy_digest: str,
        state: bytes,
    ) -> None:
        """Store a projection snapshot."""
        ...

    def load_snapshot(
        self, code_version: str, policy_digest: str
    ) -> tuple[int, bytes, bytes] | None:
        """``(seq, head_hash, state)`` of the stored snapshot, if any."""
        ...

    def hash_at(self, seq: int) -> bytes | None:
        """The stored hash of event ``seq``, if there is one."""
        ...

    def journal_mode(self) -> str:
        """How the backend makes commits durable."""
        ...

    def close(self) -> None:
        """Close the store (idempotent)."""
        ...


if TYPE_CHECKING:
    from ledger.postgres.store import PostgresStore
    from ledger.store.sqlite import SQLiteStore

    def _both_conform(sqlite: SQLiteStore, pg: PostgresStore) -> list[EventStore]:
        return [sqlite, pg]
