"""What recording a round's lines did (``run``, issue 25 and 28): the rows
recorded and skipped, the lines refused, and the failures by side.
"""

from __future__ import annotations

import hashlib
from collections import Counter

import msgspec

from ledger.policy.model import RecoveryPolicy
from ledger.rows.facts import RowFacts
from ledger.rows.policy_rules import kind_side

__all__ = ["FailureSides", "Recorded", "Refusal"]


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
