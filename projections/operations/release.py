"""The I/O half of planning: read the rows to dispatch, append the release (REC-3).

``replan`` releases what the current decisions allow, without a gate, for a
collector that retries within one process; ``resume`` (the gate, REC-56) adds
the checks before it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import msgspec

from ledger import Ledger, names_kept_deliverable
from ledger.errors import CorruptLedger
from ledger.events import (
    AttemptsReleased,
    FailureSaved,
    JudgeOutcomeSaved,
    Location,
    ResultSaved,
)
from ledger.store.port import EventRow
from projections.decisions.plan import Plan, PlanKeys, RejudgeItem, plan_keys
from projections.decisions.rules import Decision, decide_all
from projections.fold.locations import raw_location
from projections.fold.state import RolloutState, RunState
from projections.operations.keep import replay_kept

__all__ = ["build_plan", "read_materialized", "replan"]

_ROW_DECODER = msgspec.json.Decoder(dict[str, Any])


class _Row(msgspec.Struct):
    """A row read to check that it is a JSON object, nothing of it kept."""


_CHECK_DECODER = msgspec.json.Decoder(_Row)
#: Materialized rows read per query where they are in a store (SC-2).
_READ_CHUNK = 512


def read_materialized(
    ledger: Ledger,
    state: RunState,
    keys: Sequence[tuple[int, int, int]],
    *,
    keep: bool = True,
) -> list[dict[str, Any]]:
    """The materialized rows of ``keys``, stamped with attempt and run id (REC-56).

    A multistage rollout with saved stages also gets the first missing
    ``stage_index``, where its collector continues (ROW-64). With ``keep``
    false each row is read and checked as a plan reads it, then dropped (a
    dry run that prints counts holds no row: its memory stays flat).
    """
    rows = []
    name = ledger.files.names.materialized
    rollouts = [(state.rollout(task, index), attempt) for task, index, attempt in keys]
    with ledger.files.reader() as reader:
        for start in range(0, len(rollouts), _READ_CHUNK):  # a query each in a store
            chunk = rollouts[start : start + _READ_CHUNK]
            found = reader.read_many([(name, r.offset, r.length) for r, _ in chunk])
            for (rollout, attempt), data in zip(chunk, found, strict=True):
                try:
                    if not keep:  # checked as the plan reads it, not built
                        _CHECK_DECODER.decode(data or b"")
                        continue
                    row = _ROW_DECODER.decode(data or b"")
                except (msgspec.DecodeError, RecursionError) as exc:
                    where = ledger.files.describe(name)
                    raise CorruptLedger(
                        f"line {rollout.line} of {where} does not decode: {exc}",
                        path=where,
                        line=rollout.line,
                    ) from exc
                row["_ng_attempt_index"] = attempt
                row["_ng_run_id"] = state.run_id
                if rollout.extras is not None:  # ROW-64: saved stages never rerun
                    stage = rollout.next_stage()
                    if stage is not None:
                        row["stage_index"] = stage
                rows.append(row)
    return rows


def _location(ledger: Ledger, seq: int, row: EventRow | None) -> Location:
    # Read off the raw body (P-4); any other body, or one that does not decode
    # so, is decoded in full (for its error).
    found = None if row is None else raw_location(row)
    if found is not None:
        return found
    event = next(ledger.events(seq), None)
    body = None if event is None or event.seq != seq else event.body
    if not isinstance(body, ResultSaved | FailureSaved | JudgeOutcomeSaved):
        raise CorruptLedger(
            f"the outcome event seq {seq} cannot be found in {ledger.where}; run "
            "`rollout-ledger verify`",
            seq=seq,
            path=ledger.where,
        )
    return body.location


def _outcome_seq(rollout: RolloutState, attempt: int) -> int:
    """The seq of ``attempt``'s outcome (``KeyError`` when it has none)."""
    record = rollout.attempt(attempt)
    if record is None or not record.has_outcome:
        raise KeyError(attempt)
    return record.seq


