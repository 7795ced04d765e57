"""EV-42's environment checks for ``doctor``, made from a second process.

``flock`` must hold across processes, SQLite's WAL mode needs shared memory that
some network filesystems lack, and a run needs free space. Each check returns
a :class:`Check`; the second process is ``python -m ledger.doctor.probe``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ledger.files import not_regular, read_regular

__all__ = [
    "Check",
    "filesystem_type",
    "flock_check",
    "free_space_check",
    "lock_holder_check",
    "wal_check",
]

#: Filesystems where SQLite's WAL shared memory is unsafe or unsupported.
NETWORK_FILESYSTEMS = (
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph",
    "glusterfs", "9p", "panfs", "fuse",
)  # fmt: skip
_LOW_SPACE = 1 << 30  # 1 GiB


@dataclass(frozen=True)
class Check:
    """One check: its name, whether it holds, and what was found."""

    name: str
    ok: bool
    detail: str


def _probe(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ledger.doctor.probe", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    text = done.stdout.strip() or done.stderr.strip()
    return text.splitlines()[-1] if text else ""


def flock_check(folder: Path) -> Check:
    """A lock this process holds refuses a second process, and then admits it."""
    import fcntl

    with tempfile.NamedTemporaryFile(
        dir=folder, prefix=".doctor-", suffix=".lock"
    ) as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        while_held = _probe("flock", f.name)
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        after = _probe("flock", f.name)
    ok = while_held == "blocked" and after == "locked"
    detail = (
        "a second process was refused while this one held the lock"
        if ok
        else f"a second process saw {while_held!r} while held, {after!r} after: "
        "flock is not enforced here, so two collectors could own one run"
    )
    if ok and not _folder_flock_holds(folder):
        detail += (
            "; a folder cannot be locked here, so with run.lock removed a second "
            "collector could start before the holder notices and stops"
        )
    return Check("flock across processes", ok, detail)


def _folder_flock_holds(folder: Path) -> bool:
    """Whether a folder's ``flock`` refuses a second process (the run lock's second
    half: it keeps a removed ``run.lock`` from letting another owner in)."""
    import fcntl

    with tempfile.TemporaryDirectory(dir=folder, prefix=".doctor-") as probe:
        fd = os.open(probe, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        try:
            return _probe("flock", probe) == "blocked"
        finally:
            os.close(fd)


def filesystem_type(path: Path) -> tuple[str, str]:
    """``(fstype, mount point)`` of the filesystem holding ``path`` (Linux)."""
    target = os.path.realpath(path)
    best = ("unknown", "")
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1].replace("\\040", " ")
                inside = target == point or target.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best[1]):
                    best = (fields[2], point)
    except OSError:
        pass
    return best


def _network(fstype: str) -> bool:
    return any(
        fstype == name or fstype.startswith(name + ".") for name in NETWORK_FILESYSTEMS
    )


def wal_check(out: Path, folder: Path) -> Check:
    """The filesystem's type, and a second process reading a WAL commit of this one.

    The commit is made in a scratch database of its own in ``folder`` and
    read back while its writer still holds it open (so it is still in the WAL,
    not checkpointed): what a second process on this filesystem sees of a
    live writer's commits. The run's own database is never compared (issue
    25): under a live ``run`` its head moves between two reads, which is no
    fault of the filesystem. Nor does the probe need the run's ledger (the
    journal mode's line says whether it exists yet).
    """
    del out
    fstype, point = filesystem_type(folder)
    where = f"{fstype} at {point or '?'}"
    if _network(fstype):
        return Check(
            "WAL safety", False, f"{where}: a network filesystem; WAL is unsafe"
        )
    token = secrets.token_hex(8)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".doctor-") as scratch:
        db = Path(scratch) / "wal.db"
        connection = sqlite3.connect(db, isolation_level=None)
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("CREATE TABLE probe (value TEXT)")
            connection.execute("INSERT INTO probe VALUES (?)", (token,))
            seen = _probe("wal", str(db))
        finally:
            connection.close()
    ok = seen == token
    if ok:
        return Check(
            "WAL safety", True, f"{where}: local; a second process read a commit"
        )
    return Check(
        "WAL safety",
        False,
        f"{where}: a second process did not read this one's commit ({seen or 'no'} "
        "answer): the WAL is not shared here",
    )


def free_space_check(folder: Path) -> Check:
    """Free space where the run's files grow."""
    usage = shutil.disk_usage(folder)
    gib = 1 << 30
    detail = f"{usage.free / gib:.1f} GiB free of {usage.total / gib:.1f} GiB"
    return Check("free space", usage.free >= _LOW_SPACE, detail)


def _flock_holders(lock: Path) -> list[int] | None:
    """Pids holding a flock on ``lock`` per /proc/locks; ``None`` when unreadable."""
    info = os.stat(lock)
    device = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        with open("/proc/locks", encoding="utf-8") as locks:
            lines = locks.read().splitlines()
    except OSError:
        return None
    return [
        int(fields[4])
        for fields in (line.split() for line in lines)
        if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == device
    ]


def _alive(holder: str) -> str:
    words = holder.split()
    if len(words) < 5 or words[0] != "pid" or not words[1].isdigit():
        return ""
    if words[4] != socket.gethostname():
        return " (on another host: cannot tell whether it is alive)"
    try:
        os.kill(int(words[1]), 0)
    except ProcessLookupError:
        return " (that process is gone)"
    except PermissionError:
        pass
    return " (alive)"


def _orphaned(lock: Path) -> Check | None:
    """The run folder locked, its lock file not: the file went under its holder."""
    try:
        folder = _flock_holders(lock.parent)
        held_file = _flock_holders(lock) if os.path.lexists(lock) else []
    except OSError:
        return None
    if not folder or held_file is None or held_file:
        return None
    pids = ", ".join(f"pid {pid}" for pid in folder)
    return Check(
        "run lock",
        False,
        f"held by {pids} on this host, but its lock file {lock} was removed or "
        "replaced under it: that collector stops before it appends again; once "
        "it has ended, `rollout-ledger resume` makes the lock file again",
    )


def lock_holder_check(lock: Path) -> Check:
    """Who holds the run lock, if anyone, and whether that process is alive."""
    orphaned = _orphaned(lock)
    if orphaned is not None:
        return orphaned
    try:
        kind = not_regular(os.stat(lock).st_mode)
    except FileNotFoundError:
        return Check("run lock", True, "no lock file yet")
    if kind is not None:  # never opened: a named pipe would hang the read
        return Check(
            "run lock",
            False,
            f"{lock} is {kind}, not a regular file; move it aside (rollout-ledger "
            "creates its lock file again)",
        )
    holder = read_regular(lock).decode("utf-8", "replace").strip()
    holders = _flock_holders(lock)
    held = (
        bool(holders) if holders is not None else _probe("flock", str(lock)) != "locked"
    )
    if not held:
        last = f" (last holder: {holder})" if holder else ""
        return Check("run lock", True, f"free{last}")
    return Check(
        "run lock", True, f"held by {holder or 'an unknown process'}" + _alive(holder)
    )
