"""The PostgreSQL server the tests use (SC-6): a real one, never a mock.

In order: the server ``ROLLOUT_LEDGER_TEST_PG`` names; else the machine's
local server (``postgresql://postgres@127.0.0.1:5432/test``) when it answers;
else a throwaway server this test session starts from the installed binaries
(``initdb`` and ``pg_ctl``, found on ``PATH`` or under
``/usr/lib/postgresql/*/bin``) in a temporary folder, on a free port, stopped
when the session ends. As root, the throwaway server runs as the ``postgres``
user (PostgreSQL refuses to run as root).
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
from pathlib import Path

import psycopg

__all__ = ["PG_DEFAULT", "PG_ENV", "TemporaryServer", "find_binaries", "pg_conninfo"]

PG_ENV = "ROLLOUT_LEDGER_TEST_PG"
PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"

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
