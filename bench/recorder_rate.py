"""P-7: ``AsyncRecorder`` with 256 concurrent tasks, against raw group commit.

Ours: 256 asyncio tasks each take a ~1 KB row, ``await rec.reserve(row)`` and
``await rec.record(row)`` (durable; rows written and fsynced first). The
baseline inserts the same events (bodies computed as the recorder would) with
raw ``executemany`` of GROUP rows per FULL transaction. Rate: events per second.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from pathlib import Path
from typing import Any

from bench.appends import fresh_run, raw_rate, raw_rows, split
from bench.context import Context, Measured
from bench.manifest import RUN_ID, BenchManifest
from bench.mirror import Ends, reserved_event, saved_event
from bench.rowpool import compact_pool
from bench.runs import recorder_rows
from bench.sizes import CONCURRENCY, GROUP
from ledger.events import AttemptsReleased, encode_body
from ledger.paths import RunPaths
from ledger.run.ledger import Ledger
from ledger.run.lock import RunLock

__all__ = ["create_p7_run", "p7_baseline", "p7_ours", "p7_rows", "recorder_stream"]


def p7_rows(ctx: Context) -> list[dict[str, Any]]:
    pool = compact_pool(seed=ctx.seed)
    return recorder_rows(ctx.sizes.recorder_rollouts, pool, seed=ctx.seed)


def recorder_stream(count: int, *, seed: int) -> list[bytes]:
    """The bodies ours appends for P-7's rows: each reservation, then each save."""
    rows = recorder_rows(count, compact_pool(seed=seed), seed=seed)
    names = RunPaths.of("rollouts.jsonl")
    ends = Ends()
    bodies = [encode_body(reserved_event(row, RUN_ID)) for row in rows]
    for row in rows:
        saved = saved_event(row, ends, out=names.out.name, sidecar=names.sidecar.name)
        if saved is not None:
            bodies.append(encode_body(saved.event))
    return bodies


_KEYS = ("_ng_task_index", "_ng_rollout_index")
_OUTPUTS = ("response", "reward", "mask_sample")


def _is_input(key: str) -> bool:
    return key in _KEYS or not (key.startswith("_ng_") or key in _OUTPUTS)


def create_p7_run(folder: Path, rows: list[dict[str, Any]]) -> Path:
    out = folder / "rollouts.jsonl"
    inputs = [{k: v for k, v in row.items() if _is_input(k)} for row in rows]
    with RunLock(out) as lock:
        Ledger.create(out, BenchManifest(inputs), inputs, lock=lock).close()
    return out


async def _collect(led: Ledger, rows: list[dict[str, Any]]) -> int:
    rec = led.recorder()
    waiting = deque(rows)

    async def worker() -> None:
        while waiting:
            row = waiting.popleft()
            await rec.reserve(row)
            await rec.record(row)

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return rec.commits


def p7_ours(ctx: Context) -> Measured:
    """P-7: events per second through ``AsyncRecorder`` (reserve, then record)."""
    rows = p7_rows(ctx)
    out = create_p7_run(ctx.scratch, rows)
    keys = tuple((r["_ng_task_index"], r["_ng_rollout_index"], 0) for r in rows)
    with RunLock(out) as lock, Ledger.open(out, lock=lock) as led:
        led.append(AttemptsReleased(dispatch=keys))  # REC-3: release before reserve
        first = led.head()[0]
        started = time.perf_counter()
        commits = asyncio.run(_collect(led, rows))
        elapsed = time.perf_counter() - started
        events = led.head()[0] - first
    detail = f"{events} events from {len(rows)} rows, {commits} commits"
    return Measured(events / elapsed, detail)


def p7_baseline(ctx: Context) -> Measured:
    """P-7 baseline: the same events, raw ``executemany`` of GROUP per FULL txn."""
    assert ctx.data.recorder_events is not None
    bodies = ctx.data.recorder_events.read_bytes().splitlines()
    db = RunPaths.of(fresh_run(ctx.scratch)).db
    rows = raw_rows(db, bodies, seed=ctx.seed)
    rate = raw_rate(db, split(rows, GROUP))
    return Measured(rate, f"{len(rows)} rows, {GROUP} per transaction")
