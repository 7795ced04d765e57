"""Each PostgreSQL test works in a database of its own (``pg_url``, tests/conftest.py).

The store's SQL names one fixed schema, so two test sessions on one server
(two branches' suites at once, or a suite and a benchmark) would see each
other's runs in a shared database. Here: two sessions' databases, and two
pytest processes running the same test at once, each see their own run only,
even under the same run name.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.internals import SCHEMA, STORE_ENV, PostgresStore, resolve_run
from tests.pg_server import PgDatabases, pg_conninfo

ROOT = Path(__file__).resolve().parents[1]
RUN = "same-run-name"


def runs_in(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [run for (run,) in conn.execute(f"SELECT run FROM {SCHEMA}.runs")]


@pytest.fixture
def other_session(pg_databases: PgDatabases) -> Iterator[PgDatabases]:
    """The databases of a second test session on the same server."""
    other = PgDatabases(pg_conninfo()).start()
    yield other
    other.close()


def test_two_sessions_databases_hold_their_own_runs_only(
    pg_url: str, other_session: PgDatabases
) -> None:
    other_url = other_session.create()
    try:
        assert other_url != pg_url
        for url in (pg_url, other_url):  # the same name twice: no clash
            PostgresStore.create(resolve_run(RUN, environ={STORE_ENV: url})).close()
        assert runs_in(pg_url) == [RUN]
        assert runs_in(other_url) == [RUN]
    finally:
        other_session.drop(other_url)
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(other_url, connect_timeout=3).close()  # dropped
    assert runs_in(pg_url) == [RUN]


# The same test, run by two pytest processes at once. Each creates its run,
# waits until the other has created its own, then lists the runs it sees; no
# database is dropped before both have looked.
PROBE = textwrap.dedent(
    """
    import os, time
    from pathlib import Path

    from tests.internals import SCHEMA, STORE_ENV, PostgresStore, resolve_run

    def wait_for(path):
        deadline = time.monotonic() + 120
        while not path.exists():
            assert time.monotonic() < deadline, f"the other session wrote no {path}"
            time.sleep(0.05)

    def test_probe(pg_url, pg_admin):
        folder, run = Path(os.environ["PROBE_DIR"]), os.environ["PROBE_RUN"]
        me, other = os.environ["PROBE_ME"], os.environ["PROBE_OTHER"]
        PostgresStore.create(resolve_run(run, environ={STORE_ENV: pg_url})).close()
        (folder / f"{me}.created").touch()
        wait_for(folder / f"{other}.created")
        runs = [run for (run,) in pg_admin.execute(f"SELECT run FROM {SCHEMA}.runs")]
        (folder / f"{me}.checked").write_text(pg_url)
        wait_for(folder / f"{other}.checked")
        assert runs == [run]
    """
)


@pytest.mark.slow
def test_the_same_test_in_two_pytest_processes_at_once(
    pg_url: str, tmp_path: Path
) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    # The suite's fixtures, without its configuration: the probe is no test of it.
    command += ["-p", "tests.conftest", "-c", os.devnull, "--rootdir", str(tmp_path)]
    sessions = [
        subprocess.Popen(
            [*command, str(probe)],
            cwd=ROOT,  # where ``tests`` imports from
            env={**os.environ, "PROBE_DIR": str(tmp_path), "PROBE_RUN": RUN}
            | {"PROBE_ME": me, "PROBE_OTHER": other},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for me, other in (("a", "b"), ("b", "a"))
    ]
    outputs = [session.communicate(timeout=300)[0] for session in sessions]
    for session, output in zip(sessions, outputs, strict=True):
        assert session.returncode == 0, output
        assert "1 passed" in output, output
    databases = {(tmp_path / f"{me}.checked").read_text() for me in ("a", "b")}
    assert len(databases) == 2  # a database each
    assert pg_url not in databases  # and neither is this test's
