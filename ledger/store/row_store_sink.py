"""The write path of a store that keeps each row with its event (SC-2).

Where a row lands in its file is known only under the store's head lock (with
many writers, nobody's index is the truth), so the sink hands the store a
builder: given the files' ends, it locates every row (:func:`locate`) and makes
the events, and the store appends both in one transaction, or neither.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ledger.events import Event
from ledger.store.port import EventRow, NewEvent, NewRow, RowStore
from ledger.store.prepared import Prepared, locate

__all__ = ["RowStoreSink"]


class RowStoreSink:
    """Rows stored with their events, located under the store's head lock."""

    def __init__(self, store: RowStore) -> None:
        self._store = store

    def commit(
        self,
        ops: Sequence[Prepared],
        *,
        encode: Callable[[Event], NewEvent],
        recorded_ends: Mapping[str, tuple[int, int]],
        written: bool = False,
    ) -> tuple[list[EventRow], list[Event]]:
        """Locate each row where its file ends under the head lock; append both."""
        bodies: list[Event] = []

        def build(
            ends: dict[str, list[int]],
        ) -> tuple[list[NewEvent], list[NewRow | None]]:
            bodies[:] = locate(ops, ends)
            rows = [
                None
                if op.file is None or op.location is None
                else NewRow(op.file, op.location.offset, op.data)
                for op in ops
            ]
            return [encode(body) for body in bodies], rows

        return self._store.append_built(build), bodies

    def close(self) -> None:
        """Nothing held: the store closes with the ledger."""
