"""The folded state of a run (RunState) and its parts: plain msgspec Structs.

Everything here encodes deterministically (R-3: two refolds give the same
bytes), so a state can be compared, stored as a snapshot (EV-14) and shipped
between processes. Per outcome the fold keeps a compact code (its REC-20
branch under the policy in force at the head), never the decoded facts, and
the structs that exist once per rollout or attempt are small and untracked by
the garbage collector (P-3: a million events replay within 200 MiB).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from projections.fold.attempt import CODE_SHIFT, LATE, MASKED, RESERVED, Attempt

__all__ = [
    "CODE_SHIFT",
    "LATE",
    "MASKED",
    "RESERVED",
    "Attempt",
    "BudgetReset",
    "DriftEntry",
    "Judgment",
    "RolloutExtras",
    "RolloutState",
    "RunState",
    "Settled",
]


class Judgment(msgspec.Struct, array_like=True, gc=False):
    """One judge admission on an attempt, and its outcome once saved (REC-30)."""

    admission_id: str
    seq: int
    outcome: str | None = None  # None while open, then "graded" or "failed"
    reward: float | None = None
    outcome_seq: int = 0
    failure_kind: str | None = None


class RolloutExtras(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """What few rollouts have: an explicit id, duplicates, judgments, approvals."""

    rollout_id: str | None = None
    duplicates: int = 0
    superseded: int = 0
    judgments: dict[int, list[Judgment]] | None = None
    approvals: dict[int, int] | None = None  # attempt -> seq of its approval
    # ROW-64: stage -> (attempt, seq) of the row that saved it (multistage rows)
    stages: dict[int, tuple[int, int]] | None = None
    # ROW-64: the latest continuation reserved: (attempt, stage, seq)
    continued: tuple[int, int, int] | None = None


class RolloutState(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """Everything the log says about one rollout ``(task, rollout)``.

    ``latest`` is the record of the highest attempt reserved or with an
    outcome (the selected one, REC-1); each record links to the next lower
    one (``Attempt.earlier``). ``attempts`` and ``outcomes`` are views. What
    few rollouts have (an explicit id, duplicates, superseded outcomes,
    judgments and approvals) lives in ``extras``, ``None`` until the first, and
    reads through properties.
    """

    line: int  # 1-based position in the materialized inputs
    offset: int
    length: int
    latest: Attempt | None = None
    agent: str | None = None
    wallclock: float | None = None  # the longest recorded (REC-56, longest first)
    extras: RolloutExtras | None = None

    def _extras(self) -> RolloutExtras:
        if self.extras is None:
            self.extras = RolloutExtras()
        return self.extras

    @property
    def rollout_id(self) -> str | None:
        """The explicit ``_ng_rollout_id`` (ROW-24), if the row had one."""
        return None if self.extras is None else self.extras.rollout_id

    @property
    def duplicates(self) -> int:
        """REC-1: outcomes after the first of an attempt (ignored)."""
        return 0 if self.extras is None else self.extras.duplicates

    @duplicates.setter
    def duplicates(self, count: int) -> None:
        self._extras().duplicates = count

    @property
    def superseded(self) -> int:
        """REC-2: first outcomes that arrived after a newer attempt."""
        return 0 if self.extras is None else self.extras.superseded

    @superseded.setter
    def superseded(self, count: int) -> None:
        self._extras().superseded = count

    @property
    def judgments(self) -> dict[int, list[Judgment]] | None:
        """Attempt -> its judge admissions in log order; ``None`` before the first."""
        return None if self.extras is None else self.extras.judgments

    @judgments.setter
    def judgments(self, judgments: dict[int, list[Judgment]] | None) -> None:
        self._extras().judgments = judgments

    @property
    def approvals(self) -> dict[int, int] | None:
        """Attempt -> the seq of its approval (REC-25); ``None`` before the first."""
        return None if self.extras is None else self.extras.approvals

    @approvals.setter
    def approvals(self, approvals: dict[int, int] | None) -> None:
        self._extras().approvals = approvals

    @property
    def stages(self) -> dict[int, tuple[int, int]] | None:
        """ROW-64: saved stage -> ``(attempt, seq)``; ``None`` for a plain rollout."""
        return None if self.extras is None else self.extras.stages

    def save_stage(self, stage: int, attempt: int, seq: int) -> bool:
        """ROW-64: keep the first row that saved ``stage``; whether this was it."""
        extras = self._extras()
        if extras.stages is None:
            extras.stages = {}
        if stage in extras.stages:
            return False
        extras.stages[stage] = (attempt, seq)
        return True

    @property
    def continued(self) -> tuple[int, int, int] | None:
        """ROW-64: the latest continuation reserved, ``(attempt, stage, seq)``."""
        return None if self.extras is None else self.extras.continued

    def continue_at(self, attempt: int, stage: int, seq: int) -> None:
        """ROW-64: ``attempt`` was reserved again to go on at ``stage``."""
        self._extras().continued = (attempt, stage, seq)

    def next_stage(self, attempt: int | None = None) -> int | None:
        """ROW-64: the first stage not saved (``None`` when no stage is).

        With ``attempt``, only when that attempt saved a stage: the attempt is
        then unfinished until its final stage's row ends it.
        """
        stages = self.stages
        if not stages:
            return None
        if attempt is not None and all(a != attempt for a, _ in stages.values()):
            return None
        stage = 0
        while stage in stages:
            stage += 1
        return stage

    @property
    def attempts(self) -> tuple[Attempt, ...]:
        """One record per attempt reserved or with an outcome, by attempt number."""
        records = []
        record = self.latest
        while record is not None:
            records.append(record)
            record = record.earlier
        records.reverse()
        return tuple(records)

    def newest_first(self) -> Iterator[Attempt]:
        """The attempts' records from the selected one down."""
        record = self.latest
        while record is not None:
            yield record
            record = record.earlier

    def selected(self) -> Attempt | None:
        """REC-1: the highest attempt reserved or with an outcome (latest_allocated)."""
        return self.latest

    def selected_attempt(self) -> int | None:
        """The number of the selected attempt (REC-1), ``None`` when there is none."""
        return None if self.latest is None else self.latest.attempt

    def attempt(self, number: int) -> Attempt | None:
        """The record of attempt ``number``, if it was reserved or has an outcome."""
        record = self.latest
        while record is not None and record.attempt > number:
            record = record.earlier
        return record if record is not None and record.attempt == number else None

    def add_attempt(self, number: int) -> Attempt:
        """The record of attempt ``number``, created in its place when new."""
        latest = self.latest
        if latest is None or latest.attempt < number:  # the common cases (P-3)
            self.latest = Attempt(number, earlier=latest)
            return self.latest
        if latest.attempt == number:
            return latest
        above, below = latest, latest.earlier  # above.attempt > number
        while below is not None and below.attempt > number:
            above, below = below, below.earlier
        if below is not None and below.attempt == number:
            return below
        record = above.earlier = Attempt(number, earlier=below)
        return record

    @property
    def outcomes(self) -> dict[int, Attempt]:
        """Attempt -> its record, for the attempts with an outcome."""
        return {a.attempt: a for a in self.attempts if a.has_outcome}

    def judgments_of(self, attempt: int) -> list[Judgment]:
        """The judge admissions on ``attempt``, in log order."""
        judgments = self.judgments
        return [] if judgments is None else judgments.get(attempt, [])

    def all_judgments(self) -> list[Judgment]:
        """Every judge admission of the rollout."""
        judgments = self.judgments
        if judgments is None:
            return []
        return [j for listed in judgments.values() for j in listed]

    def approved(self, attempt: int) -> bool:
        """REC-25: whether an approval names ``attempt``."""
        approvals = self.approvals
        return approvals is not None and attempt in approvals


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


