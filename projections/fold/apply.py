"""The fold: how each stored event changes a :class:`RunState` (REC-1..REC-16).

``fold_events`` is the pure fold of stored events, in order, under one policy;
``FoldStep`` holds one fold's policy, caches and state and folds one event at a
time through ``HANDLERS``, the table of what each kind does (a kind the state
does not reflect is in ``IGNORED_KINDS``). ``projections.fold.fast_path`` folds a
ledger's undecoded rows with the same handlers (P-3), and ``projections.fold.reading``
decides what to read: a snapshot, or the log from seq 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from sys import intern
from typing import Any, cast

from ledger import MAX_ATTEMPTS, facts_rules
from ledger import events as ev
from ledger.policy.model import RecoveryPolicy
from ledger.rows.facts import RowFacts
from projections.decisions.classify import CODES, OMISSION, classify
from projections.fold.stages import stage_reserved, stage_row
from projections.fold.state import (
    CODE_SHIFT,
    LATE,
    MASKED,
    RESERVED,
    Attempt,
    BudgetReset,
    DriftEntry,
    Judgment,
    RolloutExtras,
    RolloutState,
    RunState,
)

__all__ = [
    "HANDLERS",
    "IGNORED_KINDS",
    "NEEDS_AT",
    "FoldStep",
    "Handler",
    "Outcome",
    "fold_events",
    "fold_into",
    "pending_events",
]

# Rows of one run repeat the same facts often; a small cache per fold keeps the
# hits without keeping many decoded facts alive (P-3). It is emptied when full.
_CLASSIFIED_CACHE = 4096
_MANIFEST_SKIP = {"identity", "policy", "index"}
_FLAG_MASK = (1 << CODE_SHIFT) - 1

#: What the fold keeps of an outcome's facts: its branch code and grade (under
#: the fold's policy), reward, selected kind (interned), masked, wallclock.
Outcome = tuple[int, float | None, float | None, str | None, bool, float | None]
#: The kinds whose handler reads the event's ``at`` (the fast path reads it
#: apart, only for them).
NEEDS_AT = frozenset({"drift_accepted", "failure_budget_reset"})


class FoldStep:
    """One fold step per kind; each handler is small and touches only the state."""

    def __init__(self, state: RunState, policy: RecoveryPolicy) -> None:
        self.state = state
        self.policy = policy
        #: Outcomes classified by this fold, by facts (or their bytes).
        self.outcomes: dict[Any, Outcome] = {}

    def _classify(self, facts: RowFacts) -> Outcome:
        """The outcome's branch code (REC-20), grade (ROW-12) and kept facts."""
        kind = facts.selected_kind
        return (
            CODES[classify(facts, self.policy)],
            _grade(facts, self.policy),
            facts.reward,
            None if kind is None else intern(kind),
            facts.masked,
            facts.wallclock,
        )

    def remember(self, key: Any, facts: RowFacts) -> Outcome:
        """Classify ``facts`` and keep the outcome under ``key`` (facts or bytes)."""
        if len(self.outcomes) >= _CLASSIFIED_CACHE:
            self.outcomes.clear()
        outcome = self.outcomes[key] = self._classify(facts)
        return outcome

    def _outcome_of(self, facts: RowFacts) -> Outcome:
        found = self.outcomes.get(facts)
        return self.remember(facts, facts) if found is None else found

    def apply(self, event: ev.StoredEvent) -> None:
        """Fold one event and move the state's head to it."""
        self.fold(event)
        self.at(event.seq, event.hash)

    def fold(self, event: ev.StoredEvent) -> None:
        """Fold one event; the head moves with ``at``."""
        handler = HANDLERS.get(event.kind)
        if handler is not None:
            handler(self, event.body, event.seq, event.at)

    def handle(self, kind: str, body: Any, seq: int, at: str) -> None:
        """Fold one decoded body of ``kind``, stored at ``seq`` (``at``: its time)."""
        handler = HANDLERS.get(kind)
        if handler is not None:
            handler(self, body, seq, at)

    def at(self, seq: int, head_hash: bytes) -> None:
        """The state is as of the event ``seq`` whose hash is ``head_hash``."""
        self.state.as_of_seq = seq
        self.state.head_hash = head_hash.hex()

    # -- run and manifest ----------------------------------------------------

    def _run_created(self, body: ev.RunCreated, seq: int, at: str) -> None:
        self.run_created(body, body.index)

    def run_created(self, body: Any, index: Iterable[ev.IndexEntry]) -> None:
        """Fold ``run_created``: ``body``'s manifest fields, ``index`` its entries."""
        state = self.state
        state.run_id = body.run_id
        state.manifest = {
            name: getattr(body, name)
            for name in body.__struct_fields__
            if name not in _MANIFEST_SKIP
        }
        state.identity = body.identity
        state.max_rollout_attempts = min(body.max_rollout_attempts, MAX_ATTEMPTS)
        lengths: dict[int, int] = {}  # rows repeat lengths: one int object each
        for line, (task, rollout, offset, length, agent, rollout_id) in enumerate(
            index, start=1
        ):
            extras = None if rollout_id is None else RolloutExtras(rollout_id)
            state.rollouts.setdefault(task, {})[rollout] = RolloutState(
                line, offset, lengths.setdefault(length, length),
                agent=None if agent is None else intern(agent), extras=extras,
            )  # fmt: skip

    def _legacy_imported(self, body: ev.LegacyImported, seq: int, at: str) -> None:
        self.state.legacy = {
            "rows_read": body.rows_read,
            "rows_imported": body.rows_imported,
            "rows_rejected": body.rows_rejected,
        }

    def _adopt(self, to_digest: str, identity: dict[str, Any]) -> None:
        self.state.manifest["config_digest"] = to_digest
        self.state.identity = identity

    def _drift_accepted(self, body: ev.DriftAccepted, seq: int, at: str) -> None:
        self._adopt(body.to_digest, body.identity)
        self.state.drift.append(
            DriftEntry(at, body.from_digest, body.to_digest, body.operational_keys)
        )

    def _identity_adopted(self, body: ev.IdentityAdopted, seq: int, at: str) -> None:
        self._adopt(body.to_digest, body.identity)
        self.state.adoptions += 1

    def _identity_overridden(
        self, body: ev.IdentityOverridden, seq: int, at: str
    ) -> None:
        self._adopt(body.to_digest, body.identity)
        manifest = self.state.manifest
        manifest["materialized_digest"] = body.materialized_digest
        manifest["source_digest"] = body.source_digest
        manifest["identity_overridden"] = True  # REC-54: for good
        self.state.overrides += 1

    # -- operator and resume events -----------------------------------------

    def _attempts_extended(self, body: ev.AttemptsExtended, seq: int, at: str) -> None:
        # REC-11: the latest total is in force. A total over the bound can only
        # be in a log written before it was checked; it is read as the bound,
        # so one typo never stops every later replay.
        self.state.extension = min(body.total, MAX_ATTEMPTS)

    def _failure_budget_reset(
        self, body: ev.FailureBudgetReset, seq: int, at: str
    ) -> None:
        self.state.before_seq = body.before_seq
        self.state.excluded_lines = body.excluded_lines
        self.state.budget_resets.append(
            BudgetReset(at, body.excluded_lines, body.before_seq, body.reason)
        )

    def _policy_changed(self, body: ev.PolicyChanged, seq: int, at: str) -> None:
        self.state.policy_changes += 1  # the head policy was applied up front

    def _rerun_approved(self, body: ev.RerunApproved, seq: int, at: str) -> None:
        rollout = self._rollout(body.task, body.rollout)
        if rollout is not None:
            if rollout.approvals is None:
                rollout.approvals = {}
            rollout.approvals[body.attempt] = seq

    def _resume_started(self, body: ev.ResumeStarted, seq: int, at: str) -> None:
        self.state.resumes += 1
        self.state.latest_resume_seq = seq

    def _tail_repaired(self, body: ev.TailRepaired, seq: int, at: str) -> None:
        self.state.repairs += 1

    # -- attempts and outcomes ------------------------------------------------

    def _rollout(self, task: int, rollout: int) -> RolloutState | None:
        by_rollout = self.state.rollouts.get(task)
        return None if by_rollout is None else by_rollout.get(rollout)

    def _attempt_reserved(self, body: ev.AttemptReserved, seq: int, at: str) -> None:
        by_rollout = self.state.rollouts.get(body.task)
        rollout = None if by_rollout is None else by_rollout.get(body.rollout)
        if rollout is not None:
            record = rollout.add_attempt(body.attempt)
            bits = record.bits
            if not bits & RESERVED:
                record.bits = bits | RESERVED
                record.seq = record.seq or seq  # an outcome's seq stays
            if body.stage_index is not None:  # ROW-64: a continuation
                stage_reserved(rollout, body, seq)

    def _outcome(
        self, body: ev.ResultSaved | ev.FailureSaved, seq: int, at: str
    ) -> None:
        self.saved(body, seq, self._outcome_of(body.facts))

    def saved(self, body: Any, seq: int, outcome: Outcome) -> None:
        """Record an outcome event's classified facts on its attempt."""
        by_rollout = self.state.rollouts.get(body.task)
        rollout = None if by_rollout is None else by_rollout.get(body.rollout)
        if rollout is None:
            return  # ID-40: rows of other keys never reach the log
        final = body.final_stage_index
        if final is not None and stage_row(rollout, body, seq, final):
            return  # ROW-64: a stage before the final one, saved (or not taken)
        record = self._first_of(rollout, body.attempt, seq)
        if record is None:
            return
        code, grade, reward, kind, masked, wallclock = outcome
        # The branch code and the flags share one int (state.Attempt.bits).
        flags = record.bits & _FLAG_MASK | (MASKED if masked else 0)
        record.bits = (code + 1) << CODE_SHIFT | flags
        record.grade, record.reward, record.kind = grade, reward, kind
        if wallclock is not None and (
            rollout.wallclock is None or wallclock > rollout.wallclock
        ):
            rollout.wallclock = wallclock  # the longest recorded

    def _omission_saved(self, body: ev.OmissionSaved, seq: int, at: str) -> None:
        record = self._first_outcome(body.task, body.rollout, body.attempt, seq)
        if record is not None:
            record.code = CODES[OMISSION]
            record.kind = "skipped"

    def _first_outcome(
        self, task: int, index: int, attempt: int, seq: int
    ) -> Attempt | None:
        """The attempt's record when this is its first outcome, else ``None``."""
        rollout = self._rollout(task, index)
        if rollout is None:
            return None  # ID-40: rows of other keys never reach the log
        return self._first_of(rollout, attempt, seq)

    def _first_of(
        self, rollout: RolloutState, attempt: int, seq: int
    ) -> Attempt | None:
        """``_first_outcome`` for a rollout already looked up."""
        record = rollout.add_attempt(attempt)
        if record.has_outcome:
            rollout.duplicates += 1  # REC-1: the first outcome stands
            return None
        record.seq = seq
        if rollout.latest is not record:
            record.bits |= LATE  # REC-2: superseded, shown in history only
            rollout.superseded += 1
        return record

    def _judge_admitted(self, body: ev.JudgeAdmitted, seq: int, at: str) -> None:
        rollout = self._rollout(body.task, body.rollout)
        if rollout is None:
            return
        judgment = Judgment(admission_id=body.admission_id, seq=seq)
        if rollout.judgments is None:
            rollout.judgments = {}
        rollout.judgments.setdefault(body.attempt, []).append(judgment)
        self.state.open_admissions[body.admission_id] = (
            body.task, body.rollout, body.attempt,
        )  # fmt: skip

    def _judge_outcome_saved(
        self, body: ev.JudgeOutcomeSaved, seq: int, at: str
    ) -> None:
        key = self.state.open_admissions.pop(body.admission_id, None)
        rollout = None if key is None else self._rollout(key[0], key[1])
        if key is None or rollout is None:
            return
        for judgment in rollout.judgments_of(key[2]):
            if judgment.admission_id == body.admission_id:
                judgment.outcome = body.outcome
                judgment.reward = body.reward
                judgment.outcome_seq = seq
                judgment.failure_kind = body.failure_kind


