"""An exclusive ``flock`` on one stable file (EV-40, EV-41): a run's lock file.

The kernel releases it when its holder dies, so a requeued job never waits for
a dead one. The file is never unlinked and never opened through a link; its
one line names the holder for the next owner's ``LockHeld`` message.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from ledger.errors import LockHeld, StorageError
from ledger.files import not_regular
from ledger.store.read_only import refuse_unwritable

__all__ = ["FileLock"]

# Locks do not nest (EV-41): paths this process holds, by device and inode.
_HELD: set[tuple[int, int]] = set()
_HELD_GUARD = threading.Lock()
_HOLDER_INFO_LIMIT = 4096


def _refuse_kind(path: Path, mode: int) -> None:
    kind = None if stat.S_ISLNK(mode) else not_regular(mode)  # a link: ELOOP below
    if kind is not None:
        raise StorageError(
            f"the run lock {path} is {kind}, not a regular file; move it aside "
            "(rollout-ledger creates its lock file again)",
            path=path,
        )


def _open_lock_file(path: Path) -> int:
    # EV-41 and quality.md "Security": never create or open through a symlink.
    # A named pipe or folder in its place is refused before it is opened.
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        _refuse_kind(path, os.lstat(path).st_mode)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise StorageError(
            f"could not open the run lock {path}: {exc.strerror}", path=path
        ) from exc
    try:
        fd = os.open(path, flags | os.O_NONBLOCK, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StorageError(
                f"the run lock {path} is a symbolic link; remove it (rollout-ledger "
                "never follows a link in place of its lock file)"
            ) from exc
        raise StorageError(
            f"could not open the run lock {path}: {exc.strerror}", path=path
        ) from exc
    try:
        _refuse_kind(path, os.fstat(fd).st_mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


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


class FileLock:
    """An exclusive, non-blocking ``flock`` on one stable file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._key: tuple[int, int] | None = None

    def acquire(self) -> None:
        """Take the lock, or raise ``LockHeld`` naming its holder."""
        refuse_unwritable(self.path.parent)  # a read-only run: plain words
        _make_folder(self.path.parent)
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
                raise StorageError(
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
        """Release the lock; the file stays (EV-41)."""
        if self._fd is None:
            return
        # EV-41: the file stays; only the lock goes (closing releases the flock).
        os.close(self._fd)
        self._fd = None
        with _HELD_GUARD:
            _HELD.discard(self._key)
        self._key = None

    @property
    def name(self) -> str:
        """The lock file's path."""
        return str(self.path)

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(
            f"could not create {folder}: {exc.strerror}", path=folder
        ) from exc
