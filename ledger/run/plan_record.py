"""Recording a plan file's outcomes in one transaction (CLI-4, CLI-5).

A collector that cannot call the Python API runs a plan file (``resume
--plan-out``) and hands back its outcome rows. It reserved nothing, so each row
is reserved and recorded here, together: a row of a released attempt is
reserved and recorded; a row carrying ``_ng_rejudgment: {task, rollout,
attempt}`` of a released re-judgment is admitted and saved (the judge digest is
the run's current configuration digest). Every row is checked before anything
is written, and all rows are committed at once: a row that fits neither is
refused with its line number and nothing of the file is recorded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ledger.errors import ConfigError, LedgerError, RowError
from ledger.events import (
    DriftAccepted,
    IdentityAdopted,
    IdentityOverridden,
    RunCreated,
    kind_of,
)
from ledger.files import json_problem, read_regular
from ledger.run.recorder import Recorder, Staged
from ledger.store.port import Prepared

if TYPE_CHECKING:
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
    """The operations of one file, prepared against one shared ``Staged``."""

    def __init__(self, recorder: Recorder, judge: str) -> None:
        self.recorder = recorder
        self.judge = judge
        self.staged = Staged()
        self.ops: list[Prepared] = []
        self.opened: list[str] = []

    def add(self, row: object) -> None:
        if not isinstance(row, MutableMapping):
            raise RowError("a row must be a JSON object")
        rejudgment = row.get("_ng_rejudgment")
        if isinstance(rejudgment, Mapping) and "admission_id" in rejudgment:
            self._record(row)  # admitted through the API already: its open admission
        elif rejudgment is not None:
            self._rejudge(row, _rejudgment_key(rejudgment))
        else:
            self.ops.append(self.recorder.prepare_reserve(row, self.staged))
            self._record(row)

    def _record(self, row: MutableMapping[str, Any]) -> None:
        op = self.recorder.prepare_record(row, self.staged)
        if op is not None:  # _ng_no_persist: the reservation alone is the evidence
            self.ops.append(op)

    def _rejudge(
        self, row: MutableMapping[str, Any], key: tuple[int, int, int]
    ) -> None:
        admit = self.recorder.prepare_admit(*key, self.judge, self.staged)
        admission_id = admit.event.admission_id  # type: ignore[attr-defined]
        # The admission is staged in this batch, not yet in the index, and the
        # recorder checks a judgment row against the index's open admissions:
        # register it for the batch (undone unless the commit folds it in).
        self.recorder.index.open_admissions[admission_id] = key
        self.opened.append(admission_id)
        self.ops += [
            admit,
            self.recorder.prepare_judgment_row(admission_id, row, self.staged),
        ]

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
) -> dict[str, int]:
    """Reserve and record (or admit and save) every row in one transaction (CLI-5).

    ``lines`` numbers the rows for messages (1, 2, ... when omitted); ``judge``
    defaults to the run's current configuration digest. Returns the number of
    events appended, by kind.

    Raises:
        RowError: a row fits neither a released attempt nor a released
            re-judgment (naming its line); nothing was recorded.
    """
    recorder = ledger.direct_recorder()
    batch = _Batch(recorder, judge or current_config_digest(ledger))
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
            recorder.commit(batch.ops, actor="collector")
        finally:
            batch.undo()  # after a commit, the index already closed them
    return dict(sorted(Counter(kind_of(op.event) for op in batch.ops).items()))
