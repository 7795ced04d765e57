"""The recorder: reserve attempts, write rows, then append their events (EV-12, REC-3).

Every write goes through two steps. ``prepare_*`` checks one operation against
the write index (plus what the same batch already staged) and builds its event,
or its row's bytes and how to make its event once the row is located, without
touching anything. ``commit`` then hands the batch to the run's one write path
(:class:`ledger.run.writer.Writer` and the home's sink): rows located where
their files really end, made durable no later than their events, and every
event appended in one transaction.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.bounds import MAX_ATTEMPT_INDEX, MAX_INDEX, out_of_bounds
from ledger.clock import Clock
from ledger.errors import ConfigError, IdentityMismatch, RowError
from ledger.events import (
    AttemptReserved,
    Event,
    FailureSaved,
    JudgeAdmitted,
    JudgeOutcomeSaved,
    Location,
    OmissionSaved,
    ResultSaved,
    StoredEvent,
)
from ledger.jsonl import encode_row
from ledger.rows.all_facts import row_facts
from ledger.rows.kinds import omission_reason, row_route, selected_failure_kind
from ledger.rows.stages import reserved_stage, stage_fields
from ledger.rows.values import brief, is_mapping
from ledger.run.write_index import Attempt, WriteIndex
from ledger.run.writer import Writer
from ledger.store.port import RunNames
from ledger.store.prepared import MakeEvent, Prepared

__all__ = ["Prepared", "Recorder", "Staged"]


@dataclass
class Staged:
    """What earlier operations of the same batch already claimed."""

    reserved: set[Attempt] = field(default_factory=set)
    reserved_stages: set[tuple[int, int, int, int]] = field(default_factory=set)
    admitted: set[Attempt] = field(default_factory=set)
    closed: set[str] = field(default_factory=set)


def _int(row: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = row.get(key, default)
    high = MAX_ATTEMPT_INDEX if key == "_ng_attempt_index" else MAX_INDEX
    if type(value) is int and 0 <= value <= high:  # the common case first (P-7)
        return value
    if out_of_bounds(value, 0, high):
        raise RowError(
            f"the row's {key} must be an integer from 0 to {high} "
            f"(found {brief(value)})",
            key=key,
        )
    return value  # type: ignore[no-any-return]  # an int subclass in bounds


def _encode(row: Mapping[str, Any]) -> bytes:
    try:
        return encode_row(row)
    except (TypeError, ValueError) as exc:
        raise RowError(f"the row cannot be written as JSON: {exc}") from exc


def _mutable(row: object) -> MutableMapping[str, Any]:
    if type(row) is dict:  # a row is a dict: no ABC check (P-7)
        return row
    if not isinstance(row, MutableMapping):
        raise RowError(
            f"a row must be a JSON object (a dict), not {type(row).__name__}"
        )
    return row


class Recorder:
    """The writer's side of one run: checks each operation, then commits a batch."""

    def __init__(self, writer: Writer, names: RunNames, clock: Clock) -> None:
        self._writer = writer
        self._keeper = writer.keeper
        self._clock = clock
        #: Held around prepare-and-commit, so a batch sees a stable index.
        self.lock = threading.RLock()
        self.out_name = names.out
        self.sidecar_name = names.sidecar

    @property
    def index(self) -> WriteIndex:
        """The write index, with every appended body folded in."""
        return self._keeper.index

    def catch_up_now(self) -> bool:
        """Fold what other writers appended, now; whether anyone else appends."""
        return self._keeper.catch_up()

    # -- checks shared by the operations -----------------------------------

    def _key(self, row: Mapping[str, Any]) -> tuple[int, int]:
        key = (_int(row, "_ng_task_index"), _int(row, "_ng_rollout_index"))
        if key not in self.index.keys:
            # ID-40: a row whose key is not materialized does not belong here.
            raise IdentityMismatch(
                f"task {key[0]}, rollout {key[1]} is not among this run's "
                "materialized rows",
                keys=("_ng_task_index", "_ng_rollout_index"),
            )
        return key

    def _check_run_id(self, row: Mapping[str, Any]) -> None:
        run_id = row.get("_ng_run_id")
        if run_id is not None and run_id != self.index.run_id:
            raise IdentityMismatch(  # ID-40
                f"the row's _ng_run_id {run_id!r} is not this run's "
                f"{self.index.run_id!r}",
                keys=("_ng_run_id",),
            )

    # -- prepare -----------------------------------------------------------

    def prepare_reserve(self, row: object, staged: Staged) -> Prepared:
        """REC-3: a released attempt, reserved once, stamped on the row."""
        target = _mutable(row)
        self._check_run_id(target)
        task, rollout = self._key(target)
        attempt = self._attempt_of(target, task, rollout)
        index = self.index  # once: a property (P-7)
        if attempt not in index.released and self.catch_up_now():
            index = self.index
            attempt = self._attempt_of(target, task, rollout)
        if attempt not in index.released:
            raise ConfigError(
                f"attempt {attempt[2]} of task {task}, rollout {rollout} is not "
                "released: run `rollout-ledger resume` (or replan) for the current plan"
            )
        stage = reserved_stage(target) if "stage_index" in target else None
        if stage is not None:  # ROW-64: an unfinished attempt goes on at a stage
            self._check_stage(attempt, stage, staged)
        elif attempt in index.reserved or attempt in staged.reserved:
            raise ConfigError(
                f"attempt {attempt[2]} of task {task}, rollout {rollout} is already "
                "reserved; an attempt is reserved once"
            )
        staged.reserved.add(attempt)
        run_id = index.run_id
        target["_ng_attempt_index"] = attempt[2]
        target["_ng_run_id"] = run_id
        body = AttemptReserved(
            task=task,
            rollout=rollout,
            attempt=attempt[2],
            run_id=run_id,
            stage_index=stage,
        )
        return Prepared(body, result=attempt[2])

    def _check_stage(self, attempt: Attempt, stage: int, staged: Staged) -> None:
        # ROW-64: each later stage of an attempt is reserved once.
        if (*attempt, stage) in self.index.reserved_stages or (
            (*attempt, stage) in staged.reserved_stages
        ):
            raise ConfigError(
                f"stage {stage} of attempt {attempt[2]} of task {attempt[0]}, "
                f"rollout {attempt[1]} is already reserved; a stage is reserved once"
            )
        staged.reserved_stages.add((*attempt, stage))

    def attempt_named(self, row: object) -> Attempt:
        """The attempt a row names (by default its key's released attempt)."""
        target = _mutable(row)
        self._check_run_id(target)
        task, rollout = self._key(target)
        return self._attempt_of(target, task, rollout)

    def _attempt_of(self, row: Mapping[str, Any], task: int, rollout: int) -> Attempt:
        default = self.index.released_by_key.get((task, rollout), 0)
        return (task, rollout, _int(row, "_ng_attempt_index", default))

    def prepare_record(
        self, row: object, staged: Staged, *, raw: bytes | None = None
    ) -> Prepared | None:
        """Routing of rows.md: nothing, the sidecar, or ``OUT``; then its event.

        ``raw`` is the row's bytes as already written (EV-12 repair): they are
        located and hashed as they are, and written nowhere again.
        """
        source = _mutable(row)
        route = row_route(source)
        if route == "nowhere":
            return None  # _ng_no_persist: the reservation alone is the evidence
        rejudgment = source.get("_ng_rejudgment")
        if is_mapping(rejudgment) and "admission_id" in rejudgment:
            admission = str(rejudgment["admission_id"])
            return self.prepare_judgment_row(admission, source, staged, raw=raw)
        if raw is not None and source.get("_ng_run_id") != self.index.run_id:
            raise IdentityMismatch(  # EV-12: repair records only this run's attempts
                f"its _ng_run_id {source.get('_ng_run_id')!r} is not this run's",
                keys=("_ng_run_id",),
            )
        self._check_run_id(source)
        task, rollout = self._key(source)
        attempt = _int(source, "_ng_attempt_index", 0)
        reserved = (task, rollout, attempt)
        if (
            reserved not in self.index.reserved
            and reserved not in staged.reserved
            and not (self.catch_up_now() and reserved in self.index.reserved)
        ):
            raise ConfigError(
                f"attempt {attempt} of task {task}, rollout {rollout} was not reserved "
                "in this run; reserve each attempt before sending its request"
            )
        data = _encode(source) if raw is None else raw
        file = self.out_name if route == "result" else self.sidecar_name
        key = {"task": task, "rollout": rollout, "attempt": attempt}
        make: MakeEvent
        if route == "result":
            facts = row_facts(source)
            stage = stage_fields(source)  # ROW-64: {} for a plain row

            def make(location: Location, line: int) -> Event:
                return ResultSaved(**key, location=location, facts=facts, **stage)
        elif route == "omission":
            # ID-13: redacted before it is cut, so no prefix of a secret is kept.
            reason = omission_reason(source)

            def make(location: Location, line: int) -> Event:
                return OmissionSaved(
                    **key, location=location, sidecar_line=line, reason=reason
                )
        else:
            facts = row_facts(source)
            stage = stage_fields(source)

            def make(location: Location, line: int) -> Event:
                return FailureSaved(
                    **key, location=location, sidecar_line=line, facts=facts, **stage
                )

        return Prepared(file=file, data=data, make=make)

    def prepare_admit(
        self, task: int, rollout: int, attempt: int, judge: str, staged: Staged
    ) -> Prepared:
        """REC-30: admit a released re-judgment, once, before the judge call."""
        key = (task, rollout, attempt)
        if key not in self.index.released_rejudge and not (
            self.catch_up_now() and key in self.index.released_rejudge
        ):
            raise ConfigError(
                f"attempt {attempt} of task {task}, rollout {rollout} is not released "
                "for re-judgment: run `rollout-ledger resume` for the current plan"
            )
        if key in self.index.admitted_since_release or key in staged.admitted:
            raise ConfigError(
                f"the re-judgment of attempt {attempt} of task {task}, rollout "
                f"{rollout} is already admitted"
            )
        staged.admitted.add(key)
        body = JudgeAdmitted(
            admission_id=self._clock.new_id(),
            task=task,
            rollout=rollout,
            attempt=attempt,
            judge=judge,
        )
        return Prepared(body)

    def prepare_judgment_row(
        self,
        admission_id: str,
        row: MutableMapping[str, Any],
        staged: Staged,
        *,
        raw: bytes | None = None,
    ) -> Prepared:
        """REC-30: the re-judgment's row, graded to ``OUT`` or failed to the sidecar."""
        if admission_id in staged.closed or (
            admission_id not in self.index.open_admissions
            and not (self.catch_up_now() and admission_id in self.index.open_admissions)
        ):
            raise ConfigError(
                f"judge admission {admission_id!r} is not open in this run; admit the "
                "re-judgment before calling the judge"
            )
        staged.closed.add(admission_id)
        row["_ng_rejudgment"] = {"admission_id": admission_id}
        graded = row_route(row) == "result" and _grade(row) is not None
        data = _encode(row) if raw is None else raw
        file = self.out_name if graded else self.sidecar_name
        reward = _grade(row) if graded else None
        failure_kind = None if graded else _failed_kind(row)

        def make(location: Location, line: int) -> Event:
            return JudgeOutcomeSaved(
                admission_id=admission_id,
                outcome="graded" if graded else "failed",
                reward=reward,
                failure_kind=failure_kind,
                location=location,
                sidecar_line=None if graded else line,
            )

        return Prepared(file=file, data=data, make=make)

    # -- commit ------------------------------------------------------------

    def commit(
        self, ops: Sequence[Prepared], *, actor: str, written: bool = False
    ) -> list[StoredEvent]:
        """Write the rows in order, make them durable, then append every event.

        ``written`` says the rows are in their files already (EV-12 repair).
        """
        return self._writer.commit(ops, actor=actor, written=written)


def _grade(row: Mapping[str, Any]) -> float | None:
    reward = row.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        return None
    if (
        row.get("mask_sample") is True
        or reward != reward
        or abs(reward) == float("inf")
    ):
        return None
    return float(reward)


def _failed_kind(row: Mapping[str, Any]) -> str | None:
    kind = selected_failure_kind(row)
    if kind is None and isinstance(row.get("failure_kind"), str):
        return str(row["failure_kind"])
    return kind
