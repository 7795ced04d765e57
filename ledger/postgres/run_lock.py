"""``RunLock`` for a run URL (SC-4): the coordinator's session advisory lock.

``RunLock("postgresql://...?run=NAME")`` builds this: its own connection to
the server holds the run's advisory lock (``ledger.postgres.advisory``) for as long as
the lock is held; the server releases it when that session dies, however the
process ended, as the kernel releases a dead holder's ``flock`` (EV-40).
Workers take no lock (SC-4).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import psycopg

from ledger.errors import LedgerError, LockHeld
from ledger.paths import RunPaths
from ledger.postgres.advisory import AdvisoryRunLock, acquire_run_lock
from ledger.postgres.schema import migrate, translate
from ledger.postgres.url import RunUrl
from ledger.run.lock import RunLock, _FileLock

__all__ = ["PgRunLock"]


class PgRunLock(RunLock):
    """The run lock of a run on PostgreSQL: a session advisory lock (SC-4)."""

    def __init__(
        self, out: Path | str, checkpoint_dir: Path | str | None = None
    ) -> None:
        self.url = RunUrl.parse(str(out))
        self._conn: psycopg.Connection[Any] | None = None
        self._advisory: AdvisoryRunLock | None = None
        self._locks = []
        if checkpoint_dir is not None:
            self._locks.append(_FileLock(Path(checkpoint_dir) / ".collector.lock"))

    @property
    def paths(self) -> RunPaths:  # type: ignore[override]
        """A run on PostgreSQL has no files (SC-2)."""
        raise LedgerError(f"{self.url} is a run on PostgreSQL: it has no files")

    @property
    def target(self) -> str:
        """The run URL (never with a password)."""
        return str(self.url)

    @property
    def held(self) -> bool:
        """Whether the advisory lock (and any checkpoint lock) is held."""
        advisory = self._advisory is not None and self._advisory.held
        return advisory and all(lock.held for lock in self._locks)

    def acquire(self) -> RunLock:
        """Connect and take the run's advisory lock, or raise ``LockHeld``."""
        if self.held:
            raise LockHeld(
                self.target, holder="this RunLock object", detail="locks do not nest"
            )
        where = str(self.url)
        try:
            conn = psycopg.connect(
                self.url.conninfo,
                autocommit=True,
                application_name="rollout-ledger lock",
                connect_timeout=10,
            )
        except psycopg.Error as exc:
            raise translate(exc, where, "connecting for the run lock") from exc
        try:
            try:
                migrate(conn)  # the lock's holder table, before the run exists
            except psycopg.Error as exc:
                raise translate(exc, where, "creating the schema") from exc
            self._advisory = acquire_run_lock(conn, self.url.run)
            taken: list[_FileLock] = []
            try:
                for lock in self._locks:
                    lock.acquire()
                    taken.append(lock)
            except BaseException:
                for lock in reversed(taken):
                    lock.release()
                raise
        except BaseException:
            self._advisory = None
            conn.close()
            raise
        self._conn = conn
        return self

    def release(self) -> None:
        """Release the advisory lock and close its session (idempotent)."""
        for lock in reversed(self._locks):
            lock.release()
        try:
            if self._advisory is not None:
                self._advisory.release()
        finally:
            self._advisory = None
            if self._conn is not None:
                with contextlib.suppress(psycopg.Error):
                    self._conn.close()
                self._conn = None
