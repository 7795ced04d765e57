"""The run lock on PostgreSQL (SC-4): a session advisory lock named by the run.

The coordinator holds it while it resumes, gates and releases plans; the
server releases it when the holding session ends, however the process died.
The advisory lock alone is what excludes; the ``run_locks`` row only tells the
next would-be coordinator who holds it (host, pid, start), as the lock file
does for the file-based run lock (EV-40).

A session can end under a live coordinator (``pg_terminate_backend``, a
server restart, a dropped connection): the lock is then free while the
coordinator believes it holds it. Each acquirer therefore bumps the run's
fencing epoch (``run_fences``), and a coordinator's append checks, in its own
transaction, that the epoch is still its own and that its lock session still
holds the lock (:func:`fence_check`); otherwise it raises ``LockLost`` and
appends nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import psycopg

from ledger.errors import LockHeld, LockLost, Refused
from ledger.postgres.schema import LOCK_NAMESPACE, SCHEMA, translate

__all__ = [
    "AdvisoryRunLock",
    "acquire_run_lock",
    "current_holder",
    "fenced_head",
    "run_lock_key",
]

_MINE = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
    "AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 2 "
    "AND pid = pg_backend_pid()"
)
_HOLDER = (
    f"SELECT l.pid, r.host, r.pid, r.started FROM pg_locks l "
    f"LEFT JOIN {SCHEMA}.run_locks r ON r.run = %s AND r.backend_pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.classid::bigint = %s "
    "AND l.objid::bigint = %s AND l.objsubid = 2"
)


def _gone(conn: psycopg.Connection[Any]) -> bool:
    return conn.closed or conn.broken


def run_lock_key(run: str) -> int:
    """The second advisory-lock key of ``run`` (the first is ``LOCK_NAMESPACE``)."""
    key = int.from_bytes(hashlib.sha256(run.encode()).digest()[:4], "big", signed=True)
    return key or 1  # 0 is the migrations' lock (ledger.postgres.schema.migrate)


def _unsigned(key: int) -> int:
    return key & 0xFFFFFFFF  # pg_locks shows int4 keys as oid (unsigned)


def _where(conn: psycopg.Connection[Any], run: str) -> str:
    info = conn.info
    return f"postgresql://{info.user}@{info.host}:{info.port}/{info.dbname}?run={run}"


class AdvisoryRunLock:
    """A held run lock: the session of ``conn`` owns it until ``release`` or death."""

    def __init__(self, conn: psycopg.Connection[Any], run: str, epoch: int) -> None:
        self._conn = conn
        self.run = run
        self.where = _where(conn, run)
        self.held = True
        #: The fencing epoch this holder took (``run_fences``).
        self.epoch = epoch
        #: The server process of the lock session (``pg_locks.pid``).
        self.backend_pid = conn.info.backend_pid
        #: What happened, once an append found the lock lost (then always).
        self.lost: str | None = None

    @property
    def session_gone(self) -> bool:
        """Whether this process already knows the lock session ended."""
        return _gone(self._conn)

    def lost_error(self) -> LockLost:
        """The ``LockLost`` of this holder (``lost`` must be set)."""
        return LockLost(
            self.where,
            what=self.lost or "the PostgreSQL session holding the run lock ended",
            advice="check that no other coordinator runs (`rollout-ledger doctor "
            "URL` names the holder), then continue with `rollout-ledger resume "
            "URL`; workers may keep recording what was released",
        )

    def release(self) -> None:
        """Release the lock and forget its holder row (idempotent)."""
        if not self.held or self.session_gone:
            self.held = False
            return
        try:
            with self._conn.transaction(), self._conn.cursor() as cur:
                cur.execute(
                    f"DELETE FROM {SCHEMA}.run_locks "
                    "WHERE run = %s AND backend_pid = pg_backend_pid()",
                    (self.run,),
                )
                cur.execute(
                    "SELECT pg_advisory_unlock(%s::int4, %s::int4)",
                    (LOCK_NAMESPACE, run_lock_key(self.run)),
                )
        except psycopg.Error as exc:
            if _gone(self._conn):
                return  # the server released the lock with its session
            raise translate(exc, self.where, "releasing the run lock") from exc
        finally:
            self.held = False

    def __enter__(self) -> AdvisoryRunLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def acquire_run_lock(conn: psycopg.Connection[Any], run: str) -> AdvisoryRunLock:
    """Take ``run``'s advisory lock on ``conn``'s session, or raise ``LockHeld``.

    ``conn`` must be in autocommit mode: the lock belongs to the session, and
    the holder row must be visible to others at once.
    """
    where = _where(conn, run)
    if not conn.autocommit:
        raise Refused(f"{where}: the run lock needs an autocommit connection")
    key = run_lock_key(run)
    try:
        with conn.cursor() as cur:
            _refuse_nesting(cur, key, where)
            cur.execute(
                "SELECT pg_try_advisory_lock(%s::int4, %s::int4)",
                (LOCK_NAMESPACE, key),
            )
            row = cur.fetchone()
            if row is None or not row[0]:
                raise _held(cur, run, key, where)
    except psycopg.Error as exc:
        raise translate(exc, where, "taking the run lock") from exc
    try:
        epoch = _record_holder(conn, run)
    except BaseException:
        _unlock_quietly(conn, key)
        raise
    return AdvisoryRunLock(conn, run, epoch)


#: What a coordinator's append locks and reads with the run's head: the
#: fencing epoch (FOR SHARE: an acquirer's bump waits for this transaction)
#: and whether the holder's lock session still holds the advisory lock.
_FENCED_HEAD = (
    f"SELECT r.head_seq, r.head_hash, r.release_epoch, f.epoch, EXISTS ("
    "SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted "
    "AND l.classid::bigint = %s AND l.objid::bigint = %s AND l.objsubid = 2 "
    f"AND l.pid = %s) FROM {SCHEMA}.runs r JOIN {SCHEMA}.run_fences f "
    "ON f.run = r.run WHERE r.run = %s FOR UPDATE OF r FOR SHARE OF f"
)


def _fenced_head_params(lock: AdvisoryRunLock) -> tuple[int, int, int, str]:
    """The parameters of :data:`_FENCED_HEAD` for ``lock``."""
    return (
        LOCK_NAMESPACE,
        _unsigned(run_lock_key(lock.run)),
        lock.backend_pid,
        lock.run,
    )


def _fence_check(lock: AdvisoryRunLock, epoch: int | None, holds: bool) -> None:
    """Raise ``LockLost`` unless ``lock`` still owns the run (SC-4).

    ``epoch`` and ``holds`` are what :data:`_FENCED_HEAD` read in the append's
    transaction (``epoch`` ``None``: no fence row). Once lost, always lost.
    """
    if lock.lost is None:
        if not lock.held:
            lock.lost = "this process released the run lock"
        elif epoch is None:
            lock.lost = "the run lock's fencing record was deleted"
        elif epoch != lock.epoch:
            lock.lost = (
                "another coordinator took the run lock after this one's lock "
                "session ended"
            )
        elif not holds:
            lock.lost = (
                "the PostgreSQL session holding the run lock ended (terminated, "
                "or the server restarted), which released the lock"
            )
    if lock.lost is not None:
        raise lock.lost_error()


def fenced_head(
    cur: psycopg.Cursor[Any], lock: AdvisoryRunLock
) -> tuple[Any, ...] | None:
    """Lock the run's head for an append fenced on ``lock`` (SC-3, SC-4).

    ``(head_seq, head_hash, release_epoch)``, or ``None`` when the run is not
    in the database. The fence is read in the append's own transaction, with
    the head's row lock, so it cannot pass and then be overtaken: ``LockLost``
    unless ``lock`` still owns the run.
    """
    if lock.lost is not None:
        raise lock.lost_error()
    found = cur.execute(_FENCED_HEAD, _fenced_head_params(lock)).fetchone()
    if (
        found is None
        and (
            cur.execute(f"SELECT 1 FROM {SCHEMA}.runs WHERE run = %s", (lock.run,))
        ).fetchone()
        is None
    ):
        return None
    _fence_check(
        lock,
        None if found is None else int(found[3]),
        found is not None and bool(found[4]),
    )
    assert found is not None  # without its fence row, _fence_check raised
    return tuple(found[:3])


def current_holder(conn: psycopg.Connection[Any], run: str) -> str | None:
    """Who holds ``run``'s lock (pid, host, start), or ``None`` when it is free."""
    key = _unsigned(run_lock_key(run))
    try:
        with conn.cursor() as cur:
            cur.execute(_HOLDER, (run, LOCK_NAMESPACE, key))
            row = cur.fetchone()
    except psycopg.Error as exc:
        raise translate(exc, _where(conn, run), "reading the run lock") from exc
    if row is None:
        return None
    backend, host, pid, started = row
    if host is None:
        return f"PostgreSQL backend pid {backend}"
    return f"pid {pid} on host {host} since {started}"


