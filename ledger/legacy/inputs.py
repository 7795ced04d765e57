"""The materialized inputs of a run saved without a ledger (REC-71): they define it.

A bad input row refuses the import, listed with its line; ``--skip-rejected``
does not apply, since skipping an input would silently shrink the evaluation.
The file is read line by line (P-9: a million rows are gigabytes): what is
kept is its digest, its keys in a compact set and the ``run_created`` index
already encoded, never its rows or its bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec

from ledger.errors import ConfigError, RowError
from ledger.events import IndexEntry
from ledger.files import open_regular
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
from ledger.paths import RunPaths
from ledger.rows.values import brief
from ledger.store.materialize import index_entry

__all__ = ["KeySet", "Materialized", "chunks", "inputs_file", "read_materialized"]

#: Rollout indices below this are one bit of their task's mask.
_MASK_BITS = 64
_ENCODE = msgspec.json.encode


class KeySet:
    """The rollout keys of a run, compactly: ``(task, rollout) in keys``.

    A key is a bit of its task's mask (one small int a task where a frozenset
    of tuples took ~150 bytes a key: P-9, a million rollouts); rollout indices
    past the mask go to a plain set.
    """

    __slots__ = ("_count", "_masks", "_others")

    def __init__(self) -> None:
        self._masks: dict[int, int] = {}
        self._others: set[Key] = set()
        self._count = 0

    def add(self, key: Key) -> bool:
        """Add ``key``; ``False`` when it was there already."""
        task, rollout = key
        if rollout < _MASK_BITS:
            mask, bit = self._masks.get(task, 0), 1 << rollout
            if mask & bit:
                return False
            self._masks[task] = mask | bit
        elif key in self._others:
            return False
        else:
            self._others.add(key)
        self._count += 1
        return True

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        task, rollout = key
        if isinstance(rollout, int) and 0 <= rollout < _MASK_BITS:
            return bool(self._masks.get(task, 0) >> rollout & 1)
        return key in self._others

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Key]:
        for task, mask in self._masks.items():
            for rollout in range(_MASK_BITS):
                if mask >> rollout & 1:
                    yield task, rollout
        yield from self._others


@dataclass(frozen=True)
class Materialized:
    """What the import keeps of the materialized inputs (REC-70, ID-34).

    ``index`` is the ``run_created`` index encoded, its entries in file order
    without the enclosing brackets: ``[task,rollout,offset,length,agent,id]``
    joined by commas, the bytes ``msgspec`` gives the whole tuple.
    """

    sha256: str
    size: int
    lines: int
    index: bytes
    keys: KeySet

    @property
    def rows(self) -> int:
        """How many rows the inputs hold."""
        return len(self.keys)


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


@dataclass
class _Reading:
    """One pass over the inputs: digest, keys, encoded index, problems."""

    digest: hashlib._Hash
    keys: KeySet
    index: bytearray
    problems: list[tuple[int, str]]
    repeated: list[tuple[int, Key]]
    ids: dict[str, int]
    size: int = 0
    lines: int = 0

    def take(self, line: RawLine) -> None:
        self.digest.update(line.data)
        self.size += len(line.data)
        self.lines += not line.torn
        if line.blank:
            return  # NeMo Gym skips blank input lines too
        entry = _input_entry(line)
        if isinstance(entry, str):
            self.problems.append((line.number, entry))
            return
        task, rollout, _, _, _, rollout_id = entry
        if not self.keys.add((task, rollout)):
            self.repeated.append((line.number, (task, rollout)))
        if rollout_id is not None:
            first = self.ids.setdefault(rollout_id, line.number)
            if first != line.number:
                self.problems.append(
                    (line.number, f"_ng_rollout_id repeats line {first}")
                )
        if self.index:
            self.index += b","
        self.index += _ENCODE(entry)


def _first_lines(path: Path, wanted: set[Key]) -> dict[Key, int]:
    """The line each of ``wanted`` first appears on (a second pass, only on error)."""
    found: dict[Key, int] = {}
    with open_regular(path) as handle:
        for line in raw_lines(handle):
            entry = None if line.blank else _input_entry(line)
            key = None if not isinstance(entry, tuple) else (entry[0], entry[1])
            if key in wanted and key not in found:
                found[key] = line.number
    return found


def _repeats(path: Path, repeated: list[tuple[int, Key]]) -> list[tuple[int, str]]:
    first = _first_lines(path, {key for _, key in repeated})
    return [
        (line, f"task {task}, rollout {rollout} repeats line {first[task, rollout]}")
        for line, (task, rollout) in repeated
    ]


def read_materialized(
    path: Path, file: str, *, advance: Callable[[int], None] | None = None
) -> Materialized:
    """Index the materialized inputs at ``path``; any unusable row refuses the import.

    ``file`` names them in messages; ``advance`` is called with the bytes of
    each line read (progress).

    Raises:
        RowError: a row is not JSON, has no key, or repeats a key or an id,
            listed with line numbers; ``--skip-rejected`` does not apply, since
            skipping an input would silently shrink the evaluation.
        ConfigError: the file holds no rows, or cannot be read.
    """
    reading = _Reading(hashlib.sha256(), KeySet(), bytearray(), [], [], {})
    try:
        with open_regular(path) as handle:
            for line in raw_lines(handle):
                reading.take(line)
                if advance is not None:
                    advance(len(line.data))
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}", path=path) from exc
    problems = reading.problems
    if reading.repeated:
        problems += _repeats(path, reading.repeated)
    if problems:
        problems.sort()
        raise RowError(
            f"the materialized inputs {file} cannot be imported:\n"
            f"{listing([(file, n, why) for n, why in problems])}\n"
            "every input row needs its own _ng_task_index and _ng_rollout_index, "
            "once; fix the inputs (or pass another --inputs file)",
            path=file,
            line=problems[0][0],
        )
    if not reading.keys:
        raise ConfigError(f"{file} holds no materialized rows; nothing to import")
    return Materialized(
        sha256=reading.digest.hexdigest(),
        size=reading.size,
        lines=reading.lines,
        index=bytes(reading.index),
        keys=reading.keys,
    )


# Which file holds the run's materialized inputs (REC-70).

_CHUNK = 1 << 20


def chunks(path: Path) -> Iterator[bytes]:
    """The bytes of ``path``, a MiB at a time."""
    try:
        with open_regular(path) as handle:
            while chunk := handle.read(_CHUNK):
                yield chunk
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}", path=path) from exc


def _same_bytes(one: Path, other: Path) -> bool:
    if one.stat().st_size != other.stat().st_size:
        return False
    return all(a == b for a, b in zip(chunks(one), chunks(other), strict=False))


def inputs_file(paths: RunPaths, inputs: Path | str | None) -> tuple[Path, bool]:
    """The materialized inputs to read, and whether ``inputs`` must be copied there.

    Raises:
        ConfigError: there are none and no ``inputs``; ``inputs`` differs
            from the run's; a file cannot be read.
    """
    target = paths.materialized
    if target.exists():
        if inputs is not None and not _same(Path(inputs), target):
            raise ConfigError(
                f"{target} exists and holds other rows than {inputs}; import the "
                "run with its own materialized inputs (leave out --inputs)",
                path=target,
            )
        return target, False
    if inputs is None:
        raise ConfigError(
            f"{target} is missing: pass the run's materialized rows with --inputs "
            "ROWS.jsonl (each with its _ng_task_index and _ng_rollout_index; "
            "results are never paired with inputs by position)",
            path=target,
        )
    return Path(inputs), True


def _same(given: Path, target: Path) -> bool:
    try:
        return _same_bytes(given, target)
    except OSError as exc:
        raise ConfigError(
            f"cannot read {exc.filename or given}: {exc.strerror}", path=given
        ) from exc
