"""Reading a run's ``ledger.db``: the store's read half (EV-13, R-5).

``SQLiteStore`` takes these methods from ``SQLiteReads``; a method reads
through ``self._conn`` and translates every ``sqlite3`` error at ``_guard``,
so callers never see ``sqlite3`` types.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from ledger.store.chain import checked_fold_rows
from ledger.store.port import EventRow
from ledger.store.sqlite.schema import blob, translate

__all__ = ["SQLiteReads"]

_READ_BATCH = 1024
_FIRST_BATCH = 8
_SELECT = "SELECT seq, kind, at, actor, body, prev_hash, hash FROM events"
#: Replay's checked read: the text columns as their stored bytes (P-3).
_CHAIN_SELECT = (
    "SELECT seq, CAST(kind AS BLOB), body, CAST(at AS BLOB), CAST(actor AS BLOB), "
    "prev_hash, hash FROM events WHERE seq >= ? ORDER BY seq"
)


#: The distinct kinds, each found by one lookup in the kind index.
_DISTINCT_KINDS = (
    "WITH RECURSIVE k(kind) AS ("
    "SELECT MIN(kind) FROM events "
    "UNION ALL "
    "SELECT (SELECT MIN(kind) FROM events WHERE kind > k.kind) FROM k "
    "WHERE k.kind IS NOT NULL"
    ") SELECT kind FROM k"
)


class SQLiteReads:
    """The reads of one ``ledger.db`` connection (mixed into ``SQLiteStore``)."""

    _conn: sqlite3.Connection
    path: Path

    @contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise translate(exc, self.path, doing) from exc

    def rows(
        self, from_seq: int = 1, *, kinds: Sequence[str] = ()
    ) -> Iterator[EventRow]:
        """Stored rows in ``seq`` order from ``from_seq``, streamed (EV-13)."""
        sql = f"{_SELECT} WHERE seq >= ?"
        params: list[object] = [from_seq]
        if kinds:
            sql += f" AND kind IN ({', '.join('?' * len(kinds))})"
            params.extend(kinds)
        with self._guard("reading events"):
            cursor = self._conn.execute(sql + " ORDER BY seq", params)
            # A small first batch: a caller that wants the event at a seq
            # (``next(...)``) must not pay for 1024 rows (P-4's re-judge items).
            size = _FIRST_BATCH
            while batch := cursor.fetchmany(size):
                size = _READ_BATCH
                for row in batch:
                    yield self._event_row(row)

    def rows_at(self, seqs: Sequence[int]) -> Iterator[EventRow]:
        """The stored rows of ``seqs`` (those that exist), in ``seq`` order."""
        wanted = sorted(set(seqs))
        with self._guard("reading events"):
            for start in range(0, len(wanted), _READ_BATCH):
                chunk = wanted[start : start + _READ_BATCH]
                marks = ", ".join("?" * len(chunk))
                cursor = self._conn.execute(
                    f"{_SELECT} WHERE seq IN ({marks}) ORDER BY seq", chunk
                )
                for row in cursor.fetchall():
                    yield self._event_row(row)

    def fold_rows(
        self, from_seq: int = 1, *, after: bytes | None = None
    ) -> Iterator[tuple[int, str, bytes]]:
        """``(seq, kind, body)`` of the rows from ``from_seq``, streamed.

        Replay's read (P-3): only the columns every fold step uses, as SQLite
        gives them (each text column read costs a text conversion). With
        ``after``, the hash of the event before ``from_seq``, the rows are
        checked as the chain that follows it (R-5): ``CorruptLedger`` names
        the first seq that is not its next link.
        """
        if after is None:
            return self._fold_rows(from_seq)
        with self._guard("reading events"):
            cursor = self._conn.execute(_CHAIN_SELECT, (from_seq,))
        batches = iter(partial(self._fetch, cursor), [])
        return checked_fold_rows(
            batches, where=str(self.path), from_seq=from_seq, prev_hash=after
        )

    def _fetch(self, cursor: sqlite3.Cursor) -> list[tuple[Any, ...]]:
        with self._guard("reading events"):
            return cursor.fetchmany(_READ_BATCH)

    def _fold_rows(self, from_seq: int) -> Iterator[tuple[int, str, bytes]]:
        with self._guard("reading events"):
            cursor = self._conn.execute(
                "SELECT seq, kind, body FROM events WHERE seq >= ? ORDER BY seq",
                (from_seq,),
            )
            while batch := cursor.fetchmany(_READ_BATCH):
                for row in batch:
                    if type(row[2]) is not bytes:  # TEXT where a BLOB belongs
                        blob(row[2], self.path, row[0], "body")
                yield from batch

    def _event_row(self, row: tuple[object, ...]) -> EventRow:
        # BLOB columns only: a body or hash stored as TEXT is damage.
        if not (type(row[4]) is type(row[5]) is type(row[6]) is bytes):
            for index, column in ((4, "body"), (5, "prev_hash"), (6, "hash")):
                blob(row[index], self.path, row[0], column)
        return EventRow._make(row)

    def distinct_kinds(self) -> set[str]:
        """Every kind stored in the log (cheap: read from the kind index).

        A skip scan: one index lookup per distinct kind, not one step per
        event (P-8: an open costs the same at a million events).
        """
        with self._guard("reading event kinds"):
            return {
                row[0]
                for row in self._conn.execute(_DISTINCT_KINDS)
                if row[0] is not None
            }

    def last_rows(self, count: int) -> list[EventRow]:
        """The newest ``count`` rows, oldest first."""
        with self._guard("reading the newest events"):
            rows = self._conn.execute(
                "SELECT seq, kind, at, actor, body, prev_hash, hash FROM events "
                "ORDER BY seq DESC LIMIT ?",
                (count,),
            ).fetchall()
        return [self._event_row(row) for row in reversed(rows)]

    def hash_at(self, seq: int) -> bytes | None:
        """The stored hash of event ``seq``, if there is one."""
        with self._guard("reading a hash"):
            row = self._conn.execute(
                "SELECT hash FROM events WHERE seq = ?", (seq,)
            ).fetchone()
        return None if row is None else blob(row[0], self.path, seq, "hash")
