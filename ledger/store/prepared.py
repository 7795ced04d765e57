"""What a writer prepares before a sink places it: an event, or a row and its event.

The recorder checks each operation against its index and hands the list to one
sink (``file_sink``, ``row_store_sink``); the sink places every row at its
file's end with :func:`locate`, which builds the row's event from where it
landed (EV-12: rows before their events).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.events import Event, Location

__all__ = ["MakeEvent", "Prepared", "locate"]


#: Builds an outcome's event once its row is located: from the row's
#: :class:`Location` and its line in its file (the sidecar line, EV-12).
MakeEvent = Callable[[Location, int], Event]


@dataclass
class Prepared:
    """One checked operation: an event, or a row and how to make its event.

    A row's event is made by ``make`` once the sink located the row, where its
    file really ends.
    """

    body: Event | None = None
    file: str | None = None
    data: bytes = b""
    make: MakeEvent | None = None
    result: Any = None
    #: Where the row was placed (set by :func:`locate`).
    location: Location | None = None

    @property
    def event(self) -> Event:
        """The operation's event (after :func:`locate`, for one with a row)."""
        if self.body is None:
            raise ValueError("this operation's row is not located yet")
        return self.body


def locate(ops: Sequence[Prepared], ends: dict[str, list[int]]) -> list[Event]:
    """Place each row at its file's end and build its event; the events in order.

    ``ends`` maps a file to ``[offset, lines]`` where its recorded bytes end; it
    is advanced past every row placed (the sinks keep or store it).
    """
    events: list[Event] = []
    for op in ops:
        if op.file is not None and op.make is not None:
            end = ends.setdefault(op.file, [0, 0])
            where = Location(
                file=op.file,
                offset=end[0],
                length=len(op.data),
                row_sha256=hashlib.sha256(op.data).hexdigest(),
            )
            op.location = where
            op.body = op.make(where, end[1])
            end[0] += len(op.data)
            end[1] += 1
        events.append(op.event)
    return events