class Settled(msgspec.Struct, array_like=True, omit_defaults=True):
    """What the rollouts a state leaves out add up to (P-8, a resume in
    proportion to the work left).

    A state restored from the snapshot of what is left keeps only the rollouts
    whose decision can still change without an event naming them (not
    complete, terminal, exhausted nor accepted as omitted); what the others
    add to the plan's counts, the coverage and the reward figures was summed
    here once, when they settled. Every sum is exact, so the figures are the
    ones a full replay gives. ``None`` on a state that holds every rollout.
    """

    rollouts: int = 0
    decisions: dict[str, dict[str, int]] = {}  # value -> reason -> count
    kinds: dict[str, int] = {}  # failure kinds of the settled, not complete
    tasks: dict[str, int] = {}  # complete/partial/none: tasks wholly settled
    # task with rollouts kept -> (settled rollouts, done, complete) of it
    task_base: dict[int, tuple[int, int, int]] = {}
    masked: int = 0
    suspect: int = 0
    reserved: int = 0
    outcomes: int = 0
    duplicates: int = 0
    superseded: int = 0
    counted: int = 0
    # the reward figures' sorting (projections.figures.metrics), options aside
    scored: int = 0
    unscored: int = 0
    omitted: int = 0
    metric_masked: int = 0
    failure_classes: int = 0
    missing: int = 0
    other: int = 0
    failure_tasks: list[int] = []  # a task per settled failure-class rollout
    missing_tasks: list[int] = []  # a task per settled rollout with no outcome
    # sorted (task, score) pairs, packed (reward_figures.pack_scores): read
    # only by the reward figures
    scores: bytes = b""
    # msgpack of their figures' parts (projections.figures.sums.Figures)
    figures: bytes = b""

    def complete_in(self, task: int) -> bool:
        """Whether a settled rollout of ``task`` is complete."""
        base = self.task_base.get(task)
        return base is not None and base[2] > 0


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
    settled: Settled | None = None  # P-8: rollouts left out, summed

    @property
    def cap(self) -> int:
        """REC-11: the saved cap plus the extension in force."""
        return self.max_rollout_attempts + self.extension

    def rollout(self, task: int, rollout: int) -> RolloutState:
        """The state of one rollout (``KeyError`` when it is not materialized)."""
        return self.rollouts[task][rollout]

    def ordered_keys(self) -> list[tuple[int, int]]:
        """Every rollout key in materialized order."""
        return [key for key, _ in self.ordered_rollouts()]

    def ordered_rollouts(self) -> Iterator[tuple[tuple[int, int], RolloutState]]:
        """Every ``((task, rollout), state)`` in materialized order."""
        pairs = (
            ((task, rollout), state)
            for task, by_rollout in self.rollouts.items()
            for rollout, state in by_rollout.items()
        )
        # The fold adds rollouts in materialized order, so they usually are in
        # order already: then nothing is sorted or held (P-3).
        if self._in_line_order():
            return pairs
        return iter(sorted(pairs, key=lambda pair: (pair[1].line, pair[0])))

    def _in_line_order(self) -> bool:
        previous = 0
        for by_rollout in self.rollouts.values():
            for state in by_rollout.values():
                if state.line <= previous:
                    return False
                previous = state.line
        return True

    @property
    def expected(self) -> int:
        """How many rollouts the run expects (REC-41)."""
        kept = sum(len(by_rollout) for by_rollout in self.rollouts.values())
        return kept + (0 if self.settled is None else self.settled.rollouts)
