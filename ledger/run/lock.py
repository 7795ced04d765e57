"""The run lock (EV-40..EV-42): one owner per run, released by the kernel on death."""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from ledger.errors import LedgerError, LockHeld
from ledger.paths import RunPaths
from ledger.postgres.url import is_run_url, require_postgres

__all__ = ["RunLock"]

# Locks do not nest (EV-41): paths this process holds, by device and inode.
_HELD: set[tuple[int, int]] = set()
_HELD_GUARD = threading.Lock()
_HOLDER_INFO_LIMIT = 4096


def _open_lock_file(path: Path) -> int:
    # EV-41 and quality.md "Security": never create or open through a symlink.
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LedgerError(
                f"the run lock {path} is a symbolic link; remove it (rollout-ledger "
                "never follows a link in place of its lock file)"
            ) from exc
        raise LedgerError(
            f"could not open the run lock {path}: {exc.strerror}"
        ) from exc


def _read_holder(fd: int) -> str | None:
    # The holder writes its line right after taking the lock; a loser racing it
    # may read before that, so it looks again briefly before naming nobody.
    for _ in range(20):
        data = os.pread(fd, _HOLDER_INFO_LIMIT, 0)
        first = data.decode("utf-8", "replace").partition("\n")[0].strip()
        if first and data.endswith(b"\n"):
            return first
        time.sleep(0.005)
    return None


def _holder_line() -> bytes:
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        f"pid {os.getpid()} on host {socket.gethostname()} since {started}\n".encode()
    )


class _FileLock:
    """An exclusive, non-blocking ``flock`` on one stable file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._key: tuple[int, int] | None = None

    def acquire(self) -> None:
        fd = _open_lock_file(self.path)
        try:
            self._claim(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def _claim(self, fd: int) -> None:
        info = os.fstat(fd)
        key = (info.st_dev, info.st_ino)
        with _HELD_GUARD:
            if key in _HELD:
                raise LockHeld(
                    self.path,
                    holder=f"this process (pid {os.getpid()})",
                    detail="locks do not nest: acquire once and pass the lock down",
                )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LockHeld(self.path, holder=_read_holder(fd)) from None
            except OSError as exc:
                raise LedgerError(
                    f"could not lock {self.path}: {exc.strerror}; the filesystem "
                    "may not support flock (run `rollout-ledger doctor OUT`)"
                ) from exc
            _HELD.add(key)
            self._key = key
        # Write who holds it, for the next owner's LockHeld message (EV-40):
        # the whole line first, then cut what an older holder left after it,
        # so a reader never finds the file empty or half-written.
        line = _holder_line()
        os.pwrite(fd, line, 0)
        os.ftruncate(fd, len(line))

    def release(self) -> None:
        if self._fd is None:
            return
        # EV-41: the file stays; only the lock goes (closing releases the flock).
        os.close(self._fd)
        self._fd = None
        with _HELD_GUARD:
            _HELD.discard(self._key)
        self._key = None

    @property
    def held(self) -> bool:
        return self._fd is not None


class RunLock:
    """The exclusive lock of the run named by ``out`` (EV-40).

    Acquire it before anything of the run is prepared, restored or written; a
    second owner gets :class:`LockHeld` naming the holder's pid, host and start
    time. With ``checkpoint_dir``, ``<checkpoint_dir>/.collector.lock`` is locked
    too, so two outputs never share one checkpoint folder.
    """

    paths: RunPaths

    def __new__(
        cls, out: Path | str, checkpoint_dir: Path | str | None = None
    ) -> RunLock:
        """A run URL (SC-1) gets the PostgreSQL run lock, a session advisory lock."""
        if cls is RunLock and isinstance(out, str) and is_run_url(out):
            require_postgres()
            from ledger.postgres.run_lock import PgRunLock  # psycopg only when needed

            return super().__new__(PgRunLock)
        return super().__new__(cls)

    def __init__(
        self, out: Path | str, checkpoint_dir: Path | str | None = None
    ) -> None:
        self.paths = RunPaths.of(out)
        self._locks = [_FileLock(self.paths.lock)]
        if checkpoint_dir is not None:
            self._locks.append(_FileLock(Path(checkpoint_dir) / ".collector.lock"))

    @property
    def target(self) -> str:
        """The run this lock is for: ``OUT``'s absolute path, or the run URL."""
        return str(self.paths.out)

    @property
    def held(self) -> bool:
        """Whether this object holds every lock it names."""
        return all(lock.held for lock in self._locks)

    def acquire(self) -> RunLock:
        """Take every lock, or none: raises :class:`LockHeld` when one is owned."""
        if self.held:
            raise LockHeld(
                self.paths.lock,
                holder="this RunLock object",
                detail="locks do not nest",
            )
        self._make_folders()
        taken: list[_FileLock] = []
        try:
            for lock in self._locks:
                lock.acquire()
                taken.append(lock)
        except BaseException:
            for lock in reversed(taken):
                lock.release()
            raise
        return self

    def _make_folders(self) -> None:
        for lock in self._locks:
            try:
                lock.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise LedgerError(
                    f"could not create {lock.path.parent}: {exc.strerror}"
                ) from exc

    def release(self) -> None:
        """Release every lock this object holds (the lock files stay, EV-41)."""
        for lock in reversed(self._locks):
            lock.release()

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
