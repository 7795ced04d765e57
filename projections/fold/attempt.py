"""One attempt as the fold keeps it: its outcome packed in a code (REC-20, P-3).

Per outcome the fold keeps the REC-20 branch it took under the policy in force
at the head, with a few flags, in one small untracked Struct, never the decoded
facts; the branch's rule, action and reason are read from the branch table.
"""

from __future__ import annotations

import msgspec

from projections.decisions.classify import BRANCHES, Branch

__all__ = ["CODE_SHIFT", "LATE", "MASKED", "RESERVED", "Attempt"]


# Attempt.flags
MASKED = 1  # the outcome is a masked result (REC-41's "masked")
LATE = 2  # REC-2: the outcome arrived after a newer attempt was allocated
RESERVED = 4  # the attempt was reserved (an import records outcomes without)
#: ``Attempt.bits`` holds ``(code + 1) << CODE_SHIFT | flags``.
CODE_SHIFT = 3
_FLAG_MASK = (1 << CODE_SHIFT) - 1

_ROW_KINDS = {
    "REC-20.2": "omission",
    "REC-20.4": "result",
    "REC-20.5": "failure",
    "REC-82": "result",  # an invalid judge response judged again
    "REC-81": "failure",  # a reopened environment fault dispatched again
}
# Each branch's fields, indexed by Attempt.code; the booleans end with the
# answer for code -1 (no outcome).
_RULES = tuple(branch.rule for branch in BRANCHES)
_ACTIONS = tuple(branch.action for branch in BRANCHES)
_REASONS = tuple(branch.reason for branch in BRANCHES)
_ROW_KIND_OF = tuple(_ROW_KINDS[branch.rule[:8]] for branch in BRANCHES)
_COUNTED = (*(branch.counted for branch in BRANCHES), False)
_FREE = (*(branch.free for branch in BRANCHES), False)


class Attempt(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """One attempt of a rollout: its reservation and its first outcome (REC-1).

    Compact on purpose (P-3: a million events in 200 MiB): one seq per attempt
    (its outcome's, else its reservation's: the outcome's seq is what REC-13
    and REC-16 count by, the reservation's what REC-3 and REC-4 read while
    there is no outcome); the outcome as its REC-20 branch (an index in
    ``classify.BRANCHES``, classified under the policy in force at the head),
    its kind and its two scores; and the rollout's next lower attempt, so
    a rollout's attempts are a chain from its selected one, without a tuple
    or list per rollout, which the cyclic GC would have to walk (P-3, P-5).
    The branch code and the flags share one int
    (``bits``, below 256 while there are fewer than 32 branches, so CPython
    shares the object); ``code`` and ``flags`` read and write it. The branch's
    fields read through properties.
    """

    attempt: int
    seq: int = 0  # the first outcome's seq (REC-1), else the reservation's
    bits: int = 0  # (code + 1) << CODE_SHIFT | flags; 0: no outcome, no flag
    kind: str | None = None  # the selected failure kind (ROW-20)
    grade: float | None = None  # ROW-12's recorded grade, for 4d/5a/5d scoring
    reward: float | None = None
    earlier: Attempt | None = None  # the rollout's next lower attempt on record

    @property
    def code(self) -> int:
        """The outcome's branch in ``classify.BRANCHES``; -1: no outcome."""
        return (self.bits >> CODE_SHIFT) - 1

    @code.setter
    def code(self, code: int) -> None:
        self.bits = (code + 1) << CODE_SHIFT | self.bits & _FLAG_MASK

    @property
    def flags(self) -> int:
        """``RESERVED``, ``MASKED`` and ``LATE``, or-ed."""
        return self.bits & _FLAG_MASK

    @flags.setter
    def flags(self, flags: int) -> None:
        self.bits = self.bits & ~_FLAG_MASK | flags

    @property
    def has_outcome(self) -> bool:
        """Whether an outcome was recorded for this attempt."""
        return self.bits >> CODE_SHIFT != 0

    @property
    def unknown(self) -> bool:
        """REC-4: reserved, and no outcome (yet)."""
        return self.bits >> CODE_SHIFT == 0 and self.bits & RESERVED != 0

    @property
    def reserved(self) -> bool:
        """Whether the attempt was reserved."""
        return self.bits & RESERVED != 0

    @property
    def branch(self) -> Branch:
        """The outcome's REC-20 branch (``IndexError`` when there is no outcome)."""
        if self.code < 0:
            raise IndexError(f"attempt {self.attempt} has no outcome")
        return BRANCHES[self.code]

    # The branch's fields are read from tables indexed by the code (P-3: decide
    # and coverage read them per attempt); ``_no_outcome`` raises as ``branch``.

    @property
    def rule(self) -> str:
        """The REC-20 branch, e.g. ``"REC-20.5c"``."""
        code = self.code
        return _RULES[code] if code >= 0 else self._no_outcome()

    @property
    def action(self) -> str:
        """What the branch decides (``classify``)."""
        code = self.code
        return _ACTIONS[code] if code >= 0 else self._no_outcome()

    @property
    def reason(self) -> str:
        """The branch's reason."""
        code = self.code
        return _REASONS[code] if code >= 0 else self._no_outcome()

    @property
    def counted(self) -> bool:
        """REC-13: whether the outcome counts toward the cap."""
        return _COUNTED[self.code]  # code -1 (no outcome): the last entry, False

    @property
    def free(self) -> bool:
        """REC-4: whether the outcome is a free attempt."""
        return _FREE[self.code]  # code -1 (no outcome): the last entry, False

    @property
    def row_kind(self) -> str:
        """``result``, ``failure`` or ``omission``."""
        code = self.code
        return _ROW_KIND_OF[code] if code >= 0 else self._no_outcome()

    def _no_outcome(self) -> str:
        raise IndexError(f"attempt {self.attempt} has no outcome")

    @property
    def masked(self) -> bool:
        """Whether the outcome is a masked result."""
        return self.bits & MASKED != 0

    @property
    def late(self) -> bool:
        """REC-2: arrived after a newer attempt was allocated (superseded)."""
        return self.bits & LATE != 0
