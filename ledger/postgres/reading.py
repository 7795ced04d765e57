"""Reading a run's log on PostgreSQL (EV-13): pages, kinds, the newest events.

``PostgresStore``'s reads, kept apart from its appends: every read is a
separate statement (never a cursor held across the caller's iteration), so an
append made meanwhile commits at once, and the log read is one consistent,
growing prefix.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

import psycopg

from ledger.postgres.schema import SCHEMA
from ledger.store.chain import fold_triples
from ledger.store.port import EventRow

__all__ = ["COLUMNS", "StoreReadingMixin", "StoredRow"]

COLUMNS = "seq, kind, at, actor, body, prev_hash, hash"
_COLUMNS = COLUMNS
# A loose index scan: one probe per kind instead of a scan of the run (EV-12's
# open reads the stored kinds of runs with millions of events).
_DISTINCT_KINDS = f"""
WITH RECURSIVE k(kind) AS (
    (SELECT kind FROM {SCHEMA}.events WHERE run = %(run)s ORDER BY kind LIMIT 1)
    UNION ALL
    SELECT (SELECT e.kind FROM {SCHEMA}.events e
            WHERE e.run = %(run)s AND e.kind > k.kind ORDER BY e.kind LIMIT 1)
    FROM k WHERE k.kind IS NOT NULL
)
SELECT kind FROM k WHERE kind IS NOT NULL"""


class StoredRow(NamedTuple):
    """One stored outcome row: its event's seq, place, sha256 (hex) and bytes."""

    seq: int
    file: str
    offset: int
    sha256: str
    data: bytes


class StoreReadingMixin:
    """``PostgresStore``'s reads of the run's events and rows."""

    _conn: psycopg.Connection[Any]
    run: str
    read_batch: int
    kind_window: int
    path: str

    def _guard(self, doing: str) -> AbstractContextManager[None]:
        raise NotImplementedError

    def head(self) -> tuple[int, bytes]:
        raise NotImplementedError

    def rows(
        self, from_seq: int = 1, *, kinds: Sequence[str] = ()
    ) -> Iterator[EventRow]:
        """Stored rows in ``seq`` order from ``from_seq``, streamed (EV-13)."""
        if kinds:
            for row in self._kind_windows(list(kinds), from_seq):
                yield EventRow(*row)
            return
        sql = (
            f"SELECT {_COLUMNS} FROM {SCHEMA}.events WHERE run = %s AND seq >= %s "
            "ORDER BY seq"
        )
        for row in self._pages(sql, [], from_seq, "reading events"):
            yield EventRow(*row)

    def rows_at(self, seqs: Sequence[int]) -> Iterator[EventRow]:
        """The stored rows of ``seqs`` (those that exist), in ``seq`` order."""
        wanted = sorted(set(seqs))
        sql = (
            f"SELECT {_COLUMNS} FROM {SCHEMA}.events WHERE run = %s "
            "AND seq = ANY(%s) ORDER BY seq"
        )
        for start in range(0, len(wanted), self.read_batch):
            chunk = wanted[start : start + self.read_batch]
            with self._guard("reading events"), self._conn.cursor(binary=True) as cur:
                page = cur.execute(sql, [self.run, chunk]).fetchall()
            for row in page:
                yield EventRow(*row)

    def fold_rows(
        self, from_seq: int = 1, *, after: bytes | None = None
    ) -> Iterator[tuple[int, str, bytes]]:
        """``(seq, kind, body)`` of the rows from ``from_seq``: replay's read.

        With ``after``, checked as the chain that follows it (R-5).
        """
        return fold_triples(
            self.rows(from_seq), where=self.path, from_seq=from_seq, after=after
        )

    def _kind_windows(
        self, kinds: list[str], from_seq: int
    ) -> Iterator[tuple[Any, ...]]:
        # Some kinds, by windows of seq: each statement reads at most
        # ``kind_window`` events. A LIMIT page of "seq >= N AND kind = ANY"
        # made the server fetch and sort every later match for each page
        # (quadratic in the log's length on a large run without statistics).
        sql = (
            f"SELECT {_COLUMNS} FROM {SCHEMA}.events WHERE run = %s AND seq >= %s "
            "AND seq < %s AND kind = ANY(%s) ORDER BY seq"
        )
        start, head = from_seq, self.head()[0]
        while start <= head:
            stop = start + self.kind_window
            with self._guard("reading events"), self._conn.cursor(binary=True) as cur:
                page = cur.execute(sql, [self.run, start, stop, kinds]).fetchall()
            yield from page
            start = stop
            if start > head:  # the log may have grown while it was read
                head = self.head()[0]

    def row_bytes(self, from_seq: int = 1) -> Iterator[StoredRow]:
        """Stored outcome rows in ``seq`` order from ``from_seq``, streamed (SC-2)."""
        sql = (
            f'SELECT seq, file, "offset", sha256, data FROM {SCHEMA}.rows '
            "WHERE run = %s AND seq >= %s ORDER BY seq"
        )
        for row in self._pages(sql, [], from_seq, "reading rows"):
            yield StoredRow(*row)

    def _pages(
        self, sql: str, extra: list[object], from_seq: int, doing: str
    ) -> Iterator[tuple[Any, ...]]:
        """``sql`` (parameters: run, from seq, ``extra``) read page by page."""
        # EV-13 by keyset pages rather than a server-side cursor: a cursor
        # would hold a transaction open on the store's connection while the
        # caller iterates, and an append made meanwhile would commit only when
        # the read ends. The log is append-only, so pages read in separate
        # statements are one consistent, growing prefix.
        start = from_seq
        while True:
            with self._guard(doing), self._conn.cursor(binary=True) as cur:
                page = cur.execute(
                    f"{sql} LIMIT %s", [self.run, start, *extra, self.read_batch]
                ).fetchall()
            yield from page
            if len(page) < self.read_batch:
                return
            start = int(page[-1][0]) + 1

    def distinct_kinds(self) -> set[str]:
        """Every kind stored in the run's log (cheap: one index probe per kind)."""
        with self._guard("reading event kinds"):
            rows = self._conn.execute(_DISTINCT_KINDS, {"run": self.run}).fetchall()
        return {row[0] for row in rows}

    def last_rows(self, count: int) -> list[EventRow]:
        """The newest ``count`` rows, oldest first."""
        doing = "reading the newest events"
        with self._guard(doing), self._conn.cursor(binary=True) as cur:
            rows = cur.execute(
                f"SELECT {_COLUMNS} FROM {SCHEMA}.events WHERE run = %s "
                "ORDER BY seq DESC LIMIT %s",
                (self.run, count),
            ).fetchall()
        return [EventRow(*row) for row in reversed(rows)]

    def hash_at(self, seq: int) -> bytes | None:
        """The stored hash of event ``seq``, if there is one."""
        with self._guard("reading a hash"), self._conn.cursor(binary=True) as cur:
            row = cur.execute(
                f"SELECT hash FROM {SCHEMA}.events WHERE run = %s AND seq = %s",
                (self.run, seq),
            ).fetchone()
        return None if row is None else bytes(row[0])
