"""The files of a run on PostgreSQL, kept in its tables (SC-2).

A run on PostgreSQL has no folder: its result rows and sidecar rows are in
``rows`` (stored with their events), its materialized inputs and any other
bytes of its files in ``file_bytes``, and its published files in
``published``. These are the statements that read and write them; every
function takes a connection or cursor of a ``PostgresStore`` and a run name.
A file is read back as the concatenation of its pieces in offset order, which
is how ``export --files`` rebuilds it byte for byte.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from ledger.postgres.schema import SCHEMA
from ledger.store.port import EventRow, NewRow

__all__ = [
    "StoreFilesMixin",
    "file_pieces",
    "pieces_at",
    "pieces_from",
    "put_file_bytes",
    "put_published",
    "read_file_ends",
    "read_published",
    "read_stem",
    "write_file_ends",
]

_PAGE = 2000
# Rows and other bytes of one file, in offset order, as one stream.
# Each side ordered and limited on its own index, then merged: one page reads
# ``limit`` index entries a side, whatever the plan's row estimates (a generic
# plan once sorted every piece after ``start`` for each page: O(n^2) at 1M).
_PIECES = f"""
SELECT "offset", data FROM (
    (SELECT "offset", data FROM {SCHEMA}.rows
        WHERE run = %(run)s AND file = %(file)s AND "offset" >= %(start)s
        ORDER BY "offset" LIMIT %(limit)s)
    UNION ALL
    (SELECT "offset", data FROM {SCHEMA}.file_bytes
        WHERE run = %(run)s AND file = %(file)s AND "offset" >= %(start)s
        ORDER BY "offset" LIMIT %(limit)s)
) pieces ORDER BY "offset" LIMIT %(limit)s"""


_PIECES_AT = f"""
SELECT k.i, p.data
FROM unnest(%(files)s::text[], %(offsets)s::bigint[]) WITH ORDINALITY
    AS k(file, "offset", i)
CROSS JOIN LATERAL (
    SELECT data FROM {SCHEMA}.rows r
        WHERE r.run = %(run)s AND r.file = k.file AND r."offset" = k."offset"
    UNION ALL
    SELECT data FROM {SCHEMA}.file_bytes b
        WHERE b.run = %(run)s AND b.file = k.file AND b."offset" = k."offset"
    LIMIT 1
) p"""


def pieces_at(
    conn: psycopg.Connection[Any], run: str, places: Sequence[tuple[str, int]]
) -> list[bytes | None]:
    """The piece starting at each ``(file, offset)`` (``None`` where none does)."""
    found: list[bytes | None] = [None] * len(places)
    if not places:
        return found
    params = {
        "run": run,
        "files": [file for file, _ in places],
        "offsets": [offset for _, offset in places],
    }
    with conn.cursor(binary=True) as cur:
        for position, data in cur.execute(_PIECES_AT, params).fetchall():
            found[int(position) - 1] = bytes(data)
    return found


_INSERT_ROW = (
    f'INSERT INTO {SCHEMA}.rows (run, seq, file, "offset", sha256, data) '
    "VALUES (%s, %s, %s, %s, %s, %b)"
)


def insert_rows(
    cur: psycopg.Cursor[Any],
    run: str,
    chained: Sequence[EventRow],
    rows: Sequence[NewRow | None],
) -> None:
    """Store each outcome row with its event's seq, in the appending transaction."""
    params = [
        (run, event.seq, row.file, row.offset, _sha256(row.data), row.data)
        for event, row in zip(chained, rows, strict=False)
        if row is not None
    ]
    if params:
        cur.executemany(_INSERT_ROW, params)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_file_ends(cur: psycopg.Cursor[Any], run: str) -> dict[str, list[int]]:
    """``{file: [end offset, lines]}`` of the run's files (locked with the head)."""
    cur.execute(
        f"SELECT file, end_offset, lines FROM {SCHEMA}.file_ends WHERE run = %s",
        (run,),
    )
    return {row[0]: [int(row[1]), int(row[2])] for row in cur.fetchall()}


def write_file_ends(
    cur: psycopg.Cursor[Any], run: str, ends: dict[str, list[int]]
) -> None:
    """Store the files' ends, as the appending transaction advanced them."""
    if not ends:
        return
    cur.executemany(
        f"INSERT INTO {SCHEMA}.file_ends (run, file, end_offset, lines) "
        "VALUES (%s, %s, %s, %s) ON CONFLICT (run, file) DO UPDATE SET "
        "end_offset = excluded.end_offset, lines = excluded.lines",
        [(run, file, end[0], end[1]) for file, end in sorted(ends.items())],
    )


