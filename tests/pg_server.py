"""The PostgreSQL server the tests use (SC-6): a real one, never a mock.

In order: the server ``ROLLOUT_LEDGER_TEST_PG`` names; else the machine's
local server (``postgresql://postgres@127.0.0.1:5432/test``) when it answers;
else a throwaway server this test session starts from the installed binaries
(``initdb`` and ``pg_ctl``, found on ``PATH`` or under
``/usr/lib/postgresql/*/bin``) in a temporary folder, on a free port, stopped
when the session ends. As root, the throwaway server runs as the ``postgres``
user (PostgreSQL refuses to run as root).

Each test works in a database of its own on that server (``PgDatabases``):
the store's SQL names one fixed schema, so a database is what keeps two test
sessions on one server (two branches' suites, a benchmark) from seeing each
other's runs. A session migrates one template database; each test gets a copy
(``CREATE DATABASE ... TEMPLATE``, tens of milliseconds), dropped afterwards.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from tests.prerequisites import unavailable

__all__ = [
    "DATABASE_PREFIX",
    "PG_DEFAULT",
    "PG_ENV",
    "PgDatabases",
    "TemporaryServer",
    "database_url",
    "find_binaries",
    "pg_conninfo",
    "require_server",
]

PG_ENV = "ROLLOUT_LEDGER_TEST_PG"
PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"
#: Every database the tests create starts with this, so a leftover (of a
#: session that was killed) is easy to find and drop by hand.
DATABASE_PREFIX = "rollout_ledger_test_"

_chosen: str | None = None


def answers(conninfo: str) -> bool:
    """Whether a server accepts a connection at ``conninfo``."""
    try:
        psycopg.connect(conninfo, connect_timeout=3).close()
    except psycopg.OperationalError:
        return False
    return True


def find_binaries() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, if PostgreSQL is installed."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class TemporaryServer:
    """A PostgreSQL server in a temporary folder, for one test session."""

    def __init__(self, binaries: Path) -> None:
        self.binaries = binaries
        self.folder = Path(tempfile.mkdtemp(prefix="rollout-ledger-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self._user: str | None = None
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            self._user = "postgres"
            entry = pwd.getpwnam(self._user)
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)

    def _run(self, *args: str) -> None:
        command = [str(self.binaries / args[0]), *args[1:]]
        if self._user is not None:
            command = ["runuser", "-u", self._user, "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> str:
        """Create the cluster, start it, create database ``test``; its URL."""
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust")
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1"
        log = str(self.folder / "server.log")
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start"
        )
        atexit.register(self.stop)
        url = f"postgresql://postgres@127.0.0.1:{self.port}"
        with psycopg.connect(f"{url}/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE test")
        return f"{url}/test"

    def stop(self) -> None:
        """Stop the server and remove its folder (idempotent)."""
        if self.data.exists():
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)


def pg_conninfo() -> str:
    """The test server's conninfo, starting a throwaway server when needed."""
    global _chosen
    if _chosen is not None:
        return _chosen
    if os.environ.get(PG_ENV):
        _chosen = os.environ[PG_ENV]
    elif answers(PG_DEFAULT):
        _chosen = PG_DEFAULT
    else:
        binaries = find_binaries()
        if binaries is None:
            _chosen = PG_DEFAULT  # nothing to start: the tests say so
        else:
            try:
                _chosen = TemporaryServer(binaries).start()
            except (subprocess.SubprocessError, OSError, KeyError, psycopg.Error):
                _chosen = PG_DEFAULT
    return _chosen


def require_server(conninfo: str, *, environ: Mapping[str, str] = os.environ) -> None:
    """Fail in CI, skip elsewhere, when no PostgreSQL server answers (SC-6)."""
    try:
        psycopg.connect(conninfo, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        parts = psycopg.conninfo.conninfo_to_dict(conninfo)  # shown without password
        where = (
            f"{parts.get('host', '')}:{parts.get('port', 5432)}/{parts.get('dbname')}"
        )
        unavailable(
            f"no PostgreSQL server answers at {where} "
            f"({str(exc).strip().splitlines()[0]}); start it (`pg_ctlcluster "
            "--skip-systemctl-redirect $(ls /etc/postgresql) main start`) or point "
            f"{PG_ENV} at your own server",
            environ=environ,
        )


def database_url(conninfo: str, name: str) -> str:
    """The server's URL ``conninfo`` naming database ``name`` instead."""
    parts = urlsplit(conninfo)
    return urlunsplit(parts._replace(path=f"/{name}"))


def _name_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


class PgDatabases:
    """The databases of one test session: a migrated template, a copy per test."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.template = f"{DATABASE_PREFIX}template_{uuid.uuid4().hex[:12]}"
        self._admin: psycopg.Connection[Any] | None = None

    def start(self) -> PgDatabases:
        """Create the template database and migrate it; ``unavailable`` if refused."""
        from tests.internals import migrate  # the store's schema, as a run finds it

        try:
            self._admin = psycopg.connect(self.server, autocommit=True)
            self._execute("CREATE DATABASE {}", self.template)
        except psycopg.Error as exc:
            self.close()
            unavailable(
                f"cannot create a test database ({str(exc).strip().splitlines()[0]});"
                f" the tests need a PostgreSQL user with CREATEDB (see {PG_ENV})"
            )
        # Closed again at once: a template must have no session when copied.
        with psycopg.connect(self.url(self.template), autocommit=True) as conn:
            migrate(conn)
        return self

    def url(self, name: str) -> str:
        return database_url(self.server, name)

    def create(self) -> str:
        """A new database, a copy of the template; its URL."""
        name = f"{DATABASE_PREFIX}{uuid.uuid4().hex[:16]}"
        self._execute("CREATE DATABASE {} TEMPLATE {}", name, self.template)
        return self.url(name)

    def drop(self, url: str) -> None:
        """Drop a database, ending any session left in it (a killed worker's)."""
        self._execute("DROP DATABASE IF EXISTS {} WITH (FORCE)", _name_of(url))

    def close(self) -> None:
        """Drop the template and close the admin connection (idempotent)."""
        if self._admin is None:
            return
        with contextlib.suppress(psycopg.Error):
            self.drop(self.url(self.template))
        self._admin.close()
        self._admin = None

    def _execute(self, statement: str, *names: str) -> None:
        assert self._admin is not None, "PgDatabases.start() first"
        query = sql.SQL(statement).format(*(sql.Identifier(n) for n in names))
        self._admin.execute(query)