class _Deliverable(msgspec.Struct):
    """What ROW-63 reads of a row to re-judge: its kept deliverable, if any."""

    reuse_cached_deliverable: object = None
    deliverables_dir: object = None


_DELIVERABLE_DECODER = msgspec.json.Decoder(_Deliverable)


#: A JSON escape of an ASCII letter or "_": how a ROW-63 key could be written
#: without spelling its name (collectors escape control and non-ASCII
#: characters, and "<", ">", "&" at most, none of them in a key).
_ESCAPED_LETTER = re.compile(rb"\\u00[4-7][0-9a-fA-F]")


def _deliverable(data: bytes | None) -> dict[str, Any]:
    """ROW-63: the plan item's deliverable fields for the row ``data`` holds."""
    if (
        data is not None
        and b"deliverable" not in data  # in both keys' names
        and _ESCAPED_LETTER.search(data) is None
    ):
        return {}  # the row cannot name a deliverable: nothing to decode (P-8)
    try:
        found = _DELIVERABLE_DECODER.decode(data or b"")
    except (msgspec.DecodeError, RecursionError):
        return {}  # a row that does not read so names no deliverable
    fields = msgspec.structs.asdict(found)
    if not names_kept_deliverable(fields):
        return {}
    folder = found.deliverables_dir
    kept = folder if isinstance(folder, str) and folder else None
    return {"reuse_cached_deliverable": True, "deliverables_dir": kept}


def _rejudge_items(
    ledger: Ledger, state: RunState, keys: Sequence[tuple[int, int, int]]
) -> list[RejudgeItem]:
    seqs = [_outcome_seq(state.rollout(t, i), a) for t, i, a in keys]
    # One read of every outcome event named, not a read per key (P-4).
    found = {row.seq: row for row in ledger.raw_events_at(seqs)}
    places = [_location(ledger, seq, found.get(seq)) for seq in seqs]
    rows: list[bytes | None] = []
    with ledger.files.reader() as reader:  # the rows, for ROW-63's deliverable
        for start in range(0, len(places), _READ_CHUNK):  # a query each in a store
            chunk = places[start : start + _READ_CHUNK]
            rows += reader.read_many([(w.file, w.offset, w.length) for w in chunk])
    return [
        RejudgeItem(
            task,
            index,
            attempt,
            where.file,
            where.offset,
            where.length,
            **_deliverable(data),
        )
        for (task, index, attempt), where, data in zip(keys, places, rows, strict=True)
    ]


def build_plan(
    ledger: Ledger,
    state: RunState,
    decisions: dict[tuple[int, int], Decision],
    keys: PlanKeys,
    *,
    keep_rows: bool = True,
) -> Plan:
    """Read what the plan's keys name and count the decisions.

    ``keep_rows`` false: the rows to dispatch are read and checked, not kept
    (``dispatch`` is empty; ``counts["dispatch"]`` says how many).
    """
    counts = Counter(d.value for d in decisions.values())
    if state.settled is not None:  # P-8: the rollouts left out, decided
        for value, reasons in state.settled.decisions.items():
            counts[value] += sum(reasons.values())
    counts.update(
        dispatch=len(keys.dispatch), rejudge_planned=len(keys.rejudge),
        held_planned=len(keys.held), in_flight=keys.in_flight,
    )  # fmt: skip
    return Plan(
        dispatch=read_materialized(ledger, state, keys.dispatch, keep=keep_rows),
        rejudge=_rejudge_items(ledger, state, keys.rejudge),
        held=list(keys.held),
        counts=dict(sorted(counts.items())),
    )


def replan(ledger: Ledger, *, longest_first: bool = False) -> Plan:
    """REC-3: release what the current decisions allow, never what is in flight."""
    state = replay_kept(ledger)
    decisions = decide_all(state)
    keys = plan_keys(state, decisions, skip_in_flight=True, longest_first=longest_first)
    plan = build_plan(ledger, state, decisions, keys)
    if keys.dispatch or keys.rejudge:
        ledger.append(
            AttemptsReleased(dispatch=keys.dispatch, rejudge=keys.rejudge),
            actor="collector",
        )
    return plan