def _grade(facts: RowFacts, policy: RecoveryPolicy) -> float | None:
    # ROW-12: only a recorded grade scores 4d (infra_cut), 5a and 5d.
    if not facts_rules.has_recorded_grade(facts, policy):
        return None
    return facts.grade_record if facts.grade_record is not None else facts.reward


#: A handler: the fold step, the event's body, its seq and its time (``at``).
Handler = Callable[[FoldStep, Any, int, str], None]

#: What each kind does to the state (tests/test_fold_table.py: every kind of
#: ``ledger.events.KINDS`` is here or in ``IGNORED_KINDS``).
HANDLERS: dict[str, Handler] = {
    "run_created": FoldStep._run_created,
    "legacy_imported": FoldStep._legacy_imported,
    "drift_accepted": FoldStep._drift_accepted,
    "identity_adopted": FoldStep._identity_adopted,
    "identity_overridden": FoldStep._identity_overridden,
    "attempts_extended": FoldStep._attempts_extended,
    "failure_budget_reset": FoldStep._failure_budget_reset,
    "policy_changed": FoldStep._policy_changed,
    "rerun_approved": FoldStep._rerun_approved,
    "resume_started": FoldStep._resume_started,
    "tail_repaired": FoldStep._tail_repaired,
    "attempt_reserved": FoldStep._attempt_reserved,
    "result_saved": FoldStep._outcome,
    "failure_saved": FoldStep._outcome,
    "omission_saved": FoldStep._omission_saved,
    "judge_admitted": FoldStep._judge_admitted,
    "judge_outcome_saved": FoldStep._judge_outcome_saved,
}

