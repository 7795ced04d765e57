"""What a writer's open does to the tail of a collector file (EV-12, REC-83).

A torn last line, and blank lines after the last row, are cut back and their
bytes saved in the ledger folder. A last line that is a complete JSON object
without its newline is kept: the newline is appended (as NeMo Gym 0.7.0 does
on resume), or, when another collector appended it already, recorded. Each is
a ``tail_repaired`` event saying which was done.
"""

from __future__ import annotations

import hashlib
import os

from ledger.errors import CorruptLedger, StorageError
from ledger.events import (
    NEWLINE_APPENDED,
    NEWLINE_RECORDED,
    TAIL_CUT,
    TailRepaired,
)
from ledger.files import atomic_replace, fsync_dir, open_regular
from ledger.paths import RunPaths

__all__ = ["append_newline", "cut_tail", "record_newline"]

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
    return TailRepaired(
        file=file,
        offset=offset,
        length=1,
        sha256=_NEWLINE_SHA256,
        saved_as="",
        action=NEWLINE_APPENDED,
    )


def record_newline(file: str, offset: int) -> TailRepaired:
    """REC-83: the newline another collector appended to a kept row, recorded."""
    return TailRepaired(
        file=file,
        offset=offset,
        length=1,
        sha256=_NEWLINE_SHA256,
        saved_as="",
        action=NEWLINE_RECORDED,
    )
