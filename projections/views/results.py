"""``selected_results`` (CLI-12): the rows aggregation and training should read.

The selected result of every ``complete`` rollout, in materialized order, read
from its recorded location (for ``rejudged``, the re-judgment's row), with
``_ng_decision`` and ``reward`` set to the decided score. Superseded attempts,
duplicates and retried masked rows never appear. ``result_rows`` replays and
decides once, and says how many rows the stream will hold (for a progress bar);
each row comes with its rollout and decision (``SelectedRow``), which the
tables of ``results`` read.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec

from ledger import CorruptLedger, Ledger
from ledger.events import Location
from ledger.store.port import RowReader, RunFiles
from projections.decisions.rules import Decision, decide_all
from projections.fold.locations import raw_location
from projections.fold.reading import replay
from projections.fold.state import RolloutState, RunState
from projections.views.row_lines import RowLines

__all__ = [
    "ChangedRow",
    "ResultRows",
    "SelectedRow",
    "changed_rows",
    "result_rows",
    "selected_results",
]

log = logging.getLogger("projections")

Decisions = dict[tuple[int, int], Decision]


class SelectedRow(NamedTuple):
    """One row ``results`` writes, with the rollout and decision it stands for.

    ``final`` is false for a multistage rollout's earlier stage (ROW-64), which
    keeps its own reward; ``recorded`` is false where the row is the rollout's
    materialized input (``--all``: an unfinished rollout without a row).
    """

    key: tuple[int, int]
    decision: Decision
    final: bool
    recorded: bool
    row: dict[str, Any]


@dataclass(frozen=True)
class ResultRows:
    """The rows ``results`` writes, streamed, and how many there will be; with
    the state and decisions they were chosen from (the figures read them too).

    ``count`` rows in all, ``rollouts`` of them final (one a rollout); iterate
    ``selected`` or ``rows`` (the same stream), once.
    """

    count: int
    rollouts: int
    selected: Iterator[SelectedRow]
    state: RunState
    decisions: Decisions

    @property
    def rows(self) -> Iterator[dict[str, Any]]:
        """The rows alone, as ``results`` writes them."""
        return (selected.row for selected in self.selected)


#: Rows read per query (or per pass over the files) by ``selected_results``.
_CHUNK = 512

_DECODER = msgspec.json.Decoder(dict[str, Any])
#: The digest of a place that is not a recorded row (an unfinished rollout's
#: materialized input, for ``--all``): never compared.
_UNRECORDED = "0" * 64


class ChangedRow(msgspec.Struct, frozen=True):
    """R-7: a selected row whose bytes no longer match the digest recorded for it."""

    task: int
    rollout: int
    seq: int
    file: str
    line: int

    def __str__(self) -> str:
        return (
            f"{self.file} line {self.line} (task {self.task}, rollout "
            f"{self.rollout}) changed since it was recorded"
        )


def _line_of(files: RunFiles, file: str, offset: int) -> int:
    """The line number (from 1) of the row at byte ``offset`` of ``file``."""
    line, position = 1, 0
    for chunk in files.chunks(file):
        if position + len(chunk) >= offset:
            return line + chunk.count(b"\n", 0, offset - position)
        line += chunk.count(b"\n")
        position += len(chunk)
    return line


def _changed(
    files: RunFiles, key: tuple[int, int], seq: int | None, where: Location, data: bytes
) -> ChangedRow | None:
    """R-7's check of one row read (verify's, for this row only), else ``None``."""
    if seq is None or where.row_sha256 == _UNRECORDED:
        return None
    if hashlib.sha256(data).hexdigest() == where.row_sha256:
        return None
    line = _line_of(files, where.file, where.offset)
    return ChangedRow(key[0], key[1], seq, files.describe(where.file), line)


def _warn(row: ChangedRow) -> None:
    log.warning("%s; it is used as it stands now (see `rollout-ledger verify`)", row)


def _refuse(row: ChangedRow) -> None:
    raise CorruptLedger(
        f"{row}, so it is not written; see `rollout-ledger verify`, or write the "
        "row as it stands now with --allow-changed",
        path=row.file,
    )


def _source_seq(rollout: RolloutState, decision: Decision) -> int | None:
    if decision.reason == "rejudged":
        graded = [
            j for j in rollout.judgments_of(decision.attempt) if j.outcome == "graded"
        ]
        return graded[-1].outcome_seq if graded else None
    outcome = rollout.outcomes.get(decision.attempt)
    return None if outcome is None else outcome.seq


def _locations(ledger: Ledger, wanted: set[int]) -> dict[int, Location]:
    """The row location of each outcome event in ``wanted``: one read of them all."""
    found: dict[int, Location] = {}
    missed: list[int] = []
    for row in ledger.raw_events_at(sorted(wanted)):
        where = raw_location(row)  # P-4: without the facts
        if where is not None:
            found[row.seq] = where
        else:
            missed.append(row.seq)
    for seq in missed:  # decoded in full: its error, or a location of another kind
        event = next(ledger.events(seq), None)
        where = None if event is None else getattr(event.body, "location", None)
        if event is not None and event.seq == seq and isinstance(where, Location):
            found[seq] = where
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


def _read_raw(reader: RowReader, places: list[Location]) -> list[bytes | None]:
    return reader.read_many([(w.file, w.offset, w.length) for w in places])


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
    """CLI-12's rows, streamed; ``all`` adds every other rollout with its decision.

    A row that changed since it was recorded (R-7) is used as it stands, with
    a warning on the ``projections`` logger.
    """
    decisions = decide_all(state)
    entries = _entries(state, decisions, all)
    for selected in _selected(ledger, state, decisions, entries, changed=_warn):
        yield selected.row


def result_rows(
    ledger: Ledger, *, all: bool = False, allow_changed: bool = False
) -> ResultRows:
    """CLI-12's rows of the run as its log stands, and their number.

    R-7: a row that changed since it was recorded stops the stream with
    ``CorruptLedger`` (naming its file and line) when it is reached; with
    ``allow_changed`` it is written as it stands, with a warning.
    """
    state = replay(ledger)
    decisions = decide_all(state)
    entries = _entries(state, decisions, all)
    changed = _warn if allow_changed else _refuse
    selected = _selected(ledger, state, decisions, entries, changed=changed)
    final = sum(1 for _, _, scored in entries if scored)
    return ResultRows(len(entries), final, selected, state, decisions)


def changed_rows(
    ledger: Ledger, state: RunState, decisions: Decisions
) -> list[ChangedRow]:
    """R-7 for the rows ``results`` would write: each one whose bytes changed.

    Reads the rows ``results`` writes only (the selected row of each complete
    rollout, and a multistage rollout's earlier stages), as ``results`` does,
    and compares each with the digest recorded for it; nothing decoded.
    """
    found: list[ChangedRow] = []
    entries = _entries(state, decisions, False)
    for key, seq, _, where, data in _raw_selected(ledger, state, entries):
        if data is not None:
            one = _changed(ledger.files, key, seq, where, data)
            found += [] if one is None else [one]
    return found


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
    ledger: Ledger,
    state: RunState,
    decisions: Decisions,
    entries: list[_Entry],
    *,
    changed: Callable[[ChangedRow], None],
) -> Iterator[SelectedRow]:
    files = ledger.files
    for key, seq, scored, where, data in _raw_selected(ledger, state, entries):
        if data is not None:
            one = _changed(files, key, seq, where, data)
            if one is not None:
                changed(one)
        row = _decoded(files, where, data)
        decision = decisions[key]
        row = _scored(row, decision) if scored else _stage(row, decision)
        yield SelectedRow(key, decision, scored, seq is not None, row)


def _raw_selected(
    ledger: Ledger, state: RunState, entries: list[_Entry]
) -> Iterator[tuple[tuple[int, int], int | None, bool, Location, bytes | None]]:
    locations = _locations(ledger, {seq for _, seq, _ in entries if seq is not None})
    files = ledger.files
    with files.reader() as reader:
        # Read in chunks: one query per chunk where the rows are in a store.
        for start in range(0, len(entries), _CHUNK):
            chunk = entries[start : start + _CHUNK]
            places = [
                _place(files, state, key, seq, locations) for key, seq, _ in chunk
            ]
            found = _read_raw(reader, places)
            for (key, seq, scored), where, data in zip(
                chunk, places, found, strict=True
            ):
                yield key, seq, scored, where, data


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
