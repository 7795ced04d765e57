"""Recording a plan file's outcomes, each reserved and recorded at once (CLI-4, CLI-5).

A collector that cannot call the Python API runs a plan file (``resume
--plan-out``) and hands back its outcome rows. It reserved nothing, so each row
is reserved and recorded here. A row carrying ``_ng_rollout_id`` is first
taken as the rollout that id names, whatever rollout number its collector
wrote (``ledger.collector_files.identify``; NeMo Gym 0.7.0 renumbers the rows it reads).
A row of a released attempt is reserved and
recorded; a row carrying ``_ng_rejudgment: {task, rollout, attempt}`` of a
released re-judgment is admitted and saved (the judge digest is the run's
current configuration digest). Every row is checked before anything is
written: a row that fits neither is refused with its line number and nothing
of the file is recorded.

The rows are written first, then every reservation and row event commits in
one transaction (EV-12, CLI-5). A ``record`` killed before that commit (or
whose commit failed on a full disk) leaves rows of released attempts that
nobody reserved; the next writer's open reserves and records them once (actor
``repair``), and a kill before the rows leaves nothing, so the next resume
releases the same attempts again. Admissions commit before their judgment
rows, as a judge is admitted before its call (REC-30). Running ``record``
again with the same file records each row whose attempt is reserved without an
outcome (or admitted without a judgment), and skips each row whose attempt
already holds one, so nothing is recorded twice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ledger.collector_files.identify import identify_row
from ledger.errors import ConfigError, LedgerError, RowError
from ledger.events import (
    DriftAccepted,
    FailureSaved,
    IdentityAdopted,
    IdentityOverridden,
    OmissionSaved,
    ResultSaved,
    RunCreated,
    kind_of,
)
from ledger.files import json_problem, read_regular
from ledger.rows.stages import stage_of
from ledger.run.recorder import Recorder, Staged
from ledger.run.write_index import Attempt
from ledger.store.prepared import Prepared, locate

if TYPE_CHECKING:
    from ledger.rows.facts import RowFacts
    from ledger.run.ledger import Ledger

__all__ = ["current_config_digest", "read_plan_rows", "record_plan_rows"]

#: Plan outcome files are read as data with a size limit (quality.md, "Security").
MAX_PLAN_ROWS_BYTES = 4 * 1024 * 1024 * 1024
_IDENTITY_KINDS = (
    "run_created",
    "drift_accepted",
    "identity_adopted",
    "identity_overridden",
)
_OUTCOME_KINDS = ("result_saved", "failure_saved", "omission_saved")
_DECODER = msgspec.json.Decoder()


def read_plan_rows(path: Path | str) -> tuple[list[Any], list[int]]:
    """The rows of a JSON Lines file and their line numbers (blank lines skipped)."""
    target = Path(path)
    try:
        if target.stat().st_size > MAX_PLAN_ROWS_BYTES:
            raise ConfigError(f"{target} is over the row file limit", path=target)
        lines = read_regular(target, given=True).splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read {target}: {exc.strerror}", path=target) from exc
    rows, numbers = [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(_DECODER.decode(line))
        except (msgspec.DecodeError, RecursionError) as exc:
            raise RowError(
                f"line {number} of {target} is not JSON ({json_problem(exc)}); "
                "nothing of the "
                "file was recorded",
                path=target,
                line=number,
            ) from exc
        numbers.append(number)
    return rows, numbers


def current_config_digest(ledger: Ledger) -> str:
    """The run's configuration digest in force: the latest identity event's."""
    digest = ""
    for event in ledger.events(1, kinds=_IDENTITY_KINDS):
        body = event.body
        if isinstance(body, RunCreated):
            digest = body.config_digest
        elif isinstance(body, DriftAccepted | IdentityAdopted | IdentityOverridden):
            digest = body.to_digest
    return digest


def _rejudgment_key(value: object) -> tuple[int, int, int]:
    if not isinstance(value, Mapping):
        raise RowError("_ng_rejudgment must be a mapping", key="_ng_rejudgment")
    key = tuple(value.get(name) for name in ("task", "rollout", "attempt"))
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in key):
        raise RowError(
            "_ng_rejudgment must name integer task, rollout and attempt",
            key="_ng_rejudgment",
        )
    return key  # type: ignore[return-value]


class _Batch:
    """The operations of one file, prepared against one shared ``Staged``.

    ``claims`` (reservations and admissions) carry no row and are committed
    first; ``records`` (rows and their events) after them.
    """

    def __init__(self, ledger: Ledger, recorder: Recorder, judge: str) -> None:
        self.ledger = ledger
        self.recorder = recorder
        self.judge = judge
        self.staged = Staged()
        self.claims: list[Prepared] = []
        self.records: list[Prepared] = []
        self.opened: list[str] = []
        self.completed: set[Attempt] = set()
        self.skipped = 0
        self._decided: set[Attempt] | None = None
        self.stage_rows: set[tuple[int, int, int, int]] = set()  # ROW-64
        self._stages: set[tuple[int, int, int, int]] | None = None

    def add(self, row: object) -> None:
        if not isinstance(row, MutableMapping):
            raise RowError("a row must be a JSON object")
        rejudgment = row.get("_ng_rejudgment")
        if isinstance(rejudgment, Mapping) and "admission_id" in rejudgment:
            self._record(row)  # admitted through the API already: its open admission
        elif rejudgment is not None:
            self._rejudge(row, _rejudgment_key(rejudgment))
        else:
            identify_row(self.recorder.index, row)  # issue 25: its id first
            self._outcome(row)

    def _outcome(self, row: MutableMapping[str, Any]) -> None:
        attempt = self.recorder.attempt_named(row)
        stage = stage_of(row) if "stage_index" in row else None
        reserved = attempt in self.recorder.index.reserved
        if isinstance(stage, tuple):
            if reserved or attempt in self.staged.reserved:
                self._stage_row(row, attempt, stage[0])  # ROW-64: its next stage
                return
            self.stage_rows.add((*attempt, stage[0]))
        if attempt in self.staged.reserved or not reserved:
            self.claims.append(self.recorder.prepare_reserve(row, self.staged))
            self._record(row)
            return
        # Reserved before this file: by an earlier `record` of this file (or a
        # writer's open that recorded its rows), or by a collector through the
        # API: recorded already, or waiting for this row.
        if attempt in self._outcomes():
            self.skipped += 1  # recorded already: never twice
            return
        if attempt in self.completed:
            raise ConfigError(
                f"attempt {attempt[2]} of task {attempt[0]}, rollout {attempt[1]} "
                "is named by an earlier row of this file; an attempt has one outcome"
            )
        self.completed.add(attempt)
        row["_ng_attempt_index"] = attempt[2]
        row["_ng_run_id"] = self.recorder.index.run_id
        self._record(row)

    def _stage_row(
        self, row: MutableMapping[str, Any], attempt: Attempt, stage: int
    ) -> None:
        """ROW-64: a stage of an attempt reserved already, recorded once."""
        key = (*attempt, stage)
        if key in self._stages_recorded():
            self.skipped += 1  # recorded already: never twice
            return
        if key in self.stage_rows:
            raise ConfigError(
                f"stage {stage} of attempt {attempt[2]} of task {attempt[0]}, "
                f"rollout {attempt[1]} is named by an earlier row of this file; "
                "a stage has one row"
            )
        self.stage_rows.add(key)
        row["_ng_attempt_index"] = attempt[2]
        row["_ng_run_id"] = self.recorder.index.run_id
        self._record(row)

    def _stages_recorded(self) -> set[tuple[int, int, int, int]]:
        """ROW-64: ``(task, rollout, attempt, stage)`` of each stage row in the log."""
        if self._stages is None:
            self._stages = {
                (body.task, body.rollout, body.attempt, body.stage_index)
                for event in self.ledger.events(1, kinds=_OUTCOME_KINDS)
                if isinstance(body := event.body, ResultSaved | FailureSaved)
                and body.stage_index is not None
            }
        return self._stages

    def _outcomes(self) -> set[Attempt]:
        """The attempts whose outcome the log holds (read once, when first needed)."""
        if self._decided is None:
            self._decided = {
                (body.task, body.rollout, body.attempt)
                for event in self.ledger.events(1, kinds=_OUTCOME_KINDS)
                if isinstance(
                    body := event.body, ResultSaved | FailureSaved | OmissionSaved
                )
            }
        return self._decided

    def _record(self, row: MutableMapping[str, Any]) -> None:
        op = self.recorder.prepare_record(row, self.staged)
        if op is not None:  # _ng_no_persist: the reservation alone is the evidence
            self.records.append(op)

    def _rejudge(
        self, row: MutableMapping[str, Any], key: tuple[int, int, int]
    ) -> None:
        index = self.recorder.index
        if key in index.admitted_since_release and key not in self.staged.admitted:
            # Admitted before this file (a `record` that stopped after its
            # admissions): the open admission takes the row; once its
            # judgment is saved, the row is recorded already.
            waiting = [
                admission
                for admission, attempt in index.open_admissions.items()
                if attempt == key and admission not in self.opened
            ]
            if not waiting:
                self.skipped += 1
                return
            self.records.append(
                self.recorder.prepare_judgment_row(waiting[-1], row, self.staged)
            )
            return
        admit = self.recorder.prepare_admit(*key, self.judge, self.staged)
        admission_id = admit.event.admission_id  # type: ignore[attr-defined]
        # The admission is staged in this batch, not yet in the index, and the
        # recorder checks a judgment row against the index's open admissions:
        # register it for the batch (undone unless the commit folds it in).
        index.open_admissions[admission_id] = key
        self.opened.append(admission_id)
        self.claims.append(admit)
        self.records.append(
            self.recorder.prepare_judgment_row(admission_id, row, self.staged)
        )

    def commit(self) -> None:
        """Admissions first, then each reservation with its row in one transaction.

        CLI-5: a row is reserved and recorded in one transaction, after the
        rows are written (EV-12); a kill between leaves rows of released,
        unreserved attempts, which the next writer's open reserves and
        records once. An admission commits before the judgment rows, as
        REC-30 admits before the judge call.
        """
        admissions = [op for op in self.claims if kind_of(op.event) == "judge_admitted"]
        reservations = [
            op for op in self.claims if kind_of(op.event) != "judge_admitted"
        ]
        if admissions:
            self.recorder.commit(admissions, actor="collector")
        self.opened.clear()  # committed: the index holds these admissions now
        self.recorder.commit(reservations + self.records, actor="collector")

    def undo(self) -> None:
        for admission_id in self.opened:
            self.recorder.index.open_admissions.pop(admission_id, None)


def record_plan_rows(
    ledger: Ledger,
    rows: Iterable[Any],
    *,
    lines: Sequence[int] | None = None,
    source: str = "the rows",
    judge: str | None = None,
    dry_run: bool = False,
    failures: list[RowFacts] | None = None,
) -> dict[str, int]:
    """Reserve (or admit) every row's attempt, then record the rows (CLI-5).

    ``dry_run``: every row is checked and its events prepared as a recording
    would, and nothing is committed (no row written, no event appended).

    The reservations and admissions commit in one transaction before any row
    is written, the rows and their events in the next (see the module
    docstring). ``lines`` numbers the rows for messages (1, 2, ... when
    omitted); ``judge`` defaults to the run's current configuration digest.
    Returns the number of events appended, by kind, and under
    ``"already_recorded"`` (when any) the rows skipped because their attempt
    already holds its outcome. ``failures``, when given, gets the facts of
    every failure row recorded (``run``'s progress counts them by side).

    Raises:
        RowError: a row fits neither a released attempt nor a released
            re-judgment (naming its line); nothing was recorded.
    """
    recorder = ledger.direct_recorder()
    batch = _Batch(ledger, recorder, judge or current_config_digest(ledger))
    with recorder.lock:
        try:
            for index, row in enumerate(rows):
                number = lines[index] if lines is not None else index + 1
                try:
                    batch.add(row)
                except LedgerError as exc:
                    raise RowError(
                        f"line {number} of {source}: {exc}; nothing of the file was "
                        "recorded",
                        line=number,
                    ) from exc
            if not dry_run:
                batch.commit()
        finally:
            batch.undo()  # after a commit, the index already closed them
    ops = batch.claims + batch.records
    if dry_run:  # rows placed in memory at their files' ends: their events' kinds
        ends = {f: [e.offset, e.lines] for f, e in recorder.index.ends.items()}
        locate(ops, ends)
    counts = Counter(kind_of(op.event) for op in ops)
    if failures is not None and not dry_run:
        failures += [
            op.event.facts for op in batch.records if isinstance(op.event, FailureSaved)
        ]
    if batch.skipped:
        counts["already_recorded"] = batch.skipped
    return dict(sorted(counts.items()))
