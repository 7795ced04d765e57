"""P-3's baseline: raw read, msgspec decode and a count per key over the log.

The same ``events`` table ours replays (the replay log's ``ledger.db``), read
with a plain read-only connection, each body decoded into its tagged-union
Struct with the ledger's decoder, and counted per ``(task, rollout)``.
"""

from __future__ import annotations

import sqlite3
import time

from bench.context import Context, Measured
from ledger.events import decode_body
from ledger.paths import RunPaths

__all__ = ["p3_baseline"]

_FETCH = 1024


def _count_per_key(conn: sqlite3.Connection) -> tuple[int, dict[object, int]]:
    counts: dict[object, int] = {}
    events = 0
    cursor = conn.execute("SELECT seq, kind, body FROM events ORDER BY seq")
    while batch := cursor.fetchmany(_FETCH):
        for _seq, _kind, body in batch:
            event = decode_body(body)
            events += 1
            key = (getattr(event, "task", None), getattr(event, "rollout", None))
            if key[0] is not None:
                counts[key] = counts.get(key, 0) + 1
    return events, counts


def p3_baseline(ctx: Context) -> Measured:
    """P-3 baseline: events per second of read + decode + count per key."""
    assert ctx.data.replay_log is not None
    db = RunPaths.of(ctx.data.replay_log).db
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    started = time.perf_counter()
    events, counts = _count_per_key(conn)
    elapsed = time.perf_counter() - started
    conn.close()
    return Measured(events / elapsed, f"{events} events, {len(counts)} keys")
