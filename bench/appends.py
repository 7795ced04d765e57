"""P-1 and P-2: durable single appends and group commit, against raw sqlite3.

Both sides append the same encoded bodies to a ``ledger.db`` made by
``Ledger.create`` (same schema, index, WAL and ``synchronous=FULL``); the raw
side gets its rows, hashes included, computed before the clock starts.
"""

from __future__ import annotations

import itertools
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from bench.context import Context, Measured
from bench.manifest import BenchManifest
from bench.sizes import GROUP
from ledger.clock import Clock
from ledger.events import Event, chain_hash, decode_body, kind_of
from ledger.paths import RunPaths
from ledger.run.ledger import Ledger
from ledger.run.lock import RunLock

__all__ = [
    "INSERT",
    "fresh_run",
    "p1_baseline",
    "p1_ours",
    "p2_baseline",
    "p2_ours",
    "raw_connection",
    "raw_rate",
    "raw_rows",
    "split",
    "stream_bodies",
]

INSERT = (
    "INSERT INTO events(seq, kind, at, actor, body, prev_hash, hash) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
RawRow = tuple[int, str, str, str, bytes, bytes, bytes]
T = TypeVar("T")


def fresh_run(folder: Path, *, rollouts: int = 4) -> Path:
    """A new run of ``rollouts`` small inputs under ``folder``; returns its OUT."""
    out = folder / "rollouts.jsonl"
    rows = [
        {"_ng_task_index": i // 4, "_ng_rollout_index": i % 4, "q": f"q{i}"}
        for i in range(rollouts)
    ]
    with RunLock(out) as lock:
        Ledger.create(out, BenchManifest(rows), rows, lock=lock).close()
    return out


def stream_bodies(path: Path, count: int) -> list[bytes]:
    """The first ``count`` encoded bodies of a stream file (only those are read)."""
    with path.open("rb") as lines:
        return [line.rstrip(b"\n") for line in itertools.islice(lines, count)]


def raw_rows(db: Path, bodies: Sequence[bytes], *, seed: int) -> list[RawRow]:
    """The rows the ledger would store for ``bodies`` (chained on the head)."""
    with sqlite3.connect(db) as conn:
        seq, prev = conn.execute(
            "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1"
        ).fetchone()
    conn.close()
    clock = Clock(seed=seed)
    rows: list[RawRow] = []
    for body in bodies:
        seq += 1
        kind, at = kind_of(decode_body(body)), clock.now()
        digest = chain_hash(prev, seq, kind, at, "collector", body)
        rows.append((seq, kind, at, "collector", body, prev, digest))
        prev = digest
    return rows


def raw_connection(db: Path) -> sqlite3.Connection:
    """A plain connection with the ledger's durability (WAL is in the file)."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA synchronous=FULL")
    return conn


def _append_rate(out: Path, batches: Sequence[Sequence[Event]]) -> float:
    with RunLock(out) as lock, Ledger.open(out, lock=lock) as led:
        started = time.perf_counter()
        for batch in batches:
            if len(batch) == 1:
                led.append(batch[0])  # P-1: the single-event call itself
            else:
                led.append_many(batch)
        elapsed = time.perf_counter() - started
    return sum(len(b) for b in batches) / elapsed


def raw_rate(db: Path, batches: Sequence[Sequence[RawRow]]) -> float:
    """Rows per second inserted raw, one transaction per batch."""
    conn = raw_connection(db)
    started = time.perf_counter()
    for batch in batches:
        conn.execute("BEGIN")
        if len(batch) == 1:
            conn.execute(INSERT, batch[0])  # P-1: one INSERT per transaction
        else:
            conn.executemany(INSERT, batch)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return sum(len(b) for b in batches) / elapsed


def split(items: Sequence[T], size: int) -> list[Sequence[T]]:
    """``items`` in consecutive slices of ``size``."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def _ours(ctx: Context, count: int, size: int) -> Measured:
    assert ctx.data.stream is not None
    bodies = [decode_body(b) for b in stream_bodies(ctx.data.stream, count)]
    out = fresh_run(ctx.scratch)
    rate = _append_rate(out, split(bodies, size))
    return Measured(rate, f"{count} events, {size} per transaction")


def _baseline(ctx: Context, count: int, size: int) -> Measured:
    assert ctx.data.stream is not None
    db = RunPaths.of(fresh_run(ctx.scratch)).db
    rows = raw_rows(db, stream_bodies(ctx.data.stream, count), seed=ctx.seed)
    rate = raw_rate(db, split(rows, size))
    return Measured(rate, f"{count} rows, {size} per transaction")


def p1_ours(ctx: Context) -> Measured:
    """P-1: ``Ledger.append`` one event per call (a durable commit each)."""
    return _ours(ctx, ctx.sizes.single_appends, 1)


def p1_baseline(ctx: Context) -> Measured:
    """P-1 baseline: one raw INSERT per transaction, ``synchronous=FULL``."""
    return _baseline(ctx, ctx.sizes.single_appends, 1)


def p2_ours(ctx: Context) -> Measured:
    """P-2: ``Ledger.append_many`` of GROUP events per call."""
    return _ours(ctx, ctx.sizes.group_batches * GROUP, GROUP)


def p2_baseline(ctx: Context) -> Measured:
    """P-2 baseline: raw ``executemany`` of GROUP rows per FULL transaction."""
    return _baseline(ctx, ctx.sizes.group_batches * GROUP, GROUP)
