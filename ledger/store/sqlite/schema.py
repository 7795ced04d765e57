"""The SQLite store's schema: named migrations, and its errors translated (EV-10).

sqlite-utils creates the schema through named migrations, applied in order and
recorded; every ``sqlite3`` error becomes a ledger error here, so callers
never see ``sqlite3`` types.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.errors import CorruptLedger, LedgerError, StorageError

if TYPE_CHECKING:
    import sqlite_utils

__all__ = ["MIGRATIONS", "PACKAGE_VERSION", "SCHEMA_VERSION", "blob", "translate"]

PACKAGE_VERSION = "0.1.0"


def _create_events(db: sqlite_utils.Database) -> None:
    db.table("events").create(  # EV-10: the table, exactly as specified
        {
            "seq": int,
            "kind": str,
            "at": str,
            "actor": str,
            "body": bytes,
            "prev_hash": bytes,
            "hash": bytes,
        },
        pk="seq",
        not_null={"kind", "at", "actor", "body", "prev_hash", "hash"},
    )
    # Projections read some kinds first and cheaply (REC-60: the policy events).
    db.table("events").create_index(["kind", "seq"], index_name="events_by_kind")
    db.table("meta").create({"key": str, "value": str}, pk="key", not_null={"value"})


def _create_snapshots(db: sqlite_utils.Database) -> None:
    db.table("snapshots").create(  # EV-14: keyed by what must still match to use it
        {
            "seq": int,
            "head_hash": bytes,
            "code_version": str,
            "policy_digest": str,
            "state": bytes,
        },
        pk=("code_version", "policy_digest"),
        not_null={"seq", "head_hash", "state"},
    )


#: Named migrations, applied in order and recorded; never edit or reorder one.
MIGRATIONS: tuple[tuple[str, Callable[[sqlite_utils.Database], None]], ...] = (
    ("0001_events_and_meta", _create_events),
    ("0002_snapshots", _create_snapshots),
)
SCHEMA_VERSION = len(MIGRATIONS)


def translate(exc: sqlite3.Error, path: Path, doing: str) -> LedgerError:
    if isinstance(exc, sqlite3.ProgrammingError):
        return StorageError(
            f"{path}: {exc} (while {doing}); open the run again", path=path
        )
    if isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc):
        return CorruptLedger(f"{path} is not an SQLite database ({exc})", path=path)
    code = getattr(exc, "sqlite_errorcode", None)
    if code == sqlite3.SQLITE_FULL or (
        code is not None and code & 0xFF == sqlite3.SQLITE_IOERR and _disk_full(path)
    ):
        return StorageError(
            f"no space left on device for {path} (while {doing}): the disk is "
            "full; free space on that disk, then run the command again",
            path=path,
        )
    if "locked" in str(exc) or "busy" in str(exc):
        return StorageError(
            f"{path} is busy while {doing}: {exc}; try again", path=path
        )
    return CorruptLedger(f"{path}: SQLite error while {doing}: {exc}", path=path)


def _disk_full(path: Path) -> bool:
    """Whether the disk holding ``path`` has no block left (an I/O error's cause)."""
    try:
        found = os.statvfs(path.parent)
    except OSError:
        return False
    return found.f_bavail == 0


def blob(value: object, path: Path, seq: object, column: str) -> bytes:
    """``value`` when it is bytes; a column stored as TEXT is ``CorruptLedger``."""
    if type(value) is bytes:
        return value
    raise CorruptLedger(
        f"event seq {seq} in {path} has its {column} stored as text, not as bytes: "
        "the database was changed outside rollout-ledger; run `rollout-ledger "
        "verify` and restore ledger.db from a backup",
        seq=seq if isinstance(seq, int) else None,
        path=path,
    )
