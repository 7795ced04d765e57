"""Whether the rows a run recorded are still in its collector files as recorded (R-7).

Lines are counted at ``"\n"``, 1-based, as the importer and ``verify`` count
them; a row is as recorded when its bytes at its offset hash to its digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path

from ledger.errors import CorruptLedger
from ledger.files import open_regular, refuse_irregular
from ledger.paths import RunPaths

__all__ = [
    "Locations",
    "changed_line",
    "count_lines",
    "first_changed_line",
    "refuse_changed_rows",
]

_CHUNK = 1 << 20


def count_lines(path: Path, end: int) -> int:
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


def first_changed_line(
    path: Path, size: int, recorded: Iterable[tuple[int, int, str]]
) -> int | None:
    r"""The 1-based line of the first recorded row the file no longer holds as is.

    ``None`` when every recorded row is where it was recorded. Rows are taken
    in file order and lines counted at ``"\n"``, as ``verify`` does.
    """
    line = 1
    with open_regular(path) as handle:
        position = 0
        for offset, length, digest in sorted(recorded):
            gap = handle.read(max(0, offset - position))
            line += gap.count(b"\n")
            data = handle.read(length)
            position = offset + len(data)
            if len(data) < length or hashlib.sha256(data).hexdigest() != digest:
                return line
            line += data.count(b"\n")
    return None


def changed_line(
    path: Path, file: str, size: int, locations: Locations | None
) -> int | None:
    return first_changed_line(path, size, locations(file) if locations else ())


def refuse_changed_rows(paths: RunPaths, file: str, locations: Locations) -> None:
    """R-7: refuse when a recorded row of ``file`` is no longer as recorded.

    Every recorded row is read and hashed: an edit in place keeps the file's
    length and line count, which the open's cheaper check trusts.
    """
    path = paths.folder / file
    if not refuse_irregular(path):
        return  # a missing file with rows in it is find_unrecorded's to name
    changed = changed_line(path, file, path.stat().st_size, locations)
    if changed is not None:
        raise CorruptLedger(
            f"line {changed} of {file} no longer holds the row the ledger recorded "
            "there: rows were edited; run `rollout-ledger verify`, and restore the "
            "file from a backup",
            path=path,
            line=changed,
        )
