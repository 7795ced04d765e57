"""SC-2, SC-3 and group commit on PostgreSQL: a worker's AsyncRecorder.

Hundreds of asyncio tasks of one worker reserve and record through
``Ledger.recorder()`` on a run on PostgreSQL: calls that arrive together share
one transaction, each row is stored with its event, and the run verifies.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ledger import ConfigError, Ledger, RunLock, RunManifest
from ledger.pg_schema import SCHEMA
from projections import replay, resume, selected_results, verify
from tests.pg_server import pg_conninfo
from tests.test_identity import nemo_configuration
from tests.test_store_contract import drop_run, pg_admin

__all__ = ["pg_admin"]


@pytest.fixture
def url(pg_admin: psycopg.Connection[Any]) -> Iterator[str]:
    run = f"async-{uuid.uuid4().hex[:10]}"
    yield f"{pg_conninfo()}?run={run}"
    drop_run(pg_admin, run)


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
