"""The plan file (CLI-4, CLI-5): a released plan as JSON Lines, and its outcomes.

A collector that cannot call the Python API runs a plan file that ``resume``
writes: the rows to dispatch, each stamped with its attempt, then one
``{"rejudge": {...}}`` line per released re-judgment. It hands back its
outcome rows, which ``record_outcomes`` reserves (committed first) and
records (``ledger.record_plan_rows``) before republishing; run again after an
interruption, it records what is missing and skips what is recorded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from ledger import (
    ROLLOUT_ID,
    Clock,
    ConfigError,
    Ledger,
    LedgerError,
    Refused,
    RowError,
    RunLock,
    atomic_replace,
    check_outputs,
    derived_rollout_id,
    open_run,
    plural,
    read_plan_rows,
    record_plan_rows,
)
from ledger.events import RowRefused
from projections.decisions.plan import Plan
from projections.operations.keep import replay_kept
from projections.operations.publishing import publish
from projections.operations.resuming import Resume, resume

__all__ = [
    "RecordedOutcomes",
    "record_outcomes",
    "resume_with_plan_file",
    "write_plan_file",
]

_ENCODE = msgspec.json.Encoder(order="deterministic").encode


class RecordedOutcomes(msgspec.Struct, frozen=True):
    """How many rows a plan file's outcomes held, and the events they became."""

    rows: int
    #: Events appended, by kind (``attempt_reserved``, ``result_saved``, ...),
    #: and ``already_recorded``: rows skipped because their attempt has its outcome.
    counts: dict[str, int]
    #: The events would be appended: nothing was recorded.
    dry_run: bool = False


def write_plan_file(path: Path | str, plan: Plan) -> None:
    """``plan`` as a plan file (replaced atomically): dispatch rows, re-judgments.

    Each dispatch row carries an identity its collector copies back (issue 25):
    its materialized ``_ng_rollout_id``, else ``"<task>-<rollout>"`` (the id
    NeMo Gym 0.7.0 itself derives, so its capture keys stay the same), by
    which recording knows the rollout a row answers even when the collector
    renumbers ``_ng_rollout_index`` (as 0.7.0 does).
    """
    lines = [_ENCODE(_identified(row)) for row in plan.dispatch]
    lines += [_ENCODE({"rejudge": item}) for item in plan.rejudge]
    atomic_replace(Path(path), b"".join(line + b"\n" for line in lines))


def _identified(row: dict[str, Any]) -> dict[str, Any]:
    if ROLLOUT_ID in row:
        return row
    rollout_id = derived_rollout_id(row["_ng_task_index"], row["_ng_rollout_index"])
    return {**row, ROLLOUT_ID: rollout_id}


def resume_with_plan_file(
    ledger: Ledger,
    config: Any,
    global_config: Any,
    *,
    plan_out: Path | str | None = None,
    source: Path | str | None = None,
    extend_attempts: int = 0,
    approvals: Path | str | Iterable[tuple[int, int, int]] | None = None,
    retry_terminal_timeouts: bool | None = None,
    allow_unsafe: bool = False,
    longest_first: bool = False,
    reason: str | None = None,
    dry_run: bool = False,
    keep_rows: bool = True,
) -> Resume:
    """``resume``, then the released plan written to ``plan_out`` when given.

    ``keep_rows`` is ``resume``'s: false, the rows to dispatch are read and
    checked but not kept (a plan file needs them: it is then refused).
    """
    if plan_out is not None and not keep_rows:
        raise ConfigError("a plan file is written from the rows the plan keeps")
    if dry_run and plan_out is not None:
        raise ConfigError("a dry run releases no plan, so it writes no plan file")
    run = ledger.paths.out if ledger.folder is not None else None
    check_outputs(run, {"--plan-out": plan_out})
    found = resume(
        ledger,
        config,
        global_config,
        source=source,
        extend_attempts=extend_attempts,
        approvals=approvals,
        retry_terminal_timeouts=retry_terminal_timeouts,
        allow_unsafe=allow_unsafe,
        longest_first=longest_first,
        reason=reason,
        dry_run=dry_run,
        keep_rows=keep_rows,
    )
    if plan_out is not None:
        write_plan_file(plan_out, found.plan)
    return found


def record_outcomes(
    out: Path | str,
    rows_file: Path | str,
    *,
    clock: Clock | None = None,
    dry_run: bool = False,
) -> RecordedOutcomes:
    """Record a plan file's outcome rows in the run at ``out``, then republish.

    The rows are read before the run is opened, so a file that is not JSON
    Lines is refused without taking the lock; a row that fits no released
    attempt or re-judgment refuses the whole file (CLI-5). ``dry_run`` checks
    every row as recording would and counts the events it would append,
    recording nothing.
    """
    rows, lines = read_plan_rows(rows_file)
    if dry_run:
        return _preview(out, rows, lines, str(rows_file), clock)
    with open_run(out, write=True, clock=clock) as led:
        try:
            counts = record_plan_rows(led, rows, lines=lines, source=str(rows_file))
        except RowError as exc:
            _keep_refusal(led, Path(rows_file), exc)
            raise
        publish(led, replay_kept(led))
    return RecordedOutcomes(len(rows), counts)


def _keep_refusal(ledger: Ledger, rows_file: Path, exc: RowError) -> None:
    """The refused line as a ``row_refused`` event: every answer is in the log.

    Issue 25. ``record`` refuses the whole file (CLI-5); the row that made it
    is kept with its bytes' sha256 and the reason, once. A file that is not
    JSON Lines is refused before the run is opened, and leaves nothing: it is
    no collector's answer, and no lock is taken for it.
    """
    if exc.line is None:
        return
    try:
        raw = rows_file.read_bytes().splitlines()[exc.line - 1]
    except (OSError, IndexError):
        return
    digest = hashlib.sha256(raw).hexdigest()
    cause = exc.__cause__
    reason = str(cause if isinstance(cause, LedgerError) else exc)[:2000]
    for event in ledger.events(1, kinds=("row_refused",)):
        body = event.body
        if isinstance(body, RowRefused) and (body.line, body.row_sha256) == (
            exc.line,
            digest,
        ):
            return
    ledger.append(
        RowRefused(
            file=str(rows_file),
            line=exc.line,
            length=len(raw),
            row_sha256=digest,
            reason=reason,
        ),
        actor="collector",
    )


def _preview(
    out: Path | str,
    rows: list[Any],
    lines: list[int],
    source: str,
    clock: Clock | None,
) -> RecordedOutcomes:
    """``record --dry-run``: the rows checked under the lock, nothing committed.

    A writer's open would first record rows a killed collector left (EV-12);
    a preview refuses rather than make those repairs, and its own open skips
    them (``adopting``), so nothing is written.
    """
    with open_run(out) as reader:
        pending = reader.pending_repairs()
    if pending:
        raise Refused(
            f"{out} has {plural(len(pending), 'row or line', 'rows or lines')} "
            "that recording repairs or adopts first (see `rollout-ledger status`), "
            "so a dry run cannot show "
            "what recording would do; nothing was recorded"
        )
    with (
        RunLock(out) as lock,
        Ledger.open(out, lock=lock, clock=clock, adopting=True) as led,
    ):
        counts = record_plan_rows(led, rows, lines=lines, source=source, dry_run=True)
    return RecordedOutcomes(len(rows), counts, dry_run=True)