def put_file_bytes(
    conn: psycopg.Connection[Any],
    run: str,
    file: str,
    pieces: Iterable[tuple[int, bytes]],
) -> None:
    """Store ``(offset, bytes)`` pieces of ``file`` that are no event's row."""
    with conn.cursor() as cur:
        batch: list[tuple[str, str, int, bytes]] = []
        for offset, data in pieces:
            batch.append((run, file, offset, data))
            if len(batch) >= _PAGE:
                _insert_pieces(cur, batch)
                batch = []
        if batch:
            _insert_pieces(cur, batch)


def _insert_pieces(
    cur: psycopg.Cursor[Any], batch: list[tuple[str, str, int, bytes]]
) -> None:
    cur.executemany(
        f'INSERT INTO {SCHEMA}.file_bytes (run, file, "offset", data) '
        "VALUES (%s, %s, %s, %b)",
        batch,
    )


def pieces_from(
    conn: psycopg.Connection[Any], run: str, file: str, start: int, limit: int
) -> list[tuple[int, bytes]]:
    """Up to ``limit`` pieces of ``file`` from ``start`` on, in offset order."""
    with conn.cursor(binary=True) as cur:
        page = cur.execute(
            _PIECES, {"run": run, "file": file, "start": start, "limit": limit}
        ).fetchall()
    return [(int(offset), bytes(data)) for offset, data in page]


def file_pieces(
    conn: psycopg.Connection[Any], run: str, file: str
) -> Iterator[tuple[int, bytes]]:
    """``(offset, bytes)`` of every piece of ``file``, in offset order, paged."""
    start = 0
    while True:
        page = pieces_from(conn, run, file, start, _PAGE)
        yield from page
        if len(page) < _PAGE:
            return
        start = page[-1][0] + 1


def read_stem(conn: psycopg.Connection[Any], run: str) -> str:
    """The stem the run's file names derive from (the run name unless imported)."""
    row = conn.execute(
        f"SELECT stem FROM {SCHEMA}.runs WHERE run = %s", (run,)
    ).fetchone()
    return str(row[0]) if row is not None and row[0] else run


def read_published(conn: psycopg.Connection[Any], run: str, name: str) -> bytes | None:
    """A published file's bytes, or ``None`` when it was never published."""
    with conn.cursor(binary=True) as cur:
        row = cur.execute(
            f"SELECT data FROM {SCHEMA}.published WHERE run = %s AND name = %s",
            (run, name),
        ).fetchone()
    return None if row is None else bytes(row[0])


def put_published(
    conn: psycopg.Connection[Any], run: str, name: str, data: bytes | None
) -> None:
    """Replace (or, with ``None``, remove) a published file, atomically (EV-31)."""
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(
            f"DELETE FROM {SCHEMA}.published WHERE run = %s AND name = %s",
            (run, name),
        )
        if data is not None:
            cur.execute(
                f"INSERT INTO {SCHEMA}.published (run, name, data) VALUES (%s, %s, %b)",
                (run, name, data),
            )


class StoreFilesMixin:
    """``PostgresStore``'s methods for the run's files (SC-2)."""

    _conn: psycopg.Connection[Any]
    run: str

    def _guard(self, doing: str) -> AbstractContextManager[None]:
        raise NotImplementedError

    # -- the run's files (SC-2) ----------------------------------------------

    def stem(self) -> str:
        """The stem the run's file names derive from."""
        with self._guard("reading the run"):
            return read_stem(self._conn, self.run)

    def put_file_bytes(self, file: str, pieces: Iterable[tuple[int, bytes]]) -> None:
        """Store pieces of ``file`` that are no event's row (inside a transaction)."""
        with self._guard("storing file bytes"):
            put_file_bytes(self._conn, self.run, file, pieces)

    def pieces_at(self, places: Sequence[tuple[str, int]]) -> list[bytes | None]:
        """The stored piece at each ``(file, offset)``, in one query."""
        with self._guard("reading rows"):
            return pieces_at(self._conn, self.run, places)

    def file_pieces(self, file: str) -> Iterator[tuple[int, bytes]]:
        """Every stored piece of ``file`` in offset order, paged."""
        with self._guard("reading a file"):
            yield from file_pieces(self._conn, self.run, file)

    def set_file_ends(self, ends: dict[str, list[int]]) -> None:
        """Store the files' ends (an import, inside its transaction)."""
        with self._guard("storing file ends"), self._conn.cursor() as cur:
            write_file_ends(cur, self.run, ends)

    def read_published(self, name: str) -> bytes | None:
        """A published file of the run, or ``None``."""
        with self._guard("reading a published file"):
            return read_published(self._conn, self.run, name)

    def put_published(self, name: str, data: bytes | None) -> None:
        """Replace a published file of the run (EV-31: whole, in one transaction)."""
        with self._guard("publishing"):
            put_published(self._conn, self.run, name, data)
