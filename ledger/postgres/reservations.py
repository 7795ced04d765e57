"""SC-3 on PostgreSQL: a reservation names a released attempt, once.

The check runs inside the appending transaction, after the run's head row is
locked, so every append that committed before is visible to it and none can
commit while it runs: two workers on two nodes can never reserve the same
attempt, and no worker can reserve what the plan did not release. It mirrors
the single-writer check of ``Recorder.prepare_reserve`` (REC-3), messages
included: a release holds until the next ``resume_started``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import psycopg

from ledger.errors import AlreadyReserved, ConfigError, Refused
from ledger.events import AttemptReserved, AttemptsReleased
from ledger.postgres.schema import SCHEMA
from ledger.store.port import EventRow

__all__ = ["AttemptChanges", "apply_attempt_changes", "attempt_changes"]

Attempt = tuple[int, int, int]
Stage = tuple[int, int, int, int]  # task, rollout, attempt, stage

_RELEASED = msgspec.json.Decoder(AttemptsReleased)
_RESERVED = msgspec.json.Decoder(AttemptReserved)


@dataclass
class AttemptChanges:
    """What a batch of events releases and reserves, and the epoch after it."""

    epoch: int
    releases: dict[Attempt, int] = field(default_factory=dict)  # -> released seq
    reserved: dict[Attempt, int] = field(default_factory=dict)  # -> seq
    # Reservations the batch itself does not release: checked against the table,
    # each with the epoch in force when it was appended.
    unreleased: dict[Attempt, int] = field(default_factory=dict)
    # ROW-64: later stages of multistage attempts reserved (a continuation).
    stages: dict[Stage, int] = field(default_factory=dict)  # -> seq


def attempt_changes(
    rows: Sequence[EventRow], *, epoch: int, where: str
) -> AttemptChanges:
    """Walk a batch in seq order: releases, reservations and epoch changes."""
    changes = AttemptChanges(epoch=epoch)
    for row in rows:
        if row.kind == "resume_started":
            changes.epoch = row.seq  # REC-3: a release holds until the next resume
        elif row.kind == "attempts_released":
            body = _decode(_RELEASED, row, where)
            changes.releases.update(dict.fromkeys(body.dispatch, row.seq))
        elif row.kind == "attempt_reserved":
            _reserve(changes, _decode(_RESERVED, row, where), row.seq, where)
    return changes


def _reserve(
    changes: AttemptChanges, body: AttemptReserved, seq: int, where: str
) -> None:
    attempt = (body.task, body.rollout, body.attempt)
    if body.stage_index is not None:  # ROW-64: the attempt goes on at a stage
        stage = (*attempt, body.stage_index)
        if stage in changes.stages:
            raise _stage_reserved(stage, where)
        changes.stages[stage] = seq
    elif attempt in changes.reserved:
        raise _already_reserved(attempt, where)
    else:
        changes.reserved[attempt] = seq
    released = changes.releases.get(attempt)
    if released is None:
        changes.unreleased[attempt] = changes.epoch
    elif released <= changes.epoch:
        raise _not_released(attempt, where)


def apply_attempt_changes(
    cur: psycopg.Cursor[Any], run: str, changes: AttemptChanges, *, where: str
) -> None:
    """Check the batch's reservations against the tables, then record it all."""
    if changes.unreleased:
        released = _select(cur, "releases", "released_seq", run, changes.unreleased)
        for attempt, epoch in changes.unreleased.items():
            if released.get(attempt, 0) <= epoch:
                raise _not_released(attempt, where)
    if changes.reserved:
        taken = _select(cur, "reservations", "seq", run, changes.reserved)
        if taken:
            raise _already_reserved(min(taken), where)
        _insert(cur, "reservations", "seq", run, changes.reserved, conflict="")
    if changes.stages:
        _reserve_stages(cur, run, changes.stages, where)
    if changes.releases:
        # A release again of the same attempt moves its seq into the new epoch.
        _insert(
            cur,
            "releases",
            "released_seq",
            run,
            changes.releases,
            conflict=" ON CONFLICT (run, task, rollout, attempt) "
            "DO UPDATE SET released_seq = excluded.released_seq",
        )


