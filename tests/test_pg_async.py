"""SC-2, SC-3 and group commit on PostgreSQL: a worker's AsyncRecorder.

Hundreds of asyncio tasks of one worker reserve and record through
``Ledger.recorder()`` on a run on PostgreSQL: calls that arrive together share
one transaction, each row is stored with its event, and the run verifies.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ledger import ConfigError, Ledger, RunLock, RunManifest
from projections import replay, resume, selected_results, verify
from tests.internals import SCHEMA
from tests.test_identity import nemo_configuration


@pytest.fixture
def url(pg_url: str) -> str:
    """A run URL in the test's own database."""
    return f"{pg_url}?run=async-{uuid.uuid4().hex[:10]}"


def _rows(tasks: int) -> list[dict[str, Any]]:
    _, _, template = nemo_configuration()
    return [
        {**template[0], "_ng_task_index": task, "_ng_rollout_index": rollout}
        for task in range(tasks)
        for rollout in range(2)
    ]


def test_sc_3_a_worker_s_async_recorder_group_commits_rows_with_events(
    url: str, pg_admin: psycopg.Connection[Any], tmp_path: Path
) -> None:
    config, servers, _ = nemo_configuration()
    rows = _rows(150)
    with RunLock(url) as lock:
        manifest = RunManifest.create(None, rows, config, servers)
        with Ledger.create(url, manifest, rows, lock=lock) as coordinator:
            plan = resume(coordinator, config, servers).plan
        with Ledger.open(url) as worker:
            assert worker.role == "worker"
            rec = worker.recorder(max_batch=64, max_wait_ms=5)

            async def one(row: dict[str, Any]) -> None:
                await rec.reserve(row)
                await rec.record({**row, "reward": 1.0, "response": {"output": []}})

            async def everything() -> None:
                await asyncio.gather(*(one(dict(row)) for row in plan.dispatch))

            asyncio.run(everything())
            assert rec.commits < 2 * len(plan.dispatch) / 4  # calls shared commits
            with pytest.raises(ConfigError, match="already reserved"):
                worker.reserve(dict(plan.dispatch[0]))
            state = replay(worker)
            assert len(list(selected_results(worker, state))) == len(rows)
            assert verify(worker) == []
    stored = pg_admin.execute(
        f'SELECT count(*), count(DISTINCT (file, "offset")) FROM {SCHEMA}.rows '
        "WHERE run = %s",
        (url.rsplit("=", 1)[1],),
    ).fetchone()
    assert stored == (len(rows), len(rows))  # one row per outcome, none overlapping


def test_sc_3_an_attempt_another_worker_took_fails_alone_in_its_batch(
    url: str,
) -> None:
    """The database refuses the batch; the recorder learns why and commits the rest."""
    config, servers, _ = nemo_configuration()
    rows = _rows(4)
    with RunLock(url) as lock:
        manifest = RunManifest.create(None, rows, config, servers)
        with Ledger.create(url, manifest, rows, lock=lock) as coordinator:
            plan = resume(coordinator, config, servers).plan
        with Ledger.open(url) as late, Ledger.open(url) as early:
            taken, free = dict(plan.dispatch[0]), dict(plan.dispatch[1])
            early.reserve(dict(taken))  # `late`'s index does not know it yet
            rec = late.recorder(max_batch=8, max_wait_ms=20)

            async def both() -> list[Any]:
                return await asyncio.gather(
                    rec.reserve(taken), rec.reserve(free), return_exceptions=True
                )

            outcome = asyncio.run(both())
            assert isinstance(outcome[0], ConfigError)
            assert "already reserved" in str(outcome[0])
            assert outcome[1] == free["_ng_attempt_index"]
            reserved = [
                (e.body.task, e.body.rollout)
                for e in late.events()
                if e.kind == "attempt_reserved"
            ]
            key = (free["_ng_task_index"], free["_ng_rollout_index"])
            assert reserved.count(key) == 1
            assert len(reserved) == 2


def test_sc_2_results_read_in_chunks_equal_the_exported_files(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CLI-12 on PostgreSQL reads rows a chunk per query; any chunk size, same rows."""
    # replan_module, results_module: the modules, not the functions projections
    # re-exports under those names.
    from tests.internals import export_files, replan_module, results_module

    config, servers, _ = nemo_configuration()
    rows = _rows(20)
    with RunLock(url) as lock:
        manifest = RunManifest.create(None, rows, config, servers)
        with Ledger.create(url, manifest, rows, lock=lock) as coordinator:
            plan = resume(coordinator, config, servers).plan
            for row in plan.dispatch[::2]:  # half complete, half pending
                coordinator.reserve(row)
                coordinator.record({**row, "reward": 0.5, "response": {"output": []}})
            copy = export_files(coordinator, tmp_path / "copy")
            expected = list(
                selected_results(coordinator, replay(coordinator), all=True)
            )
    assert len(expected) == len(rows)
    for chunk in (1, 7, 512):
        monkeypatch.setattr(results_module, "_CHUNK", chunk)
        monkeypatch.setattr(replan_module, "_READ_CHUNK", chunk)
        with Ledger.open(url) as led:
            assert list(selected_results(led, replay(led), all=True)) == expected
            again = resume(led, config, servers, dry_run=True).plan.dispatch
        with Ledger.open(copy.out) as files:
            assert list(selected_results(files, replay(files), all=True)) == expected
            assert resume(files, config, servers, dry_run=True).plan.dispatch == again
