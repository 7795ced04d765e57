"""``replay``: a pure fold of stored events into a :class:`RunState` (REC-1..REC-16).

The fold classifies every outcome under the policy in force at the head of the
log (REC-60): the policy events are read first, cheaply, then every event is
folded once. No I/O and no clock: the same events always give the same state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from sys import intern
from typing import Any, Protocol

from ledger import events as ev
from ledger import facts_rules
from ledger.facts import RowFacts
from ledger.policy import RecoveryPolicy
from ledger.policy_log import policy_from_events
from projections.classify import CODES, OMISSION, classify
from projections.state import (
    LATE,
    MASKED,
    RESERVED,
    Attempt,
    BudgetReset,
    DriftEntry,
    Judgment,
    RolloutState,
    RunState,
)

__all__ = ["EventSource", "apply", "replay"]

_POLICY_KINDS = ("run_created", "policy_changed")
# Rows of one run repeat the same facts often; a small cache per fold keeps the
# hits without keeping many decoded facts alive (P-3).
_CLASSIFIED_CACHE = 1024
_MANIFEST_SKIP = {"identity", "policy", "index"}


class EventSource(Protocol):
    """A ledger: anything with ``events(from_seq, *, kinds)``."""

    def events(
        self, from_seq: int = 1, *, kinds: Any = ()
    ) -> Iterable[ev.StoredEvent]: ...


def _head_policy(events: Iterable[ev.StoredEvent]) -> RecoveryPolicy:
    return policy_from_events(event.body for event in events)


def replay(
    events: EventSource | Iterable[ev.StoredEvent],
    *,
    policy_override: RecoveryPolicy | None = None,
    state: RunState | None = None,
    use_snapshot: bool = True,
) -> RunState:
    """Fold stored events (a ledger, or any iterable of them) into a ``RunState``.

    ``policy_override`` classifies under another policy, for what-if analysis;
    ``state`` continues a fold with the events that follow it. Given a ledger,
    a matching snapshot (EV-14) replaces the events it covers.
    """
    if isinstance(events, Iterable):
        stream: Iterable[ev.StoredEvent] = list(events)
        policy = policy_override or _head_policy(
            e for e in stream if e.kind in _POLICY_KINDS
        )
    else:
        policy = policy_override or _head_policy(events.events(1, kinds=_POLICY_KINDS))
        if state is None and use_snapshot and policy_override is None:
            state = _snapshot(events, policy)
        stream = events.events(1 if state is None else state.as_of_seq + 1)
    folded = state if state is not None else RunState()
    folded.policy = policy.to_json_dict()
    step = _Fold(folded, policy)
    last = None
    for last in stream:
        step.fold(last)
    if last is not None:  # the head, once (hex per event costs P-3 time)
        step.at(last)
    return folded


def _snapshot(events: EventSource, policy: RecoveryPolicy) -> RunState | None:
    load = getattr(events, "load_snapshot", None)
    if load is None:
        return None
    from projections.snapshot import load_snapshot  # snapshot imports this module

    return load_snapshot(events, policy)  # type: ignore[arg-type]


def apply(state: RunState, event: ev.StoredEvent, policy: RecoveryPolicy) -> None:
    """Fold one more event into ``state`` (the incremental view of R-3)."""
    _Fold(state, policy).apply(event)


class _Fold:
    """One fold step per kind; each handler is small and touches only the state."""

    def __init__(self, state: RunState, policy: RecoveryPolicy) -> None:
        self.state = state
        self.policy = policy
        self._classified = lru_cache(maxsize=_CLASSIFIED_CACHE)(self._classify)
        self._handlers: dict[str, Callable[[Any, ev.StoredEvent], None]] = {
            kind: getattr(self, f"_{kind}")
            for kind in ev.KINDS
            if hasattr(self, f"_{kind}")
        }

    def _classify(self, facts: RowFacts) -> tuple[int, float | None]:
        """The outcome's branch code (REC-20) and recorded grade (ROW-12)."""
        return CODES[classify(facts, self.policy)], _grade(facts, self.policy)

    def apply(self, event: ev.StoredEvent) -> None:
        """Fold one event and move the state's head to it."""
        self.fold(event)
        self.at(event)

    def fold(self, event: ev.StoredEvent) -> None:
        """Fold one event; the head moves with ``at``."""
        handler = self._handlers.get(event.kind)
        if handler is not None:
            handler(event.body, event)

    def at(self, event: ev.StoredEvent) -> None:
        """The state is as of ``event``."""
        self.state.as_of_seq = event.seq
        self.state.head_hash = event.hash.hex()

    # -- run and manifest ----------------------------------------------------

    def _run_created(self, body: ev.RunCreated, event: ev.StoredEvent) -> None:
        state = self.state
        state.run_id = body.run_id
        state.manifest = {
            name: getattr(body, name)
            for name in body.__struct_fields__
            if name not in _MANIFEST_SKIP
        }
        state.identity = body.identity
        state.max_rollout_attempts = body.max_rollout_attempts
        for line, (task, rollout, offset, length, agent, rollout_id) in enumerate(
            body.index, start=1
        ):
            state.rollouts.setdefault(task, {})[rollout] = RolloutState(
                line=line, offset=offset, length=length,
                agent=None if agent is None else intern(agent), rollout_id=rollout_id,
            )  # fmt: skip

    def _legacy_imported(self, body: ev.LegacyImported, event: ev.StoredEvent) -> None:
        self.state.legacy = {
            "rows_read": body.rows_read,
            "rows_imported": body.rows_imported,
            "rows_rejected": body.rows_rejected,
        }

    def _adopt(self, to_digest: str, identity: dict[str, Any]) -> None:
        self.state.manifest["config_digest"] = to_digest
        self.state.identity = identity

    def _drift_accepted(self, body: ev.DriftAccepted, event: ev.StoredEvent) -> None:
        self._adopt(body.to_digest, body.identity)
        self.state.drift.append(
            DriftEntry(
                event.at, body.from_digest, body.to_digest, body.operational_keys
            )
        )

    def _identity_adopted(
        self, body: ev.IdentityAdopted, event: ev.StoredEvent
    ) -> None:
        self._adopt(body.to_digest, body.identity)
        self.state.adoptions += 1

    def _identity_overridden(
        self, body: ev.IdentityOverridden, event: ev.StoredEvent
    ) -> None:
        self._adopt(body.to_digest, body.identity)
        manifest = self.state.manifest
        manifest["materialized_digest"] = body.materialized_digest
        manifest["source_digest"] = body.source_digest
        manifest["identity_overridden"] = True  # REC-54: for good
        self.state.overrides += 1

    # -- operator and resume events -----------------------------------------

    def _attempts_extended(
        self, body: ev.AttemptsExtended, event: ev.StoredEvent
    ) -> None:
        self.state.extension = body.total  # REC-11: the latest total is in force

    def _failure_budget_reset(
        self, body: ev.FailureBudgetReset, event: ev.StoredEvent
    ) -> None:
        self.state.before_seq = body.before_seq
        self.state.excluded_lines = body.excluded_lines
        self.state.budget_resets.append(
            BudgetReset(event.at, body.excluded_lines, body.before_seq, body.reason)
        )

    def _policy_changed(self, body: ev.PolicyChanged, event: ev.StoredEvent) -> None:
        self.state.policy_changes += 1  # the head policy was applied up front

    def _rerun_approved(self, body: ev.RerunApproved, event: ev.StoredEvent) -> None:
        rollout = self._rollout(body.task, body.rollout)
        if rollout is not None:
            if rollout.approvals is None:
                rollout.approvals = {}
            rollout.approvals[body.attempt] = event.seq

    def _resume_started(self, body: ev.ResumeStarted, event: ev.StoredEvent) -> None:
        self.state.resumes += 1
        self.state.latest_resume_seq = event.seq

    def _tail_repaired(self, body: ev.TailRepaired, event: ev.StoredEvent) -> None:
        self.state.repairs += 1

    # -- attempts and outcomes ------------------------------------------------

    def _rollout(self, task: int, rollout: int) -> RolloutState | None:
        return self.state.rollouts.get(task, {}).get(rollout)

    def _attempt_reserved(
        self, body: ev.AttemptReserved, event: ev.StoredEvent
    ) -> None:
        rollout = self._rollout(body.task, body.rollout)
        if rollout is not None:
            record = rollout.add_attempt(body.attempt)
            if not record.flags & RESERVED:
                record.flags |= RESERVED
                record.seq = record.seq or event.seq  # an outcome's seq stays

    def _outcome(
        self, body: ev.ResultSaved | ev.FailureSaved, event: ev.StoredEvent
    ) -> None:
        record = self._first_outcome(body.task, body.rollout, body.attempt, event)
        if record is None:
            return
        facts = body.facts
        record.code, record.grade = self._classified(facts)
        record.reward = facts.reward
        record.kind = None if facts.selected_kind is None else intern(
            facts.selected_kind
        )  # fmt: skip
        record.flags |= MASKED if facts.masked else 0
        self._longest(body.task, body.rollout, facts.wallclock)

    _result_saved = _outcome
    _failure_saved = _outcome

    def _omission_saved(self, body: ev.OmissionSaved, event: ev.StoredEvent) -> None:
        record = self._first_outcome(body.task, body.rollout, body.attempt, event)
        if record is not None:
            record.code = CODES[OMISSION]
            record.kind = "skipped"

    def _first_outcome(
        self, task: int, index: int, attempt: int, event: ev.StoredEvent
    ) -> Attempt | None:
        """The attempt's record when this is its first outcome, else ``None``."""
        rollout = self._rollout(task, index)
        if rollout is None:
            return None  # ID-40: rows of other keys never reach the log
        record = rollout.add_attempt(attempt)
        if record.has_outcome:
            rollout.duplicates += 1  # REC-1: the first outcome stands
            return None
        record.seq = event.seq
        if rollout.attempts[-1] is not record:
            record.flags |= LATE  # REC-2: superseded, shown in history only
            rollout.superseded += 1
        return record

    def _longest(self, task: int, index: int, wallclock: float | None) -> None:
        rollout = self.state.rollouts[task][index]
        if wallclock is not None and (
            rollout.wallclock is None or wallclock > rollout.wallclock
        ):
            rollout.wallclock = wallclock

    def _judge_admitted(self, body: ev.JudgeAdmitted, event: ev.StoredEvent) -> None:
        rollout = self._rollout(body.task, body.rollout)
        if rollout is None:
            return
        judgment = Judgment(admission_id=body.admission_id, seq=event.seq)
        if rollout.judgments is None:
            rollout.judgments = {}
        rollout.judgments.setdefault(body.attempt, []).append(judgment)
        self.state.open_admissions[body.admission_id] = (
            body.task, body.rollout, body.attempt,
        )  # fmt: skip

    def _judge_outcome_saved(
        self, body: ev.JudgeOutcomeSaved, event: ev.StoredEvent
    ) -> None:
        key = self.state.open_admissions.pop(body.admission_id, None)
        rollout = None if key is None else self._rollout(key[0], key[1])
        if key is None or rollout is None:
            return
        for judgment in rollout.judgments_of(key[2]):
            if judgment.admission_id == body.admission_id:
                judgment.outcome = body.outcome
                judgment.reward = body.reward
                judgment.outcome_seq = event.seq
                judgment.failure_kind = body.failure_kind


def _grade(facts: RowFacts, policy: RecoveryPolicy) -> float | None:
    # ROW-12: only a recorded grade scores 4d (infra_cut), 5a and 5d.
    if not facts_rules.has_recorded_grade(facts, policy):
        return None
    return facts.grade_record if facts.grade_record is not None else facts.reward
