"""How a reader opens an SQLite ``ledger.db``: read-only, never writing a byte.

A reader must work on a run it cannot write (a read-only filesystem, an
archived run owned by another user, issue 18), and must not leave ``-shm`` or
``-wal`` files behind there.
"""

from __future__ import annotations

import os
from pathlib import Path

from ledger.errors import StorageError

__all__ = ["is_wal", "reader_uri", "unreadable_journal"]


def reader_uri(path: Path) -> str:
    """The URI a reader opens ``path`` with: read-only, never writing a byte.

    A reader of a WAL database needs its wal-index (``-shm``): SQLite creates
    it beside the database when it is missing, and a folder we cannot write
    (a read-only filesystem, an archived run owned by another user) makes
    that fail ("unable to open database file"). Such a database is opened
    ``immutable=1`` when no ``-shm`` exists and its ``-wal`` holds no commit:
    then no connection has it open (each keeps the ``-shm`` while it lives),
    every commit is in the database file, and on a read-only filesystem no
    writer can appear, so reading without locks sees exactly what is stored.
    (In a writable folder of another user, only that user could start a
    writer meanwhile; readers of an archived run accept that.) Commits left
    in a ``-wal`` that SQLite cannot index are refused with what to do,
    since reading without them would show an older run. With a ``-shm``
    present, SQLite reads through it even when it cannot write it (3.22+).
    """
    uri = f"{path.as_uri()}?mode=ro"
    if os.access(path.parent, os.W_OK) or not is_wal(path):
        return uri
    shm, wal = (path.with_name(path.name + suffix) for suffix in ("-shm", "-wal"))
    if shm.exists():
        return uri
    try:
        wal_size = wal.stat().st_size
    except FileNotFoundError:
        wal_size = 0
    except OSError as exc:
        raise StorageError(f"could not read {wal}: {exc.strerror}", path=wal) from exc
    if wal_size > 0:
        raise StorageError(
            f"{path} has commits in {wal.name} that SQLite can read only with "
            f"write access to {path.parent} (it must create {shm.name}); copy the "
            "run's folder to a place you can write, or open it once as its "
            "owner, then read it again",
            path=path,
        )
    return uri + "&immutable=1"


def is_wal(path: Path) -> bool:
    """Whether the database header says WAL (file format bytes 18 and 19 are 2)."""
    try:
        with path.open("rb") as handle:
            header = handle.read(20)
    except OSError:
        return False  # the open that follows names the error
    return len(header) == 20 and header[18] == header[19] == 2


def unreadable_journal(path: Path) -> StorageError | None:
    """Why a reader that cannot write could not open ``path``: a hot journal.

    A writer of a rollback-journal database that stopped mid-transaction
    leaves ``-journal``; SQLite must roll it back before anyone reads, which
    needs write access (reading without it would show half a transaction).
    ``None`` when that is not the cause.
    """
    journal = path.with_name(path.name + "-journal")
    try:
        size = journal.stat().st_size
    except OSError:
        return None
    if size == 0 or os.access(path.parent, os.W_OK):
        return None
    return StorageError(
        f"{path} has a transaction to roll back in {journal.name} (a writer "
        f"stopped in the middle of one), which needs write access to "
        f"{path.parent}; copy the run's folder to a place you can write, or "
        "open it once as its owner, then read it again",
        path=path,
    )
