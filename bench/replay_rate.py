"""P-3's baseline: raw read, chain check, msgspec decode and a count per key.

The same ``events`` table ours replays (the replay log's ``ledger.db``), read
with a plain read-only connection; each row's hash recomputed from the one
before and its header and body and compared with the stored one (R-5: every
command checks what it reads, so the baseline does the same checking, issue
30), its body decoded into its tagged-union Struct with the ledger's decoder,
and counted per ``(task, rollout)``. The check is written as plainly as the
rest (``chain_hash`` per row), not ours' batched one.
"""

from __future__ import annotations

import sqlite3
import time

from bench.context import Context, Measured
from ledger.events import ZERO_HASH, chain_hash, decode_body
from ledger.paths import RunPaths

__all__ = ["p3_baseline"]

_FETCH = 1024


def _count_per_key(conn: sqlite3.Connection) -> tuple[int, dict[object, int]]:
    counts: dict[object, int] = {}
    events = 0
    prev = ZERO_HASH
    cursor = conn.execute(
        "SELECT seq, kind, at, actor, body, prev_hash, hash FROM events ORDER BY seq"
    )
    while batch := cursor.fetchmany(_FETCH):
        for seq, kind, at, actor, body, stored_prev, digest in batch:
            if stored_prev != prev or chain_hash(prev, seq, kind, at, actor, body) != (
                digest
            ):
                raise RuntimeError(f"the chain breaks at seq {seq}")
            prev = digest
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