#: Kinds that leave the state as it is, on purpose: what a release named is the
#: writer's bookkeeping (``ledger.run.write_index`` folds it); decisions and
#: in-flight attempts come from reservations and outcomes (REC-3); a refused
#: collector line is evidence only (issue 25).
IGNORED_KINDS = frozenset({"attempts_released", "row_refused"})


def fold_into(
    state: RunState, events: Iterable[ev.StoredEvent], policy: RecoveryPolicy
) -> RunState:
    """Fold ``events``, which follow ``state``'s head, into it under ``policy``."""
    step = FoldStep(state, policy)
    last = None
    for last in events:
        step.fold(last)
    if last is not None:  # the head, once (hex per event costs P-3 time)
        step.at(last.seq, last.hash)
    return state


def fold_events(
    events: Iterable[ev.StoredEvent],
    policy: RecoveryPolicy,
    state: RunState | None = None,
) -> RunState:
    """The pure fold: stored events, in order, into ``state`` (or a new one).

    Every outcome is classified under ``policy`` (REC-60: the head's), which the
    state records.
    """
    folded = state if state is not None else RunState()
    folded.policy = policy.to_json_dict()
    return fold_into(folded, events, policy)


def pending_events(
    head: tuple[int, bytes], bodies: Iterable[ev.Event]
) -> list[ev.StoredEvent]:
    """``bodies`` as the events after ``head`` (``Ledger.head()``), to fold in
    memory before anything is appended: their seqs follow the head, their
    time, actor and hashes are not known yet."""
    seq, hash_ = head
    return [
        ev.StoredEvent(
            seq=seq + offset,
            kind=ev.kind_of(body),
            at="",
            actor="",
            body=cast(ev.AnyEvent, body),
            prev_hash=hash_,
            hash=hash_,
        )
        for offset, body in enumerate(bodies, start=1)
    ]
