"""The materialized inputs of a run saved without a ledger (REC-71): they define it.

A bad input row refuses the import, listed with its line; ``--skip-rejected``
does not apply, since skipping an input would silently shrink the evaluation.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from ledger.errors import ConfigError, RowError
from ledger.events import IndexEntry
from ledger.legacy.reading import (
    NO_INDEX,
    TORN,
    Key,
    RawLine,
    decode_line,
    listing,
    raw_lines,
    row_key,
)
from ledger.rows.values import brief
from ledger.store.materialize import index_entry

__all__ = ["Materialized", "read_materialized"]


@dataclass(frozen=True)
class Materialized:
    """The materialized inputs' bytes and one index entry per row, in file order."""

    data: bytes
    entries: tuple[IndexEntry, ...]
    keys: frozenset[Key]


def _input_entry(line: RawLine) -> IndexEntry | str:
    row = decode_line(line)
    if isinstance(row, str):
        return f"{TORN} ({row})" if line.torn else row
    if row_key(row) is None:
        # REC-71: rows are never paired by position (completion order is not
        # input order), so an input row without its key cannot be imported.
        return (
            f"{NO_INDEX} (_ng_task_index {brief(row.get('_ng_task_index'))}, "
            f"_ng_rollout_index {brief(row.get('_ng_rollout_index'))})"
        )
    try:
        return index_entry(
            row, line=line.number, offset=line.offset, length=len(line.data)
        )
    except RowError as exc:
        return str(exc)


def _duplicates(entries: list[tuple[int, IndexEntry]]) -> list[tuple[int, str]]:
    problems: list[tuple[int, str]] = []
    keys: dict[Key, int] = {}
    ids: dict[str, int] = {}
    for line, (task, rollout, _, _, _, rollout_id) in entries:
        if (task, rollout) in keys:
            first = keys[task, rollout]
            problems.append(
                (line, f"task {task}, rollout {rollout} repeats line {first}")
            )
        keys.setdefault((task, rollout), line)
        if rollout_id is not None and rollout_id in ids:
            problems.append((line, f"_ng_rollout_id repeats line {ids[rollout_id]}"))
        if rollout_id is not None:
            ids.setdefault(rollout_id, line)
    return problems


def read_materialized(data: bytes, file: str) -> Materialized:
    """Index the materialized inputs; any unusable row refuses the import.

    Raises:
        RowError: a row is not JSON, has no key, or repeats a key or an id,
            listed with line numbers; ``--skip-rejected`` does not apply, since
            skipping an input would silently shrink the evaluation.
        ConfigError: the file holds no rows.
    """
    problems: list[tuple[int, str]] = []
    entries: list[tuple[int, IndexEntry]] = []
    for line in raw_lines(io.BytesIO(data)):
        if line.blank:
            continue  # NeMo Gym skips blank input lines too
        entry = _input_entry(line)
        if isinstance(entry, str):
            problems.append((line.number, entry))
        else:
            entries.append((line.number, entry))
    problems = sorted(problems + _duplicates(entries))
    if problems:
        raise RowError(
            f"the materialized inputs {file} cannot be imported:\n"
            f"{listing([(file, n, why) for n, why in problems])}\n"
            "every input row needs its own _ng_task_index and _ng_rollout_index, "
            "once; fix the inputs (or pass another --inputs file)",
            path=file,
            line=problems[0][0],
        )
    if not entries:
        raise ConfigError(f"{file} holds no materialized rows; nothing to import")
    index = tuple(entry for _, entry in entries)
    return Materialized(data, index, frozenset((e[0], e[1]) for e in index))
