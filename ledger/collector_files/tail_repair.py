"""What a writer's open does to the tail of a collector file (EV-12, REC-83).

A torn last line, and blank lines after the last row, are cut back and their
bytes saved in the ledger folder. A last line that is a complete JSON object
without its newline is kept: the newline is appended (as NeMo Gym 0.7.0 does
on resume), or, when another collector appended it already, recorded. Each is
a ``tail_repaired`` event saying which was done. The helpers at the end
read a file's tail for ``ledger.collector_files.repair``, which decides what is pending.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ledger.errors import CorruptLedger, StorageError
from ledger.events import (
    NEWLINE_APPENDED,
    NEWLINE_RECORDED,
    TAIL_CUT,
    TailAction,
    TailRepaired,
)
from ledger.files import atomic_replace, fsync_dir, open_regular
from ledger.jsonl import is_json_object
from ledger.paths import RunPaths
from ledger.run.write_index import FileEnd

__all__ = [
    "append_newline",
    "cut_tail",
    "newline_after",
    "open_end_of",
    "record_newline",
    "split_tail",
]

_NEWLINE_SHA256 = hashlib.sha256(b"\n").hexdigest()


def cut_tail(paths: RunPaths, file: str, offset: int, cut: bytes) -> TailRepaired:
    """Cut ``file`` back to ``offset``, saving the ``cut`` bytes after it first."""
    prefix = "blank" if not cut.strip() else "torn"
    saved = paths.ledger_dir / f"{prefix}-{file}-{offset}.bin"
    atomic_replace(saved, cut)
    try:
        with open_regular(paths.folder / file, "r+b") as handle:
            handle.truncate(offset)
            os.fsync(handle.fileno())
        fsync_dir(paths.folder)
    except OSError as exc:
        raise StorageError(
            f"could not cut the {prefix} tail of {file}: {exc}",
            path=paths.folder / file,
        ) from exc
    return TailRepaired(
        file=file,
        offset=offset,
        length=len(cut),
        sha256=hashlib.sha256(cut).hexdigest(),
        saved_as=paths.relative(saved),
        action=TAIL_CUT,
    )


def append_newline(paths: RunPaths, file: str, offset: int) -> TailRepaired:
    """REC-83: append the newline the last line of ``file`` lacks, at ``offset``.

    The file must end at ``offset`` (the open holds the run lock, so only a
    collector writing without the ledger could have moved it since).
    """
    path = paths.folder / file
    try:
        with open_regular(path, "r+b") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size != offset:
                raise CorruptLedger(
                    f"{file} changed while the run was being opened ({size} bytes, "
                    f"not {offset}): is a collector still writing it without the "
                    "ledger? Stop it, then open the run again",
                    path=path,
                )
            handle.write(b"\n")
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise StorageError(
            f"could not append the missing newline to {file}: {exc}", path=path
        ) from exc
    return _newline(file, offset, NEWLINE_APPENDED)


def record_newline(file: str, offset: int) -> TailRepaired:
    """REC-83: the newline another collector appended to a kept row, recorded."""
    return _newline(file, offset, NEWLINE_RECORDED)


def _newline(file: str, offset: int, action: TailAction) -> TailRepaired:
    # The one byte a kept row lacked, at ``offset``; nothing was cut or saved.
    return TailRepaired(
        file=file,
        offset=offset,
        length=1,
        sha256=_NEWLINE_SHA256,
        saved_as="",
        action=action,
    )


# Reading a file's tail (a writer's open, and a reader's report).


def open_end_of(path: Path, end: FileEnd) -> bool:
    """Whether the recorded bytes end without a newline (REC-83: a kept last row)."""
    if end.offset == 0:
        return False
    with path.open("rb") as handle:
        handle.seek(end.offset - 1)
        return handle.read(1) != b"\n"


def split_tail(tail: bytes) -> tuple[tuple[bytes, ...], bytes, bytes, bool]:
    """Complete lines, the whitespace-only lines after the last row, the torn line.

    REC-83: a last line without its newline that is a complete JSON object is
    a row, returned with the newline a writer's open appends to it (the last
    value says so).
    """
    complete, newline, torn = tail.rpartition(b"\n")
    rows = [line + b"\n" for line in complete.split(b"\n")] if newline else []
    if torn.strip() and is_json_object(torn):
        return (*rows, torn + b"\n"), b"", b"", True
    blank = []
    while rows and not rows[-1].strip():
        blank.append(rows.pop())
    return tuple(rows), b"".join(reversed(blank)), torn, False


def newline_after(
    file: str, end: FileEnd, lines: int, tail: bytes
) -> tuple[int, int, int]:
    """REC-83: the newline another collector put after a kept row that lacked it.

    Returns its offset, where the unrecorded bytes after it start, and their
    first line. Bytes written onto the row's own line refuse the open.
    """
    if not tail.startswith(b"\n"):
        line = lines + 1
        raise CorruptLedger(
            f"line {line} of {file} ends with bytes written after its recorded "
            f"row (the row had no newline; bytes follow it at byte {end.offset}): "
            "the line is no longer the row the ledger recorded; move those bytes "
            "aside (or onto a line of their own), then open the run again",
            path=file,
            line=line,
        )
    return end.offset, end.offset + 1, lines + 2
