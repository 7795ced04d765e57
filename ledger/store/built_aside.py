"""A new ``ledger.db`` built aside and renamed into place whole, or removed.

``create``, ``import`` and ``export --files`` build their database under a
temporary name. Before the rename every step of finishing is checked: the
checkpoint copied the whole write-ahead log into the file, the file checks
whole, and it is on disk (fsync). When any step fails (a full disk, most
often) the half-made database and its ``-wal``/``-shm`` are removed, so a
rerun finds no run that "exists", and the error names the path and what to do.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ledger.errors import StorageError
from ledger.files import fsync_dir
from ledger.store.sqlite.store import SQLiteStore

__all__ = ["built_aside", "discard"]

_SUFFIXES = ("", "-wal", "-shm", "-journal")


def discard(building: Path) -> None:
    """Remove a database built aside, with its ``-wal``, ``-shm`` and journal."""
    for suffix in _SUFFIXES:
        building.with_name(building.name + suffix).unlink(missing_ok=True)


@contextmanager
def built_aside(
    target: Path, *, suffix: str, journal_mode: str = "wal"
) -> Iterator[SQLiteStore]:
    """A new store beside ``target``; renamed to ``target`` once whole, else removed.

    A leftover of an earlier attempt that died is removed first (the caller
    holds the run's lock). A ``StorageError`` while building or finishing is
    raised again naming ``target`` and saying that nothing was left behind.
    """
    building = target.with_name(target.name + suffix)
    discard(building)
    store: SQLiteStore | None = None
    try:
        store = SQLiteStore.create(building, journal_mode=journal_mode)
        yield store
        store.finish()
        _move(building, target)
    except StorageError as exc:
        _give_up(store, building)
        raise StorageError(
            f"could not create {target} (the half-made database was removed, "
            f"so nothing is left to clear): {exc}",
            path=target,
        ) from exc
    except BaseException:
        _give_up(store, building)
        raise


def _give_up(store: SQLiteStore | None, building: Path) -> None:
    if store is not None:
        store.close()
    discard(building)


def _move(building: Path, target: Path) -> None:
    wal = building.with_name(building.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:  # finish() truncated it
        raise StorageError(f"{wal} still holds part of the log", path=wal)
    try:
        fd = os.open(building, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(building, target)
    except OSError as exc:
        raise StorageError(
            f"{(exc.strerror or str(exc)).lower()} ({exc.filename or building})",
            path=target,
        ) from exc
    try:
        fsync_dir(target.parent)
    except OSError as exc:  # the rename may not last: take it back
        target.unlink(missing_ok=True)
        raise StorageError(
            f"{(exc.strerror or str(exc)).lower()} ({exc.filename or building})",
            path=target,
        ) from exc
