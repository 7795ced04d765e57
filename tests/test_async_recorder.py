"""AsyncRecorder (api.md): concurrent asyncio tasks, group commit, isolated errors."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ledger import ConfigError, Ledger, RunLock
from ledger.events import AttemptReserved, AttemptsReleased, ResultSaved
from tests.conftest import MinimalManifest, input_rows


def make(
    tmp_path: Path, tasks: int, rollouts: int
) -> tuple[RunLock, Ledger, list[dict]]:
    out = tmp_path / "rollouts.jsonl"
    rows = input_rows(tasks, rollouts)
    lock = RunLock(out).acquire()
    led = Ledger.create(out, MinimalManifest(rows), rows, lock=lock)
    keys = tuple((r["_ng_task_index"], r["_ng_rollout_index"], 0) for r in rows)
    led.append(AttemptsReleased(dispatch=keys))
    return lock, led, rows


def test_hundreds_of_tasks_each_reserve_and_record_once(tmp_path: Path) -> None:
    lock, led, rows = make(tmp_path, 100, 4)

    async def collect() -> int:
        rec = led.recorder(max_batch=64, max_wait_ms=2)

        async def one(row: dict[str, Any]) -> None:
            await rec.reserve(row)
            await asyncio.sleep(0)  # the "request"
            await rec.record({**row, "reward": 1.0, "padding": "x" * 1000})

        await asyncio.gather(*(one(row) for row in rows))
        return rec.commits

    commits = asyncio.run(collect())
    led.close()
    with Ledger.open(led.paths.out) as reader:
        events = list(reader.events())
        assert reader.verify_chain() is None
    reserved = Counter(
        (e.body.task, e.body.rollout)
        for e in events
        if isinstance(e.body, AttemptReserved)
    )
    saved = Counter(
        (e.body.task, e.body.rollout) for e in events if isinstance(e.body, ResultSaved)
    )
    assert set(reserved.values()) == {1}
    assert set(saved.values()) == {1}
    assert len(reserved) == len(saved) == 400
    assert commits < 800 / 4  # calls that arrived together shared transactions
    assert len(led.paths.out.read_bytes().splitlines()) == 400
    lock.release()


def test_an_error_in_one_call_fails_that_call_only(tmp_path: Path) -> None:
    lock, led, rows = make(tmp_path, 2, 2)

    async def collect() -> list[Any]:
        rec = led.recorder()
        calls = [rec.reserve(dict(row)) for row in rows]
        calls.append(rec.reserve({**rows[0], "_ng_attempt_index": 7}))  # not released
        calls.append(rec.record({**rows[1], "reward": 1.0}))  # not reserved yet
        return await asyncio.gather(*calls, return_exceptions=True)

    results = asyncio.run(collect())
    assert results[:4] == [0, 0, 0, 0]
    assert isinstance(results[4], ConfigError)
    # The record was checked in the same batch as the reservations before it,
    # which the batch had already staged, so it went through with them.
    assert results[5] is None
    kinds = Counter(e.kind for e in led.events())
    assert kinds["attempt_reserved"] == 4
    assert kinds["result_saved"] == 1
    led.close()
    lock.release()


def test_each_call_returns_once_its_event_is_durable(tmp_path: Path) -> None:
    lock, led, rows = make(tmp_path, 1, 3)

    assert rows  # the loop below checks each

    async def collect() -> None:
        rec = led.recorder(max_wait_ms=0)
        for row in rows:
            await rec.reserve(row)
            with Ledger.open(led.paths.out) as reader:  # another connection sees it
                last = list(reader.events())[-1].body
            assert isinstance(last, AttemptReserved)
            assert (last.task, last.rollout) == (
                row["_ng_task_index"], row["_ng_rollout_index"],
            )  # fmt: skip

    asyncio.run(collect())
    led.close()
    lock.release()


def test_max_batch_must_be_positive(tmp_path: Path) -> None:
    lock, led, _ = make(tmp_path, 1, 1)
    with pytest.raises(ValueError, match="max_batch"):
        led.recorder(max_batch=0)
    led.close()
    lock.release()
