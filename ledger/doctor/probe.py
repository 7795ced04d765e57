"""The second process of ``doctor`` (EV-42): ``python -m ledger.doctor.probe``.

``flock PATH`` prints ``locked`` when an exclusive, non-blocking flock on PATH
succeeds (and releases it at once), else ``blocked``; ``head OUT`` prints the
head seq a read-only open of the run sees; ``wal DB`` prints the value a
read-only open of ``doctor``'s scratch WAL database sees.
"""

from __future__ import annotations

import fcntl
import os
import sys

__all__ = ["main"]


def _flock(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return "blocked"
    finally:
        os.close(fd)  # closing releases a lock taken here
    return "locked"


def _head(out: str) -> str:
    from ledger import Ledger

    with Ledger.open(out) as led:
        return str(led.head()[0])


def _wal(db: str) -> str:
    import sqlite3

    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = connection.execute("SELECT value FROM probe").fetchone()
    finally:
        connection.close()
    return "" if row is None else str(row[0])


def main(argv: list[str]) -> int:
    """Run one probe and print its answer."""
    check, path = argv
    probes = {"flock": _flock, "head": _head, "wal": _wal}
    print(probes[check](path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
