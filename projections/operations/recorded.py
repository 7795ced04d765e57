"""What recording a round's lines did (``run``, issue 25 and 28): the rows
recorded and skipped, the lines refused, and the failures by side; and
``record_rows``, which records a batch of them and refuses by line what does
not fit (a worker's second answer to an attempt another recorded first, too:
issue 29).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

import msgspec

from ledger import AlreadyReserved, Ledger, LedgerError, RowError, record_plan_rows
from ledger.policy.model import RecoveryPolicy
from ledger.rows.facts import RowFacts
from ledger.rows.policy_rules import kind_side

__all__ = ["FailureSides", "Recorded", "Refusal"]
__all__ = ["FailureSides", "Recorded", "Refusal", "record_rows"]


class Refusal(msgspec.Struct, frozen=True):
    """A line of a collector's file that was not recorded, and why.

    ``length`` and ``sha256`` are of the line's bytes (``sha256`` is ``None``
    where a rewritten file left no line to hash).
    """

    file: str
    line: int
    message: str
    length: int = 0
    sha256: str | None = None

    @classmethod
    def of(cls, file: str, line: int, message: str, raw: bytes) -> Refusal:
        """The refusal of a line whose bytes are ``raw``."""
        return cls(file, line, message, len(raw), hashlib.sha256(raw).hexdigest())


class Recorded(msgspec.Struct):
    """What recording a round's lines did: rows recorded and skipped, refusals.

    ``failures`` counts the failure rows recorded by side, in words
    (``model``, ``infrastructure``, ``unknown``), for ``run``'s progress.
    """

    rows: int = 0
    skipped: int = 0
    events: dict[str, int] = msgspec.field(default_factory=dict)
    refused: list[Refusal] = msgspec.field(default_factory=list)
    failures: dict[str, int] = msgspec.field(default_factory=dict)

    def add(self, other: Recorded) -> None:
        """Count ``other`` in."""
        self.rows += other.rows
        self.skipped += other.skipped
        self.events = dict(
            sorted((Counter(self.events) + Counter(other.events)).items())
        )
        self.refused += other.refused
        if other.failures:
            self.failures = dict(
                sorted((Counter(self.failures) + Counter(other.failures)).items())
            )


#: A failure's side in the words ``status`` and the report use.
_SIDE_WORDS = {"evaluation": "infrastructure", "model": "model", None: "unknown"}


class FailureSides:
    """Counts failures by side, in words, under the run's ``policy``."""

    def __init__(self, policy: RecoveryPolicy | None) -> None:
        self.policy = policy

    def count(self, facts: list[RowFacts]) -> dict[str, int]:
        """How many of the failures ``facts`` fall on each side."""
        return dict(Counter(_SIDE_WORDS[kind_side(f, self.policy)] for f in facts))


def record_rows(
    ledger: Ledger,
    name: str,
    rows: list[Any],
    numbers: list[int],
    sides: FailureSides | None = None,
) -> Recorded:
    """``rows`` recorded; a refused row is reported and the others recorded.

    ``sides`` counts the failures recorded by side (``None``: not counted).
    """
    recorded = Recorded()
    while rows:
        failures: list[RowFacts] | None = None if sides is None else []
        try:
            counts = record_plan_rows(
                ledger, rows, lines=numbers, source=name, failures=failures
            )
        except RowError as exc:
            if exc.line is None or exc.line not in numbers:
                raise
            at = numbers.index(exc.line)
            why = str(exc.__cause__ or exc)
        except AlreadyReserved as exc:
            # SC-3: another worker recorded this attempt first (its rows were
            # adopted, or its work offered again while this one ran it): the
            # store refused the second reservation. This row is refused by
            # name, never recorded twice; the others go on.
            found = _row_of(ledger, rows, exc.attempt)
            if found is None:
                raise
            at = found
            ledger.direct_recorder().catch_up_now()
            task, rollout, number = exc.attempt
            why = (
                f"attempt {number} of task {task}, rollout {rollout} was recorded "
                "first from another worker's files; this answer stays in its file "
                "and is not counted"
            )
        else:
            skipped = counts.pop("already_recorded", 0)
            recorded.add(
                Recorded(
                    rows=len(rows) - skipped,
                    skipped=skipped,
                    events=counts,
                    failures=sides.count(failures) if sides and failures else {},
                )
            )
            break
        recorded.add(record_rows(ledger, name, rows[:at], numbers[:at], sides))
        recorded.refused.append(Refusal(name, numbers[at], why))
        rows, numbers = rows[at + 1 :], numbers[at + 1 :]
    return recorded


def _row_of(
    ledger: Ledger, rows: list[Any], attempt: tuple[int, int, int]
) -> int | None:
    """The index of the row naming ``attempt`` (as the recorder reads a row)."""
    recorder = ledger.direct_recorder()
    for at, row in enumerate(rows):
        try:
            named = recorder.attempt_named(row)
        except LedgerError:
            continue
        if named == attempt:
            return at
    return None
