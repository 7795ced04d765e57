"""Workers of a run on PostgreSQL (SC-3, SC-4; issue 29): seats, offers, claims.

The coordinator (the holder of the run lock) releases attempts in the log, as
``resume`` and ``replan`` do, and *offers* each released attempt and
re-judgment in the ``work`` table. A worker claims a batch of offered work in
one statement (``FOR UPDATE SKIP LOCKED``, then a conditional update: a row a
worker claimed is never claimed by another while it holds it), runs its
collector on it, and records each row through the usual path, which reserves
the attempt with its outcome in one transaction (SC-3: reserved once,
checked by the database against the release in force).

Each worker holds a session advisory lock of its own (``WORKER_NAMESPACE``
and a key derived from the run and the worker's name) on the very session it
records through. When its process or node dies, the server ends that session
and releases the lock; the coordinator sees the lock gone (``pg_locks``) and
offers that worker's claimed work without an outcome again. A worker whose
session was lost cannot record anything more: its appends went through that
session.

None of this is in the log: the log says what was released, reserved and
recorded; these tables say who works on what now, for the coordinator and
``status``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Any

import msgspec
import psycopg

from ledger.errors import ConfigError
from ledger.postgres.schema import SCHEMA, WORKER_NAMESPACE, translate

__all__ = ["KINDS", "Key", "WorkBoard", "WorkerInfo", "worker_lock_key"]

Key = tuple[int, int, int]
KINDS = ("dispatch", "rejudge")

_EPOCH = f"SELECT release_epoch FROM {SCHEMA}.runs WHERE run = %s"
_LOCKED = (
    "EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted "
    "AND l.classid::bigint = %s AND l.objid::bigint = (w.lock_key::bigint & "
    "4294967295) AND l.objsubid = 2 AND l.pid = w.backend_pid)"
)
_OFFER = f"""
INSERT INTO {SCHEMA}.work AS w (run, kind, task, rollout, attempt, epoch)
SELECT %(run)s, %(kind)s, k.task, k.rollout, k.attempt, %(epoch)s
FROM unnest(%(tasks)s::bigint[], %(rollouts)s::bigint[], %(attempts)s::bigint[])
    AS k(task, rollout, attempt)
ON CONFLICT (run, kind, task, rollout, attempt) DO UPDATE SET
    epoch = excluded.epoch, done = false,
    worker = CASE WHEN w.worker = ANY(%(keep)s) THEN w.worker END,
    claimed_at = CASE WHEN w.worker = ANY(%(keep)s) THEN w.claimed_at END
WHERE w.epoch < excluded.epoch"""
_WORKERS = f"""
SELECT w.worker, w.host, w.pid, w.started, w.last_heard, w.state, w.ended,
       w.rows_recorded, {_LOCKED} AS alive,
       (SELECT count(*) FROM {SCHEMA}.work k WHERE k.run = w.run
        AND k.worker = w.worker AND NOT k.done AND k.epoch = %s) AS holding,
       extract(epoch FROM now() - w.last_heard) AS quiet
