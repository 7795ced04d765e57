"""The injectable clock (EV-1): every stored timestamp and id comes from here.

Projections never read a clock; a seeded clock makes a whole run reproducible.
"""

from __future__ import annotations

import random
import time
import uuid
from datetime import UTC, datetime, timedelta

__all__ = ["Clock", "format_at"]


def format_at(moment: datetime) -> str:
    """ISO 8601 in UTC with microseconds, as stored in the envelope's ``at`` (EV-1)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


class Clock:
    """Timestamps and ids for appended events.

    ``Clock()`` reads the system clock and makes random ids. ``Clock(seed=N)`` is
    deterministic: it starts at ``start`` (2026-01-01 UTC by default), advances
    ``step`` per reading, and draws ids from a seeded generator, so the same
    calls give the same log bytes.

    A reading is kept as integer microseconds since the epoch, and the text of
    its whole second is formatted once per second (P-1: ``strftime`` per
    reading cost more than the rest of an append's bookkeeping); the strings
    are :func:`format_at`'s.
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
        # A naive start means local time, whose offset may change between
        # readings: those keep datetime arithmetic.
        self._exact = self._next.tzinfo is not None
        self._next_us = (self._next - _EPOCH) // _MICROSECOND if self._exact else 0
        self._step_us = step // _MICROSECOND
        self._second: tuple[int, str] = (-1, "")  # (second, its text), replaced whole

    @property
    def seeded(self) -> bool:
        """Whether this clock is deterministic."""
        return self._seeded

    def _format(self, micros: int) -> str:
        second, fraction = divmod(micros, 1_000_000)
        cached = self._second
        if cached[0] != second:
            text = (_EPOCH + timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%S")
            cached = self._second = (second, text)
        return f"{cached[1]}.{fraction:06d}Z"

    def now(self) -> str:
        """The current moment as the envelope's ``at`` string."""
        if not self._seeded:
            return self._format(time.time_ns() // 1000)
        if not self._exact:
            moment = self._next
            self._next = moment + self._step
            return format_at(moment)
        micros = self._next_us
        self._next_us = micros + self._step_us
        return self._format(micros)

    def new_id(self) -> str:
        """A new unique id (a UUID4 string; reproducible when seeded)."""
        if not self._seeded:
            return str(uuid.uuid4())
        return str(uuid.UUID(int=self._random.getrandbits(128), version=4))
