"""Copying a whole run to its other home (SC-2, SC-5), as one call each way.

``copy_to_files`` writes any run (usually one on PostgreSQL) as a file-based
run in a folder; ``copy_into_store`` loads a file-based run into a new run in
a store, under both runs' locks. Each returns where the copy is and the head
it ends on, which is the source's. The copying is ``ledger.postgres.copy``'s;
it needs ``psycopg``, an optional dependency, so it is imported when a copy is
made rather than with ``ledger``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ledger.outputs import check_outputs
from ledger.run.ledger import Ledger

__all__ = ["CopiedRun", "copy_into_store", "copy_to_files"]


@dataclass(frozen=True)
class CopiedRun:
    """A copy of a run: its ``OUT`` (a path or a run URL), last seq and head hash."""

    out: Path | str
    seq: int
    head: bytes


def copy_to_files(out: Path | str, folder: Path | str) -> CopiedRun:
    """Write the run at ``out`` as a file-based run in ``folder`` (a new one)."""
    from ledger.postgres.copy import export_files

    check_outputs(out, {}, folders={"--files": folder})
    with Ledger.open(out) as source:
        paths = export_files(source, folder)
    # The copy's own head: the source's when the export began (its writer may
    # have appended since; the copy is the prefix up to that head).
    with Ledger.open(paths.out) as copy:
        seq, head = copy.head()
    return CopiedRun(paths.out, seq, head)


def copy_into_store(out: Path | str, url: str) -> CopiedRun:
    """Load the file-based run at ``out`` into the new run at ``url``."""
    from ledger.postgres.copy import load_into_store

    seq, head = load_into_store(out, url)
    return CopiedRun(url, seq, head)
