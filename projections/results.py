"""``selected_results`` (CLI-12): the rows aggregation and training should read.

The selected result of every ``complete`` rollout, in materialized order, read
from its recorded location (for ``rejudged``, the re-judgment's row), with
``_ng_decision`` and ``reward`` set to the decided score. Superseded attempts,
duplicates and retried masked rows never appear. ``result_rows`` replays and
decides once, and says how many rows the stream will hold (for a progress bar).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from ledger import CorruptLedger, Ledger
from ledger.events import Location
from ledger.store.port import RowReader, RunFiles
from projections.coverage import coverage
from projections.decide import Decision, decide_all
from projections.replay import replay
from projections.row_lines import RowLines
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
            f"the row at {RowLines(files).where(where.file, where.offset)} no "
            f"longer decodes ({exc}); run `rollout-ledger verify`",
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
    yield from _selected(ledger, state, decide_all(state), all=all)


def result_rows(ledger: Ledger, *, all: bool = False) -> ResultRows:
    """CLI-12's rows of the run as its log stands, and their number."""
    state = replay(ledger)
    decisions = decide_all(state)
    count = state.expected if all else coverage(state, decisions).decisions["complete"]
    return ResultRows(count, _selected(ledger, state, decisions, all=all))


def _selected(
    ledger: Ledger, state: RunState, decisions: Decisions, *, all: bool
) -> Iterator[dict[str, Any]]:
    sources = {
        key: _source_seq(state.rollout(*key), decision)
        for key, decision in decisions.items()
        if decision.value == "complete" or all
    }
    locations = _locations(ledger, {seq for seq in sources.values() if seq is not None})
    files = ledger.files
    keys = list(sources)
    with files.reader() as reader:
        # Read in chunks: one query per chunk where the rows are in a store.
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            places = [
                _place(files, state, key, sources[key], locations) for key in chunk
            ]
            for key, row in zip(chunk, _read_all(files, reader, places), strict=True):
                yield _scored(row, decisions[key])


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
