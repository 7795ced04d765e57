"""The folded state of a run (RunState) and its parts: plain msgspec Structs.

Everything here encodes deterministically (R-3: two refolds give the same
bytes), so a state can be compared, stored as a snapshot (EV-14) and shipped
between processes. Per outcome the fold keeps a compact code (its REC-20
branch under the policy in force at the head), never the decoded facts (P-3).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "BudgetReset",
    "DriftEntry",
    "Judgment",
    "Outcome",
    "RolloutState",
    "RunState",
]


class Outcome(msgspec.Struct, array_like=True, gc=False):
    """The first recorded outcome of one attempt, classified (REC-1, REC-20)."""

    seq: int
    attempt: int
    row_kind: str  # "result", "failure" or "omission"
    rule: str
    action: str
    reason: str
    counted: bool
    free: bool
    grade: float | None  # ROW-12's recorded grade, for 4d/5a/5d scoring
    reward: float | None
    masked: bool
    kind: str | None  # the selected failure kind
    wallclock: float | None
    late: bool = False  # REC-2: arrived after a newer attempt was allocated


class Judgment(msgspec.Struct, array_like=True, gc=False):
    """One judge admission on an attempt, and its outcome once saved (REC-30)."""

    admission_id: str
    seq: int
    outcome: str | None = None  # None while open, then "graded" or "failed"
    reward: float | None = None
    outcome_seq: int = 0
    failure_kind: str | None = None


class RolloutState(msgspec.Struct):
    """Everything the log says about one rollout ``(task, rollout)``."""

    line: int  # 1-based position in the materialized inputs
    offset: int
    length: int
    agent: str | None = None
    rollout_id: str | None = None
    reserved: dict[int, int] = {}  # attempt -> seq of its reservation
    outcomes: dict[int, Outcome] = {}  # attempt -> first outcome
    duplicates: int = 0
    superseded: int = 0
    judgments: dict[int, list[Judgment]] = {}
    approvals: dict[int, int] = {}  # attempt -> seq of its approval

    def selected_attempt(self) -> int | None:
        """REC-1: the highest attempt reserved or with an outcome (latest_allocated)."""
        attempts = self.reserved.keys() | self.outcomes.keys()
        return max(attempts) if attempts else None


class DriftEntry(msgspec.Struct, frozen=True):
    """One resume that proceeded across operational drift (REC-53)."""

    at: str
    from_digest: str
    to_digest: str
    keys: tuple[str, ...]


class BudgetReset(msgspec.Struct, frozen=True):
    """One failure-budget reset (REC-16, REC-17)."""

    at: str
    excluded_lines: int
    before_seq: int
    reason: str


class RunState(msgspec.Struct):
    """The whole run as the log says it is at ``as_of_seq``."""

    run_id: str = ""
    as_of_seq: int = 0
    head_hash: str = ""
    manifest: dict[str, Any] = {}  # ID-30 fields, as amended by identity events
    identity: dict[str, Any] | None = None
    policy: dict[str, Any] = {}  # the policy the fold classified under
    policy_changes: int = 0
    max_rollout_attempts: int = 3
    extension: int = 0
    before_seq: int = 0  # REC-16: outcomes at or before it no longer count
    excluded_lines: int = 0
    budget_resets: list[BudgetReset] = []
    drift: list[DriftEntry] = []
    overrides: int = 0
    adoptions: int = 0
    repairs: int = 0
    resumes: int = 0
    latest_resume_seq: int = 0
    legacy: dict[str, Any] | None = None
    open_admissions: dict[str, tuple[int, int, int]] = {}
    rollouts: dict[int, dict[int, RolloutState]] = {}

    @property
    def cap(self) -> int:
        """REC-11: the saved cap plus the extension in force."""
        return self.max_rollout_attempts + self.extension

    def rollout(self, task: int, rollout: int) -> RolloutState:
        """The state of one rollout (``KeyError`` when it is not materialized)."""
        return self.rollouts[task][rollout]

    def ordered_keys(self) -> list[tuple[int, int]]:
        """Every rollout key in materialized order."""
        pairs = [
            (state.line, task, rollout)
            for task, by_rollout in self.rollouts.items()
            for rollout, state in by_rollout.items()
        ]
        return [(task, rollout) for _, task, rollout in sorted(pairs)]

    @property
    def expected(self) -> int:
        """How many rollouts the run expects (REC-41)."""
        return sum(len(by_rollout) for by_rollout in self.rollouts.values())
