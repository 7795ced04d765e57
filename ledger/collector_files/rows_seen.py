"""What ``OUT`` and the sidecar were when their writer last closed (issue 25).

``status`` warns about a recorded row edited in place since it was recorded
(R-7). Checking every selected row's digest reads every row: seconds at a
million rollouts, for what the file system already says. So a writer that
recorded rows, as it closes, notes each collector file's device, inode, size
and times
(``save_rows_seen``); ``rows_untouched`` is true while both files still show
exactly that, and were not written within ``RACY_NS`` of the note (a write in
the same clock tick could keep the times). Anything else (an edit, an append
by another program, a killed writer that left no note) means "moved": the
digests are checked. As with the inputs' proof, a raw write under the file
system or a clock set back is not seen; ``verify`` always checks everything.
"""

from __future__ import annotations

import os
import time
from contextlib import suppress
from pathlib import Path
from typing import NamedTuple

import msgspec

from ledger.paths import RunPaths

__all__ = [
    "RACY_NS",
    "RowsLooked",
    "file_shape",
    "forget_rows_seen",
    "look_at_rows",
    "rows_as_noted",
    "rows_untouched",
    "save_rows_seen",
]

#: A file written this close to the note is not trusted (coarse clocks).
RACY_NS = 2_000_000_000
_NAME = "rows_seen.json"


_Shape = tuple[int, int, int, int, int]


class _Seen(msgspec.Struct, array_like=True, frozen=True):
    files: list[_Shape | None]  # dev, ino, size, mtime, ctime
    seen_at_ns: int


def file_shape(path: Path) -> _Shape | None:
    """``path``'s device, inode, size, mtime and ctime (ns); ``None``: no file."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (
        found.st_dev,
        found.st_ino,
        found.st_size,
        found.st_mtime_ns,
        found.st_ctime_ns,
    )


def _files(paths: RunPaths) -> list[Path]:
    return [paths.out, paths.sidecar]


class RowsLooked(NamedTuple):
    """The collector files as a reader found them before it read them."""

    files: list[_Shape | None]
    at_ns: int


def look_at_rows(paths: RunPaths) -> RowsLooked:
    """``OUT`` and the sidecar as they are now, before a reader reads them."""
    return RowsLooked([file_shape(p) for p in _files(paths)], time.time_ns())


def save_rows_seen(paths: RunPaths, *, looked: RowsLooked | None = None) -> None:
    """Note the collector files as they are now (a writer, closing).

    ``looked``: the files as an import found them before it read and hashed
    every row (issue 30). The note is then made only if they are still
    exactly so, and as of that look: a file written since, or within
    ``RACY_NS`` before it, is not trusted (its digests are checked).
    """
    if looked is None:
        seen = _Seen([file_shape(p) for p in _files(paths)], time.time_ns())
    elif [file_shape(p) for p in _files(paths)] == looked.files:
        seen = _Seen(looked.files, looked.at_ns)
    else:
        return
    note = paths.ledger_dir / _NAME
    spare = note.with_name(_NAME + ".tmp")
    with suppress(OSError):  # a note only: without it, status checks digests
        spare.write_bytes(msgspec.json.encode(seen))
        os.replace(spare, note)


def forget_rows_seen(paths: RunPaths) -> None:
    """Drop the note: ``status`` checks digests until a writer notes again."""
    with suppress(OSError):
        (paths.ledger_dir / _NAME).unlink(missing_ok=True)


def _noted(paths: RunPaths) -> tuple[_Seen, list[_Shape | None]] | None:
    try:
        seen = msgspec.json.decode((paths.ledger_dir / _NAME).read_bytes(), type=_Seen)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    now = [file_shape(p) for p in _files(paths)]
    if [tuple(s) if s is not None else None for s in seen.files] != now:
        return None
    return seen, now


def rows_as_noted(paths: RunPaths) -> bool:
    """Whether the files show exactly what the last note saw (a writer, opening).

    A writer that finds them moved (an edit, a killed writer's rows) checks
    every recorded row's digest before it notes the files again, so an edit
    followed by more rows is still seen (issue 25).
    """
    return _noted(paths) is not None


def rows_untouched(paths: RunPaths) -> bool:
    """Whether ``OUT`` and the sidecar are as their writer last left them."""
    noted = _noted(paths)
    if noted is None:
        return False
    seen, now = noted
    newest = max((max(s[3], s[4]) for s in now if s is not None), default=0)
    return newest + RACY_NS <= seen.seen_at_ns
