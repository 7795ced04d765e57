"""The events an import recorded, read back from the run's log when asked for.

An import of a million rollouts records a million events; its report keeps
their count, not the events (P-9), and reads them from the ledger it wrote
when someone iterates or indexes them. They are what the log holds, so they
compare equal to the events a dry run of the same import shows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import overload

from ledger.events import StoredEvent
from ledger.run.ledger import Ledger

__all__ = ["RecordedEvents"]


class RecordedEvents(Sequence[StoredEvent]):
    """Events ``first``..``first + count - 1`` of the run at ``out``, read lazily."""

    __slots__ = ("_count", "_first", "_out")

    def __init__(self, out: Path, *, first: int, count: int) -> None:
        self._out, self._first, self._count = out, first, count

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[StoredEvent]:
        if not self._count:
            return
        with Ledger.open(self._out) as reader:
            yield from islice(reader.events(self._first), self._count)

    @overload
    def __getitem__(self, index: int) -> StoredEvent: ...

    @overload
    def __getitem__(self, index: slice) -> list[StoredEvent]: ...

    def __getitem__(self, index: int | slice) -> StoredEvent | list[StoredEvent]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._count)
            return list(islice(self, start, stop, step))
        number = index + self._count if index < 0 else index
        if not 0 <= number < self._count:
            raise IndexError("recorded event index out of range")
        with Ledger.open(self._out) as reader:
            return next(reader.events(self._first + number))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(other) == self._count and all(
            a == b for a, b in zip(self, other, strict=True)
        )

    __hash__ = None  # type: ignore[assignment]  # equal to a list of its events

    def __repr__(self) -> str:
        where = f"{str(self._out)!r}, first={self._first}, count={self._count}"
        return f"RecordedEvents({where})"
