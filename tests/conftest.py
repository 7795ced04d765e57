"""Shared test fixtures: hypothesis profiles and a minimal run factory."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings

from ledger import Clock, Ledger, RunLock, publish_json
from tests.internals import encode_rows

if TYPE_CHECKING:  # tests.helpers_history imports this module
    import psycopg

    from tests.helpers_history import History
    from tests.pg_server import PgDatabases

# Hypothesis profiles (house style): "dev" is fast and the default; CI sets
# ROLLOUT_LEDGER_HYPOTHESIS=ci for a more thorough run.
settings.register_profile(
    "dev", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("ROLLOUT_LEDGER_HYPOTHESIS", "dev"))


@pytest.fixture(autouse=True)
def _help_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Help as wide as with no ``COLUMNS`` and no terminal (80), whatever the
    shell running the tests exports; a test that wants a width sets it."""
    monkeypatch.delenv("COLUMNS", raising=False)


class MinimalManifest:
    """The least a ``Ledger.create`` test needs of a manifest (ID-30 fields)."""

    def __init__(
        self,
        rows: list[dict[str, Any]],
        *,
        config_digest: str = "c" * 64,
        max_rollout_attempts: int = 3,
    ):
        self.materialized_digest = hashlib.sha256(encode_rows(rows)).hexdigest()
        self.identity: Mapping[str, Any] | None = {"model": "m"}
        self._fields = {
            "run_id": "0" * 32,
            "created_at": "2026-01-01T00:00:00.000000Z",
            "materialized_digest": self.materialized_digest,
            "config_digest": config_digest,
            "max_rollout_attempts": max_rollout_attempts,
        }

    def model_dump(self, *, mode: str = "json") -> dict[str, Any]:
        return dict(self._fields)

    def write(self, path: Path) -> None:
        publish_json(path, self._fields)
        publish_json(path.with_name("identity.json"), self.identity)


def input_rows(tasks: int = 3, rollouts: int = 2) -> list[dict[str, Any]]:
    """Materialized input rows shaped like NeMo Gym's."""
    return [
        {
            "_ng_task_index": task,
            "_ng_rollout_index": rollout,
            "agent_ref": {"name": "simple_agent"},
            "responses_create_params": {
                "input": [{"role": "user", "content": f"q{task}"}]
            },
        }
        for task in range(tasks)
        for rollout in range(rollouts)
    ]


RunFactory = Callable[..., Ledger]


@pytest.fixture
def make_run(tmp_path: Path) -> Iterator[RunFactory]:
    """Create a run under ``tmp_path`` and return its writer ``Ledger`` (lock held)."""
    opened: list[tuple[RunLock, Ledger]] = []

    def factory(name: str = "rollouts.jsonl", **options: Any) -> Ledger:
        rows = input_rows()
        lock = RunLock(tmp_path / name).acquire()
        led = Ledger.create(
            tmp_path / name,
            MinimalManifest(rows),
            rows,
            lock=lock,
            clock=options.pop("clock", Clock(seed=7)),
            **options,
        )
        opened.append((lock, led))
        return led

    yield factory
    for lock, led in opened:
        led.close()
        lock.release()


@pytest.fixture
def history(tmp_path: Path) -> Iterator[Callable[..., History]]:
    """Make temporary runs (``History``); each is closed after the test.

    The decision tests (``tests/test_decide*.py``) share it.
    """
    from tests.helpers_history import History  # it imports this module

    made: list[History] = []

    def factory(**options: Any) -> History:
        folder = tmp_path / f"run{len(made)}"
        folder.mkdir()
        made.append(History(folder, **options))
        return made[-1]

    yield factory
    for run in made:
        run.close()


# -- PostgreSQL: a database of each test's own (SC-6) ------------------------------
# Imported in the fixtures: the crash harnesses' child processes import this
# module, and need neither psycopg nor a server.


@pytest.fixture(scope="session")
def pg_databases() -> Iterator[PgDatabases]:
    """The test server's databases of this session (``tests/pg_server.py``).

    Skipped without a server, or failed under ``CI=true``.
    """
    from tests.pg_server import PgDatabases, pg_conninfo, require_server

    require_server(pg_conninfo())
    databases = PgDatabases(pg_conninfo()).start()
    yield databases
    databases.close()


@pytest.fixture
def pg_url(pg_databases: PgDatabases) -> Iterator[str]:
    """The URL of a new database of this test's own, migrated; dropped afterwards.

    Runs made in it are seen by no other test and no other test session, so a
    test may count every run there is.
    """
    url = pg_databases.create()
    yield url
    pg_databases.drop(url)


@pytest.fixture
def pg_admin(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection to the test's own database, to look behind the store."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn
