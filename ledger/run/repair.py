"""EV-12: compare the collector files with the log, and repair what a crash left.

A writer opens the run, then: bytes after the last newline (a torn last line)
are cut back and saved; complete rows past the last recorded location are
recorded once (actor ``repair``) when each is the outcome of an attempt reserved
in this run, or the row of an open re-judgment; anything else refuses the open
before anything is written. A reader only reports what is pending.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec

from ledger.errors import (
    CorruptLedger,
    IdentityMismatch,
    LedgerError,
    StorageError,
)
from ledger.events import TailRepaired
from ledger.files import atomic_replace, fsync_dir, open_regular, refuse_irregular
from ledger.paths import RunPaths
from ledger.run.recorder import Recorder, Staged
from ledger.run.write_index import WriteIndex
from ledger.store.port import Prepared

__all__ = ["PendingRepair", "Unrecorded", "find_unrecorded", "repair"]

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Unrecorded:
    """Bytes of one collector file past its last recorded row."""

    file: str
    offset: int  # where the unrecorded bytes start
    first_line: int  # 1-based line number of the first unrecorded row
    rows: tuple[bytes, ...]  # complete lines, newline included
    torn: bytes  # bytes after the last newline


@dataclass(frozen=True)
class PendingRepair:
    """What a writer's open would repair, as a reader reports it."""

    file: str
    line: int
    what: str  # "unrecorded row" or "torn last line"


def _count_lines(path: Path, end: int) -> int:
    count = 0
    with open_regular(path) as handle:
        while end > 0:
            chunk = handle.read(min(_CHUNK, end))
            if not chunk:
                break
            count += chunk.count(b"\n")
            end -= len(chunk)
    return count


#: The recorded (offset, length, sha256) of every row of one file, in order.
Locations = Callable[[str], Iterable[tuple[int, int, str]]]


def _first_changed_line(
    path: Path, size: int, recorded: Iterable[tuple[int, int, str]]
) -> int:
    """The 1-based line of the first recorded row the file no longer holds as is."""
    line = 1
    with open_regular(path) as handle:
        position = 0
        for offset, length, digest in recorded:
            gap = handle.read(max(0, offset - position))
            line += gap.count(b"\n")
            data = handle.read(length)
            position = offset + len(data)
            if len(data) < length or hashlib.sha256(data).hexdigest() != digest:
                return line
            line += data.count(b"\n")
    return _count_lines(path, size) + 1  # no locations: after the last whole line


def _unrecorded_in(
    paths: RunPaths, file: str, end: int, locations: Locations | None = None
) -> Unrecorded | None:
    path = paths.folder / file
    if not refuse_irregular(path):
        if end > 0:
            raise CorruptLedger(
                f"{path} is missing, but the ledger records rows in it up to byte "
                f"{end}; restore it from a backup (rows were lost)",
                path=path,
            )
        return None
    size = path.stat().st_size
    if size < end:
        line = _first_changed_line(path, size, locations(file) if locations else ())
        raise CorruptLedger(
            f"line {line} of {file} no longer holds the row the ledger recorded "
            f"there ({path} is {size} bytes, shorter than the {end} bytes of "
            "recorded rows): rows were lost or edited; run `rollout-ledger verify`",
            path=path,
            line=line,
        )
    if size == end:
        return None
    with open_regular(path) as handle:
        handle.seek(end)
        tail = handle.read()
    complete, newline, torn = tail.rpartition(b"\n")
    rows = tuple(line + b"\n" for line in complete.split(b"\n")) if newline else ()
    return Unrecorded(file, end, _count_lines(path, end) + 1, rows, torn)


def find_unrecorded(
    paths: RunPaths, index: WriteIndex, locations: Locations | None = None
) -> Iterator[Unrecorded]:
    """The bytes of OUT and the sidecar past its last recorded row."""
    for path in (paths.out, paths.sidecar):
        file = paths.relative(path)
        found = _unrecorded_in(paths, file, index.end_of(file).offset, locations)
        if found is not None:
            yield found


def pending_repairs(
    paths: RunPaths, index: WriteIndex, locations: Locations | None = None
) -> list[PendingRepair]:
    """What a writer would repair, for readers to report (EV-12: "pending repair")."""
    pending = []
    for found in find_unrecorded(paths, index, locations):
        for number, _ in enumerate(found.rows):
            pending.append(
                PendingRepair(found.file, found.first_line + number, "unrecorded row")
            )
        if found.torn:
            line = found.first_line + len(found.rows)
            pending.append(PendingRepair(found.file, line, "torn last line"))
    return pending


def _decode_line(found: Unrecorded, number: int, data: bytes) -> dict[str, object]:
    line = found.first_line + number
    try:
        row = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError):
        row = None
    if not isinstance(row, dict):
        raise IdentityMismatch(
            f"line {line} of {found.file} is not a JSON row and is not recorded in the "
            "ledger; move it aside, then open the run again",
            path=found.file,
            line=line,
        )
    return row


def _prepare_rows(recorder: Recorder, found: list[Unrecorded]) -> list[Prepared]:
    staged = Staged()
    prepared = []
    for unrecorded in found:
        for number, data in enumerate(unrecorded.rows):
            row = _decode_line(unrecorded, number, data)
            try:
                op = recorder.prepare_record(row, staged, raw=data)
            except LedgerError as exc:
                line = unrecorded.first_line + number
                raise IdentityMismatch(
                    f"line {line} of {unrecorded.file} is not recorded in the ledger "
                    "and is not an outcome of an attempt reserved in this run "
                    f"({exc}); nothing was changed",
                    path=unrecorded.file,
                    line=line,
                ) from exc
            if op is not None:
                prepared.append(op)
    return prepared


def _cut_torn_tail(paths: RunPaths, found: Unrecorded) -> TailRepaired:
    offset = found.offset + sum(len(row) for row in found.rows)
    saved = paths.ledger_dir / f"torn-{found.file}-{offset}.bin"
    atomic_replace(saved, found.torn)
    try:
        with open_regular(paths.folder / found.file, "r+b") as handle:
            handle.truncate(offset)
            os.fsync(handle.fileno())
        fsync_dir(paths.folder)
    except OSError as exc:
        raise StorageError(
            f"could not cut the torn line of {found.file}: {exc}",
            path=paths.folder / found.file,
        ) from exc
    return TailRepaired(
        file=found.file,
        offset=offset,
        length=len(found.torn),
        sha256=hashlib.sha256(found.torn).hexdigest(),
        saved_as=paths.relative(saved),
    )


def repair(
    paths: RunPaths, recorder: Recorder, locations: Locations | None = None
) -> int:
    """EV-12 on a writer's open; returns how many repair events were appended."""
    found = list(find_unrecorded(paths, recorder.index, locations))
    if not found:
        return 0
    prepared = _prepare_rows(recorder, found)  # refuses before anything changes
    cuts = [
        _cut_torn_tail(paths, unrecorded) for unrecorded in found if unrecorded.torn
    ]
    appended = 0
    if cuts:
        appended += len(
            recorder.commit(
                [Prepared(cut) for cut in cuts], actor="repair", written=True
            )
        )
    appended += len(recorder.commit(prepared, actor="repair", written=True))
    return appended
