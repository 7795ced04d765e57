"""SC-6: without a local server, the tests start one from the installed binaries."""

from __future__ import annotations

import psycopg
import pytest

from tests.internals import PG_SCHEMA_VERSION, SCHEMA, migrate
from tests.pg_server import TemporaryServer, answers, find_binaries


def test_sc_6_a_throwaway_server_starts_from_the_installed_binaries() -> None:
    """The fallback the suite uses when nothing answers at 127.0.0.1:5432."""
    binaries = find_binaries()
    if binaries is None:
        pytest.skip("PostgreSQL's initdb and pg_ctl are not installed here")
    server = TemporaryServer(binaries)
    try:
        url = server.start()
        assert answers(url)
        with psycopg.connect(url, autocommit=True) as conn:
            migrate(conn)
            version = conn.execute(
                f"SELECT value FROM {SCHEMA}.meta WHERE key = 'schema_version'"
            ).fetchone()
        assert version == (str(PG_SCHEMA_VERSION),)
    finally:
        server.stop()
    assert not answers(url)
    assert not server.folder.exists()
