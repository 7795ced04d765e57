"""A run we may read but not write: a read-only filesystem, another user's folder.

Reading a run never needs write access (readers open ``ledger.db`` read-only,
see ``SQLiteStore``); a writer needs its folder, for the lock file first. A
writer of such a run is refused with these words before it tries anything, so
it never reads as damaged saved work.
"""

from __future__ import annotations

import os
from pathlib import Path

from ledger.errors import Refused

__all__ = ["refuse_unwritable", "unwritable"]

_READERS = "status, verify, history, results, export, head, check, diff-config"


def _existing(folder: Path) -> Path:
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    return folder


def unwritable(folder: Path) -> str | None:
    """Why ``folder`` (or its nearest existing parent) cannot be written; else None."""
    found = _existing(folder)
    try:
        read_only = bool(os.statvfs(found).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    if read_only:
        return f"{found} is on a read-only filesystem"
    if not os.access(found, os.W_OK):
        try:
            owner = f" (owned by uid {found.stat().st_uid}, you are uid {os.geteuid()})"
        except OSError:
            owner = ""
        return f"{found} is not writable by you{owner}"
    return None


def refuse_unwritable(folder: Path) -> None:
    """``Refused`` (exit 3) when a writer could not write the run's ``folder``."""
    reason = unwritable(folder)
    if reason is not None:
        raise Refused(
            f"this run cannot be changed here: {reason}. Commands that read it "
            f"work ({_READERS}); to continue the run, copy its folder to a place "
            "you can write and run the command there"
        )
