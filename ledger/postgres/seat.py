"""A worker's seat in a run on PostgreSQL (issue 29): its own advisory lock.

The lock (``WORKER_NAMESPACE`` and :func:`worker_lock_key`) is taken on the
very session the worker records through, so a worker whose session ended can
record nothing more, and the coordinator sees the lock gone (``pg_locks``).
"""

from __future__ import annotations

import os
import socket
from typing import Any

import psycopg

from ledger.errors import ConfigError, LockLost, StorageError
from ledger.postgres.schema import SCHEMA, WORKER_NAMESPACE, translate
from ledger.postgres.workers import KINDS, Key, WorkBoard, worker_lock_key

__all__ = ["WorkerSeat"]

_CLAIM = f"""
WITH c AS MATERIALIZED (
    SELECT kind, task, rollout, attempt FROM {SCHEMA}.work
    WHERE run = %(run)s AND worker IS NULL AND NOT done AND epoch = %(epoch)s
    ORDER BY task, rollout, kind, attempt LIMIT %(n)s
    FOR UPDATE SKIP LOCKED)
UPDATE {SCHEMA}.work w SET worker = %(me)s, claimed_at = now() FROM c
WHERE w.run = %(run)s AND w.kind = c.kind AND w.task = c.task
  AND w.rollout = c.rollout AND w.attempt = c.attempt AND w.worker IS NULL
RETURNING w.kind, w.task, w.rollout, w.attempt"""


class WorkerSeat:
    """A worker's place in a run: its advisory lock on the session it records on.

    ``take`` locks ``WORKER_NAMESPACE`` and :func:`worker_lock_key` on the
    worker ledger's own session and registers the worker (host, pid, start).
    """

    def __init__(self, board: WorkBoard, name: str, key: int) -> None:
        self.board = board
        self.name = name
        self.key = key
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.lost: str | None = None

    @classmethod
    def take(cls, ledger: Any, name: str) -> WorkerSeat:
        """Lock ``name``'s advisory lock on ``ledger``'s session and register it."""
        board = WorkBoard.of(ledger)
        key = worker_lock_key(board.run, name)
        seat = cls(board, name, key)
        conn = board._conn
        try:
            with conn.cursor() as cur:
                got = cur.execute(
                    "SELECT pg_try_advisory_lock(%s::int4, %s::int4)",
                    (WORKER_NAMESPACE, key),
                ).fetchone()
                if got is None or not got[0]:
                    raise ConfigError(
                        f"{board.where}: a worker named {name!r} is working on this "
                        "run already; give each worker a name of its own"
                    )
                cur.execute(
                    f"INSERT INTO {SCHEMA}.workers (run, worker, host, pid, "
                    "backend_pid, lock_key, state) VALUES (%s, %s, %s, %s, "
                    "pg_backend_pid(), %s, 'working') ON CONFLICT (run, worker) DO "
                    "UPDATE SET host = excluded.host, pid = excluded.pid, "
                    "backend_pid = excluded.backend_pid, started = now(), "
                    "last_heard = now(), state = 'working', ended = NULL, "
                    "rows_recorded = 0",
                    (board.run, name, seat.host, seat.pid, key),
                )
        except psycopg.Error as exc:
            raise translate(exc, board.where, "registering the worker") from exc
        return seat

    def _lost(self, what: str) -> LockLost:
        self.lost = self.lost or what
        return LockLost(
            self.board.where,
            what=self.lost,
            advice="its claimed work is offered to the other workers; start this "
            "worker again (a requeue) to go on",
        )

    def check(self) -> None:
        """Raise ``LockLost`` unless this worker's session still holds its lock."""
        if self.lost is not None:
            raise self._lost(self.lost)
        conn = self.board._conn
        if conn.closed or conn.broken:
            raise self._lost("the worker's PostgreSQL session ended")
        try:
            found = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
                "granted AND classid::bigint = %s AND objid::bigint = %s AND "
                "objsubid = 2 AND pid = pg_backend_pid()",
                (WORKER_NAMESPACE, self.key & 0xFFFFFFFF),
            ).fetchone()
        except psycopg.Error as exc:
            raise self._lost(
                "the worker's PostgreSQL session ended (terminated, or the server "
                f"restarted): {str(exc).strip().splitlines()[0] if str(exc) else exc}"
            ) from exc
        if found is None or not found[0]:
            raise self._lost("the worker's advisory lock was released")

    @property
    def session_gone(self) -> bool:
        """Whether this process knows its session ended."""
        conn = self.board._conn
        return self.lost is not None or conn.closed or conn.broken

    def claim(self, n: int) -> dict[str, set[Key]]:
        """Claim up to ``n`` offered items of the release in force, atomically."""
        self.check()
        epoch = self.board.epoch()
        rows = self.board._execute(
            "claiming work",
            _CLAIM,
            {"me": self.name, "run": self.board.run, "epoch": epoch, "n": n},
        )
        claimed: dict[str, set[Key]] = {kind: set() for kind in KINDS}
        for kind, task, rollout, attempt in rows:
            claimed[kind].add((task, rollout, attempt))
        return claimed

    def heard(self, rows_recorded: int) -> None:
        """Note that the worker lives and how many rows it recorded."""
        self.board._execute(
            "noting the worker",
            f"UPDATE {SCHEMA}.workers SET last_heard = now(), rows_recorded = %s "
            "WHERE run = %s AND worker = %s",
            (rows_recorded, self.board.run, self.name),
        )

    def settle(
        self, finished: dict[str, set[Key]], unfinished: dict[str, set[Key]]
    ) -> None:
        """A batch ended: finished claims done, the rest offered again."""
        self.board.settle(self.name, finished=finished, unfinished=unfinished)

    def leave(self, state: str) -> None:
        """Note how the worker ended and release its lock (its session stays)."""
        if self.session_gone:
            return
        try:
            self.board.settle(self.name, finished={}, unfinished={}, state=state)
            self.board._execute(
                "releasing the worker's lock",
                "SELECT pg_advisory_unlock(%s::int4, %s::int4)",
                (WORKER_NAMESPACE, self.key),
            )
        except StorageError:
            return  # its session ended: the server released the lock
