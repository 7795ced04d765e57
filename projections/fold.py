"""The fold's step: how each stored event changes a :class:`RunState` (REC-1..REC-16).

``FoldStep`` holds one replay's policy, caches and state, and folds events one at
a time, either decoded (``StoredEvent``) or on the fast path (P-3: a row's
``(seq, kind, body)``, an outcome's facts decoded and classified once per
distinct bytes). ``projections.replay`` drives it: what to read, from where
(a snapshot, seq 1), and under which policy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from sys import intern
from typing import Any, Union

import msgspec

from ledger import events as ev
from ledger import facts_rules
from ledger.errors import UnknownEvent
from ledger.policy.model import RecoveryPolicy
from ledger.rows.facts import RowFacts
from ledger.store.decode import decode_row
from ledger.store.sqlite import EventRow
from projections.classify import CODES, OMISSION, classify
from projections.state import (
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

__all__ = ["FAST_DECODER", "FoldRow", "FoldStep", "Outcome"]

# Rows of one run repeat the same facts often; a small cache per fold keeps the
# hits without keeping many decoded facts alive (P-3). It is emptied when full.
_CLASSIFIED_CACHE = 4096
_MANIFEST_SKIP = {"identity", "policy", "index"}
_FLAG_MASK = (1 << CODE_SHIFT) - 1

#: What the fold keeps of an outcome's facts: its branch code and grade (under
#: the fold's policy), reward, selected kind (interned), masked, wallclock.
Outcome = tuple[int, float | None, float | None, str | None, bool, float | None]
#: A stored row as the fast path reads it: seq, kind, body bytes.
FoldRow = tuple[int, str, bytes]
#: The kinds whose fold step reads the event's ``at`` (read apart, when met).
_NEEDS_AT = frozenset({"drift_accepted", "failure_budget_reset"})


class _ResultRow(msgspec.Struct, tag_field="kind", tag="result_saved", kw_only=True):
    """``result_saved`` as the fast path decodes it: the facts left as bytes."""

    task: ev.NonNegative
    rollout: ev.NonNegative
    attempt: ev.NonNegative
    location: ev.Location
    facts: msgspec.Raw


class _FailureRow(msgspec.Struct, tag_field="kind", tag="failure_saved", kw_only=True):
    """``failure_saved`` as the fast path decodes it: the facts left as bytes."""

    task: ev.NonNegative
    rollout: ev.NonNegative
    attempt: ev.NonNegative
    location: ev.Location
    sidecar_line: ev.NonNegative
    facts: msgspec.Raw


_FAST_TYPES: tuple[type, ...] = tuple(
    {ev.ResultSaved: _ResultRow, ev.FailureSaved: _FailureRow}.get(t, t)
    for t in ev.EVENT_TYPES
)
FAST_DECODER: msgspec.json.Decoder[Any] = msgspec.json.Decoder(
    Union[_FAST_TYPES]  # noqa: UP007  (a union of a runtime tuple of types)
)
_FACTS_DECODER = msgspec.json.Decoder(RowFacts)
_FAST_TYPE_OF_KIND: dict[str, type] = {
    t.__struct_config__.tag: t  # type: ignore[attr-defined]
    for t in _FAST_TYPES
}
# How the fast path folds each kind.
_PLAIN, _WITH_AT, _RESERVED, _SAVED = range(4)
_MODE_OF_KIND: dict[str, int] = {
    kind: _WITH_AT if kind in _NEEDS_AT else _PLAIN for kind in _FAST_TYPE_OF_KIND
} | {"attempt_reserved": _RESERVED, "result_saved": _SAVED, "failure_saved": _SAVED}


def _checked_body(seq: int, kind: str, data: bytes, path: Any) -> Any:
    # The full decoder's verdict, and its error, for a body the fast path
    # could not take (decode_row raises what Ledger.events raises).
    return decode_row(EventRow(seq, kind, "", "", data, b"", b""), path=path).body


class FoldStep:
    """One fold step per kind; each handler is small and touches only the state."""

    def __init__(self, state: RunState, policy: RecoveryPolicy) -> None:
        self.state = state
        self.policy = policy
        self._outcomes: dict[Any, Outcome] = {}  # facts (or their bytes) -> Outcome
        self._handlers: dict[str, Callable[[Any, int, str], None]] = {
            kind: getattr(self, f"_{kind}")
            for kind in ev.KINDS
            if hasattr(self, f"_{kind}")
        }

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

    def _outcome_of(self, facts: RowFacts) -> Outcome:
        found = self._outcomes.get(facts)
        if found is None:
            if len(self._outcomes) >= _CLASSIFIED_CACHE:
                self._outcomes.clear()
            found = self._outcomes[facts] = self._classify(facts)
        return found

    def apply(self, event: ev.StoredEvent) -> None:
        """Fold one event and move the state's head to it."""
        self.fold(event)
        self.at(event.seq, event.hash)

    def fold(self, event: ev.StoredEvent) -> None:
        """Fold one event; the head moves with ``at``."""
        handler = self._handlers.get(event.kind)
        if handler is not None:
            handler(event.body, event.seq, event.at)

    def fold_rows(
        self, rows: Iterator[FoldRow], path: Any, row_at: Callable[[int], EventRow]
    ) -> int | None:
        """Fold stored rows, decoding each as ``Ledger.events`` would; the last seq.

        ``row_at(seq)`` reads one stored row, for the few kinds that fold ``at``.
        """
        handlers, decode = self._handlers, FAST_DECODER.decode
        outcomes, rollouts = self._outcomes, self.state.rollouts
        last = None
        for seq, kind, data in rows:
            expected = _FAST_TYPE_OF_KIND.get(kind)
            if expected is None:
                raise UnknownEvent(seq=seq, kind=kind, path=path)
            try:
                body = decode(data)
            except msgspec.DecodeError:
                body = _checked_body(seq, kind, data, path)
            if type(body) is not expected:
                body = _checked_body(seq, kind, data, path)
            last = seq
            mode = _MODE_OF_KIND[kind]
            if mode == _RESERVED:  # _attempt_reserved, inlined: half of a log
                by_rollout = rollouts.get(body.task)
                rollout = None if by_rollout is None else by_rollout.get(body.rollout)
                if rollout is not None:
                    record = rollout.add_attempt(body.attempt)
                    bits = record.bits
                    if not bits & RESERVED:
                        record.bits = bits | RESERVED
                        record.seq = record.seq or seq  # an outcome's seq stays
            elif mode == _SAVED and type(body.facts) is msgspec.Raw:
                key = bytes(body.facts)
                outcome = outcomes.get(key)
                if outcome is None:
                    outcome = self._raw_outcome(key, seq, kind, data, path)
                self._saved(body, seq, outcome)
            else:
                handler = handlers.get(kind)
                if handler is not None:
                    handler(body, seq, row_at(seq).at if mode == _WITH_AT else "")
        return last

    def _raw_outcome(
        self, key: bytes, seq: int, kind: str, data: bytes, path: Any
    ) -> Outcome:
        try:
            facts = _FACTS_DECODER.decode(key)
        except msgspec.DecodeError:
            facts = _checked_body(seq, kind, data, path).facts
        if len(self._outcomes) >= _CLASSIFIED_CACHE:
            self._outcomes.clear()
        outcome = self._outcomes[key] = self._classify(facts)
        return outcome

    def at(self, seq: int, head_hash: bytes) -> None:
        """The state is as of the event ``seq`` whose hash is ``head_hash``."""
        self.state.as_of_seq = seq
        self.state.head_hash = head_hash.hex()

    # -- run and manifest ----------------------------------------------------

    def _run_created(self, body: ev.RunCreated, seq: int, at: str) -> None:
        state = self.state
        state.run_id = body.run_id
        state.manifest = {
            name: getattr(body, name)
            for name in body.__struct_fields__
            if name not in _MANIFEST_SKIP
        }
        state.identity = body.identity
        state.max_rollout_attempts = body.max_rollout_attempts
        lengths: dict[int, int] = {}  # rows repeat lengths: one int object each
        for line, (task, rollout, offset, length, agent, rollout_id) in enumerate(
            body.index, start=1
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
        self.state.extension = body.total  # REC-11: the latest total is in force

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

    def _outcome(
        self, body: ev.ResultSaved | ev.FailureSaved, seq: int, at: str
    ) -> None:
        self._saved(body, seq, self._outcome_of(body.facts))

    _result_saved = _outcome
    _failure_saved = _outcome

    def _saved(self, body: Any, seq: int, outcome: Outcome) -> None:
        """Record an outcome event's classified facts on its attempt."""
        by_rollout = self.state.rollouts.get(body.task)
        rollout = None if by_rollout is None else by_rollout.get(body.rollout)
        if rollout is None:
            return  # ID-40: rows of other keys never reach the log
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