FROM {SCHEMA}.workers w WHERE w.run = %s ORDER BY w.started, w.worker"""


def worker_lock_key(run: str, worker: str) -> int:
    """The second key of ``worker``'s advisory lock in ``run`` (int4, signed)."""
    digest = hashlib.sha256(f"{run}\0{worker}".encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


def _store(ledger: Any) -> Any:
    store = getattr(ledger, "_store", None)
    if store is None or not hasattr(store, "lock_holder"):
        raise ConfigError(
            f"{ledger.where} is kept in files: workers share a run kept in "
            "PostgreSQL (a postgresql://...?run=NAME URL)"
        )
    return store


def _stamp(value: datetime | None) -> str | None:
    return None if value is None else value.strftime("%Y-%m-%dT%H:%M:%SZ")


class WorkerInfo(msgspec.Struct, frozen=True):
    """One worker of a run as ``status`` shows it.

    ``alive``: its advisory lock is held (its session lives); ``holding``:
    the attempts and re-judgments it claimed in the release in force and has
    not finished; ``quiet``: seconds since it was last heard from.
    """

    worker: str
    host: str
    pid: int
    started: str
    last_heard: str
    state: str
    alive: bool
    rows_recorded: int
    holding: int
    quiet: float
    ended: str | None = None


class WorkBoard:
    """A run's work and workers, as its coordinator and ``status`` see them."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._conn: psycopg.Connection[Any] = store._conn
        self.run: str = store.run
        self.where: str = store.path

    @classmethod
    def of(cls, ledger: Any) -> WorkBoard:
        """The board of ``ledger``'s run (a run on PostgreSQL)."""
        return cls(_store(ledger))

    def _execute(self, doing: str, sql: str, params: Any) -> list[Any]:
        try:
            with self._conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall() if cur.description is not None else []
        except psycopg.Error as exc:
            raise translate(exc, self.where, doing) from exc

    def epoch(self) -> int:
        """The release epoch in force: the seq of the newest ``resume_started``."""
        found = self._execute("reading the release epoch", _EPOCH, (self.run,))
        return int(found[0][0]) if found else 0

    def coordinator(self) -> str | None:
        """Who holds the run lock (pid, host, start), or ``None``."""
        holder: str | None = self._store.lock_holder()
        return holder

    def offered(self) -> dict[str, set[Key]]:
        """The work offered in the release in force, by kind."""
        found = self._execute(
            "reading the offered work",
            f"SELECT kind, task, rollout, attempt FROM {SCHEMA}.work "
            f"WHERE run = %s AND epoch = ({_EPOCH})",
            (self.run, self.run),
        )
        offered: dict[str, set[Key]] = {kind: set() for kind in KINDS}
        for kind, task, rollout, attempt in found:
            offered[kind].add((task, rollout, attempt))
        return offered

    def offer(
        self,
        dispatch: Iterable[Key],
        rejudge: Iterable[Key],
        *,
        keep: Collection[str] = (),
    ) -> int:
        """Offer released work in the epoch in force; how many were offered anew.

        Work offered in an earlier epoch is offered again in this one; a
        claim of a worker in ``keep`` (the live ones) carries over.
        """
        offered = 0
        try:
            with self._conn.transaction(), self._conn.cursor() as cur:
                epoch_row = cur.execute(_EPOCH, (self.run,)).fetchone()
                epoch = 0 if epoch_row is None else int(epoch_row[0])
                for kind, keys in (("dispatch", dispatch), ("rejudge", rejudge)):
                    listed = sorted(set(keys))
                    if not listed:
                        continue
                    cur.execute(
                        _OFFER,
                        {
                            "run": self.run,
                            "kind": kind,
                            "epoch": epoch,
                            "tasks": [k[0] for k in listed],
                            "rollouts": [k[1] for k in listed],
                            "attempts": [k[2] for k in listed],
                            "keep": list(keep),
                        },
                    )
                    offered += max(cur.rowcount, 0)
        except psycopg.Error as exc:
            raise translate(exc, self.where, "offering work") from exc
        return offered

    def workers(self) -> list[WorkerInfo]:
        """Every worker the run has had, oldest first."""
        rows = self._execute(
            "reading the workers",
            _WORKERS,
            (WORKER_NAMESPACE, self.epoch(), self.run),
        )
        return [
            WorkerInfo(
                worker=row[0],
                host=row[1],
                pid=int(row[2]),
                started=_stamp(row[3]) or "",
                last_heard=_stamp(row[4]) or "",
                state=row[5],
                ended=_stamp(row[6]),
                rows_recorded=int(row[7]),
                alive=bool(row[8]),
                holding=int(row[9]),
                quiet=round(float(row[10]), 1),
            )
            for row in rows
        ]

    def dead(self) -> list[str]:
        """Workers still marked working whose advisory lock is gone."""
        rows = self._execute(
            "looking for workers that died",
            f"SELECT w.worker FROM {SCHEMA}.workers w WHERE w.run = %s "
            f"AND w.state = 'working' AND NOT {_LOCKED}",
            (self.run, WORKER_NAMESPACE),
        )
        return [row[0] for row in rows]

    def claims(self, worker: str) -> dict[str, set[Key]]:
        """What ``worker`` claimed and has not finished, in the epoch in force."""
        found = self._execute(
            "reading a worker's claims",
            f"SELECT kind, task, rollout, attempt FROM {SCHEMA}.work WHERE run = %s "
            f"AND worker = %s AND NOT done AND epoch = ({_EPOCH})",
            (self.run, worker, self.run),
        )
        claims: dict[str, set[Key]] = {kind: set() for kind in KINDS}
        for kind, task, rollout, attempt in found:
            claims[kind].add((task, rollout, attempt))
        return claims

    def settle(
        self,
        worker: str,
        *,
        finished: dict[str, set[Key]],
        unfinished: dict[str, set[Key]],
        state: str | None = None,
    ) -> None:
        """Mark ``worker``'s finished claims done and offer its unfinished again.

        ``state`` also ends the worker (``gone``: it died; ``done``, ...).
        """
        try:
            with self._conn.transaction(), self._conn.cursor() as cur:
                if state is not None:
                    cur.execute(
                        f"UPDATE {SCHEMA}.workers SET state = %s, ended = now() "
                        "WHERE run = %s AND worker = %s",
                        (state, self.run, worker),
                    )
                for done, keyed in ((True, finished), (False, unfinished)):
                    for kind, keys in keyed.items():
                        if keys:
                            self._settle(cur, worker, kind, sorted(keys), done=done)
        except psycopg.Error as exc:
            raise translate(exc, self.where, "settling a worker's claims") from exc

    def _settle(
        self,
        cur: psycopg.Cursor[Any],
        worker: str,
        kind: str,
        keys: list[Key],
        *,
        done: bool,
    ) -> None:
        change = (
            "done = true"
            if done
            else "worker = NULL, claimed_at = NULL"  # claimable again
        )
        cur.execute(
            f"UPDATE {SCHEMA}.work w SET {change} FROM unnest(%s::bigint[], "
            "%s::bigint[], %s::bigint[]) AS k(task, rollout, attempt) "
            "WHERE w.run = %s AND w.kind = %s AND w.worker = %s "
            "AND w.task = k.task AND w.rollout = k.rollout AND w.attempt = k.attempt",
            (
                [k[0] for k in keys],
                [k[1] for k in keys],
                [k[2] for k in keys],
                self.run,
                kind,
                worker,
            ),
        )