def _select(
    cur: psycopg.Cursor[Any],
    table: str,
    column: str,
    run: str,
    attempts: dict[Attempt, int],
) -> dict[Attempt, int]:
    keys = list(attempts)
    cur.execute(
        f"SELECT t.task, t.rollout, t.attempt, t.{column} FROM {SCHEMA}.{table} t "
        "JOIN unnest(%s::bigint[], %s::bigint[], %s::bigint[]) "
        "AS k(task, rollout, attempt) USING (task, rollout, attempt) "
        "WHERE t.run = %s",
        ([k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys], run),
    )
    return {(row[0], row[1], row[2]): row[3] for row in cur.fetchall()}


def _insert(
    cur: psycopg.Cursor[Any],
    table: str,
    column: str,
    run: str,
    attempts: dict[Attempt, int],
    *,
    conflict: str,
) -> None:
    # One statement for the whole batch, however many attempts a plan releases.
    keys = list(attempts)
    cur.execute(
        f"INSERT INTO {SCHEMA}.{table} (run, task, rollout, attempt, {column}) "
        "SELECT %s, k.task, k.rollout, k.attempt, k.value "
        "FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[]) "
        "AS k(task, rollout, attempt, value)" + conflict,
        (
            run,
            [k[0] for k in keys],
            [k[1] for k in keys],
            [k[2] for k in keys],
            list(attempts.values()),
        ),
    )


def _reserve_stages(
    cur: psycopg.Cursor[Any], run: str, stages: dict[Stage, int], where: str
) -> None:
    # ROW-64: each later stage of an attempt is reserved once, across workers.
    keys = list(stages)
    columns = [[k[i] for k in keys] for i in range(4)]
    cur.execute(
        f"SELECT t.task, t.rollout, t.attempt, t.stage "
        f"FROM {SCHEMA}.stage_reservations t "
        "JOIN unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[]) "
        "AS k(task, rollout, attempt, stage) USING (task, rollout, attempt, stage) "
        "WHERE t.run = %s",
        (*columns, run),
    )
    taken = [(row[0], row[1], row[2], row[3]) for row in cur.fetchall()]
    if taken:
        raise _stage_reserved(min(taken), where)
    cur.execute(
        f"INSERT INTO {SCHEMA}.stage_reservations "
        "(run, task, rollout, attempt, stage, seq) "
        "SELECT %s, k.task, k.rollout, k.attempt, k.stage, k.seq FROM unnest("
        "%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[]) "
        "AS k(task, rollout, attempt, stage, seq)",
        (run, *columns, list(stages.values())),
    )


def _decode(decoder: msgspec.json.Decoder[Any], row: EventRow, where: str) -> Any:
    try:
        return decoder.decode(row.body)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise Refused(
            f"{where}: refusing to append a {row.kind} event whose body does not "
            f"decode: {exc}"
        ) from exc


def _not_released(attempt: Attempt, where: str) -> ConfigError:
    task, rollout, number = attempt
    return ConfigError(
        f"{where}: attempt {number} of task {task}, rollout {rollout} is not "
        "released: run `rollout-ledger resume` (or replan) for the current plan",
        path=where,
    )


def _already_reserved(attempt: Attempt, where: str) -> AlreadyReserved:
    task, rollout, number = attempt
    return AlreadyReserved(
        f"{where}: attempt {number} of task {task}, rollout {rollout} is already "
        "reserved; an attempt is reserved once",
        attempt=(task, rollout, number),
        path=where,
    )


def _stage_reserved(stage: Stage, where: str) -> ConfigError:
    task, rollout, number, index = stage
    return ConfigError(
        f"{where}: stage {index} of attempt {number} of task {task}, rollout "
        f"{rollout} is already reserved; a stage is reserved once",
        path=where,
    )
