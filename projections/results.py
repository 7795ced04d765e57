"""``selected_results`` (CLI-12): the rows aggregation and training should read.

The selected result of every ``complete`` rollout, in materialized order, read
from its recorded location (for ``rejudged``, the re-judgment's row), with
``_ng_decision`` and ``reward`` set to the decided score. Superseded attempts,
duplicates and retried masked rows never appear. A complete multistage rollout
writes each saved stage row, in stage order, its final stage's with the
decided score (ROW-64). ``result_rows`` replays and decides once, and says how
many rows the stream will hold (for a progress bar).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from ledger import CorruptLedger, Ledger
from ledger.events import Location
from ledger.store.port import RowReader, RunFiles
from projections.decide import Decision, decide_all
from projections.replay import replay
from projections.state import RolloutState, RunState

__all__ = ["ResultRows", "result_rows", "selected_results"]

Decisions = dict[tuple[int, int], Decision]


@dataclass(frozen=True)
class ResultRows:
    """The rows ``results`` writes, streamed, and how many there will be."""

    count: int
    rows: Iterator[dict[str, Any]]


#: Rows read per query (or per pass over the files) by ``selected_results``.
_CHUNK = 512

_DECODER = msgspec.json.Decoder(dict[str, Any])


def _source_seq(rollout: RolloutState, decision: Decision) -> int | None:
    if decision.reason == "rejudged":
        graded = [
            j for j in rollout.judgments_of(decision.attempt) if j.outcome == "graded"
        ]
        return graded[-1].outcome_seq if graded else None
    outcome = rollout.outcomes.get(decision.attempt)
    return None if outcome is None else outcome.seq


def _locations(ledger: Ledger, wanted: set[int]) -> dict[int, Location]:
    found: dict[int, Location] = {}
    if not wanted:
        return found
    for event in ledger.events(min(wanted)):
        where = getattr(event.body, "location", None)
        if event.seq in wanted and isinstance(where, Location):
            found[event.seq] = where
    return found


def _decoded(files: RunFiles, where: Location, data: bytes | None) -> dict[str, Any]:
    if data is None:
        raise CorruptLedger(
            f"{files.describe(where.file)} is missing; run `rollout-ledger verify`",
            path=files.describe(where.file),
        )
    try:
        return _DECODER.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise CorruptLedger(
            f"the row at byte {where.offset} of {where.file} no longer decodes "
            f"({exc}); run `rollout-ledger verify`",
            path=files.describe(where.file),
        ) from exc


def _read_all(
    files: RunFiles, reader: RowReader, places: list[Location]
) -> list[dict[str, Any]]:
    found = reader.read_many([(w.file, w.offset, w.length) for w in places])
    return [_decoded(files, w, data) for w, data in zip(places, found, strict=True)]


def _scored(row: dict[str, Any], decision: Decision) -> dict[str, Any]:
    row["_ng_decision"] = (
        decision.reason if decision.value == "complete" else decision.value
    )
    row.pop("reward", None)
    if decision.value != "complete" or decision.reason == "unscored":
        return row  # no invented score: unscored and unfinished rows carry none
    row["reward"] = decision.score if decision.score is not None else 0.0
    if decision.reason == "settled_zero":
        row["_ng_settled_zero"] = True
    return row


def selected_results(
    ledger: Ledger,
    state: RunState,
    *,
    all: bool = False,
) -> Iterator[dict[str, Any]]:
    """CLI-12's rows, streamed; ``all`` adds every other rollout with its decision."""
    decisions = decide_all(state)
    yield from _selected(ledger, state, decisions, _entries(state, decisions, all))


def result_rows(ledger: Ledger, *, all: bool = False) -> ResultRows:
    """CLI-12's rows of the run as its log stands, and their number."""
    state = replay(ledger)
    decisions = decide_all(state)
    entries = _entries(state, decisions, all)
    return ResultRows(len(entries), _selected(ledger, state, decisions, entries))


#: One row ``results`` writes: its rollout, the seq of the event that located
#: it (``None``: the materialized row), and whether it carries the decision's
#: score (a multistage rollout's earlier stages keep their own, ROW-64).
_Entry = tuple[tuple[int, int], int | None, bool]


def _entries(state: RunState, decisions: Decisions, all: bool) -> list[_Entry]:
    entries: list[_Entry] = []
    for key, decision in decisions.items():
        if decision.value != "complete" and not all:
            continue
        rollout = state.rollout(*key)
        seq = _source_seq(rollout, decision)
        if decision.value == "complete" and rollout.extras is not None:
            stages = _stage_seqs(rollout, decision.attempt)
            entries.extend((key, stage, False) for stage in stages)
        entries.append((key, seq, True))
    return entries


def _stage_seqs(rollout: RolloutState, attempt: int) -> list[int]:
    """ROW-64: the seqs of a complete rollout's saved stages before its final one.

    Each saved stage row is written, in stage order, as 0.7.0 aggregates them;
    the final stage is the selected ``attempt``'s outcome (or its re-judgment).
    """
    stages = rollout.stages or {}
    record = rollout.attempt(attempt)
    final = None if record is None else record.seq
    return [stages[s][1] for s in sorted(stages) if stages[s][1] != final]


def _selected(
    ledger: Ledger, state: RunState, decisions: Decisions, entries: list[_Entry]
) -> Iterator[dict[str, Any]]:
    locations = _locations(ledger, {seq for _, seq, _ in entries if seq is not None})
    files = ledger.files
    with files.reader() as reader:
        # Read in chunks: one query per chunk where the rows are in a store.
        for start in range(0, len(entries), _CHUNK):
            chunk = entries[start : start + _CHUNK]
            places = [
                _place(files, state, key, seq, locations) for key, seq, _ in chunk
            ]
            for (key, _, scored), row in zip(
                chunk, _read_all(files, reader, places), strict=True
            ):
                decision = decisions[key]
                yield _scored(row, decision) if scored else _stage(row, decision)


def _stage(row: dict[str, Any], decision: Decision) -> dict[str, Any]:
    # ROW-64: an earlier stage of a complete rollout, with its own reward.
    row["_ng_decision"] = decision.reason
    return row


def _place(
    files: RunFiles,
    state: RunState,
    key: tuple[int, int],
    seq: int | None,
    locations: dict[int, Location],
) -> Location:
    if seq is not None and seq in locations:
        return locations[seq]
    rollout = state.rollout(*key)
    return Location(
        file=files.names.materialized,
        offset=rollout.offset,
        length=rollout.length,
        row_sha256="0" * 64,
    )
