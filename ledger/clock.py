"""The injectable clock (EV-1): every stored timestamp and id comes from here.

Projections never read a clock; a seeded clock makes a whole run reproducible.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

__all__ = ["Clock", "format_at"]


def format_at(moment: datetime) -> str:
    """ISO 8601 in UTC with microseconds, as stored in the envelope's ``at`` (EV-1)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Clock:
    """Timestamps and ids for appended events.

    ``Clock()`` reads the system clock and makes random ids. ``Clock(seed=N)`` is
    deterministic: it starts at ``start`` (2026-01-01 UTC by default), advances
    ``step`` per reading, and draws ids from a seeded generator, so the same
    calls give the same log bytes.
    """

    def __init__(
        self,
        *,
        seed: int | None = None,
        start: datetime | None = None,
        step: timedelta = timedelta(milliseconds=1),
    ) -> None:
        self._seeded = seed is not None
        self._random = random.Random(seed)
        self._next = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._step = step

    @property
    def seeded(self) -> bool:
        """Whether this clock is deterministic."""
        return self._seeded

    def now(self) -> str:
        """The current moment as the envelope's ``at`` string."""
        if not self._seeded:
            return format_at(datetime.now(UTC))
        moment = self._next
        self._next = moment + self._step
        return format_at(moment)

    def new_id(self) -> str:
        """A new unique id (a UUID4 string; reproducible when seeded)."""
        if not self._seeded:
            return str(uuid.uuid4())
        return str(uuid.UUID(int=self._random.getrandbits(128), version=4))