def _refuse_nesting(cur: psycopg.Cursor[Any], key: int, where: str) -> None:
    # EV-41: locks do not nest. Advisory locks would stack in one session, so
    # a second acquire there must fail as it does for the file lock.
    cur.execute(_MINE, (LOCK_NAMESPACE, _unsigned(key)))
    row = cur.fetchone()
    if row is not None and row[0]:
        raise LockHeld(
            where,
            holder=f"this session (pid {os.getpid()})",
            detail="locks do not nest: acquire once and pass the lock down",
        )


def _held(cur: psycopg.Cursor[Any], run: str, key: int, where: str) -> LockHeld:
    cur.execute(_HOLDER, (run, LOCK_NAMESPACE, _unsigned(key)))
    row = cur.fetchone()
    if row is None:
        return LockHeld(where, detail="it was released a moment ago; try again")
    backend, host, pid, started = row
    if host is None:
        return LockHeld(
            where,
            holder=f"PostgreSQL backend pid {backend}",
            detail="its host and pid are not recorded yet",
        )
    return LockHeld(where, holder=f"pid {pid} on host {host} since {started}")


def _unlock_quietly(conn: psycopg.Connection[Any], key: int) -> None:
    # The error that brought us here is the one to report, not this one's.
    with contextlib.suppress(psycopg.Error):
        conn.execute(
            "SELECT pg_advisory_unlock(%s::int4, %s::int4)", (LOCK_NAMESPACE, key)
        )


def _record_holder(conn: psycopg.Connection[Any], run: str) -> int:
    """Record who holds the lock and bump the run's fencing epoch; the epoch."""
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        with conn.transaction(), conn.cursor() as cur:
            # Waits for a former holder's append in flight (it holds the row
            # FOR SHARE); every append of that holder after this one fails.
            row = cur.execute(
                f"INSERT INTO {SCHEMA}.run_fences AS f (run, epoch) VALUES (%s, 1) "
                "ON CONFLICT (run) DO UPDATE SET epoch = f.epoch + 1 "
                "RETURNING epoch",
                (run,),
            ).fetchone()
            cur.execute(
                f"INSERT INTO {SCHEMA}.run_locks (run, host, pid, started, "
                "backend_pid) VALUES (%s, %s, %s, %s, pg_backend_pid()) "
                "ON CONFLICT (run) DO UPDATE SET host = excluded.host, "
                "pid = excluded.pid, started = excluded.started, "
                "backend_pid = excluded.backend_pid",
                (run, socket.gethostname(), os.getpid(), started),
            )
    except psycopg.Error as exc:
        raise translate(exc, _where(conn, run), "recording the run lock") from exc
    assert row is not None  # INSERT ... RETURNING returns its row
    return int(row[0])
