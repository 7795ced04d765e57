"""An exclusive ``flock`` on one stable file (EV-40, EV-41): a run's lock file.

The kernel releases it when its holder dies, so a requeued job never waits for
a dead one. The file is never unlinked and never opened through a link; its
one line names the holder for the next owner's ``LockHeld`` message.

A lock file can be removed (or replaced) while it is held, and a new one made
in its place would let a second owner in. So the holder also locks the folder
the file is in (``<stem>_ledger/``, or the checkpoint folder): that folder
cannot be removed under its holder without removing the run, and a second
owner is refused on it even without the file. The holder checks before each
append that the path still names the file it locked (:meth:`FileLock.check`)
and stops with :class:`ledger.errors.LockLost` when it does not; it does not
make the file again (whatever removed it believed the run free, and only a
person can tell why): the next owner's acquire does.
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

from ledger.errors import LockHeld, LockLost, StorageError
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
            f"could not open the run lock {path}: {_plain(exc)}", path=path
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
    """An exclusive, non-blocking ``flock`` on one stable file and its folder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._folder_fd: int | None = None
        self._key: tuple[int, int] | None = None
        self._folder_key: tuple[int, int] | None = None
        self._lost: str | None = None

    def acquire(self) -> None:
        """Take the lock, or raise ``LockHeld`` naming its holder."""
        refuse_unwritable(self.path.parent)  # a read-only run: plain words
        _make_folder(self.path.parent)
        folder_fd = _open_folder(self.path.parent)
        try:
            fd = _open_lock_file(self.path)
        except BaseException:
            os.close(folder_fd)
            raise
        try:
            self._claim(fd, folder_fd)
        except BaseException:
            os.close(fd)
            os.close(folder_fd)
            raise
        self._fd = fd
        self._folder_fd = folder_fd
        self._lost = None

    def _claim(self, fd: int, folder_fd: int) -> None:
        info = os.fstat(fd)
        key = (info.st_dev, info.st_ino)
        folder_info = os.fstat(folder_fd)
        folder_key = (folder_info.st_dev, folder_info.st_ino)
        with _HELD_GUARD:
            if key in _HELD or folder_key in _HELD:
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
            if not _lock_folder(folder_fd):
                # Free lock file, locked folder: the holder's file was removed
                # or replaced; this file names nobody (or a former holder).
                pids = _folder_holders(folder_info)
                raise LockHeld(
                    self.path,
                    holder=_pids_on_this_host(pids) or "another process",
                    detail=f"its lock file was removed or replaced while it held "
                    f"{self.path.parent}; that collector stops before it appends "
                    "again",
                )
            _HELD.update((key, folder_key))
            self._key = key
            self._folder_key = folder_key
        # Write who holds it, for the next owner's LockHeld message (EV-40):
        # the whole line first, then cut what an older holder left after it,
        # so a reader never finds the file empty or half-written.
        line = _holder_line()
        try:
            os.pwrite(fd, line, 0)
            os.ftruncate(fd, len(line))
        except OSError as exc:  # a full disk: the lock is given up (closing fd)
            with _HELD_GUARD:
                _HELD.discard(key)
                _HELD.discard(folder_key)
            self._key = None
            self._folder_key = None
            raise StorageError(
                f"could not write the holder of the run lock {self.path}: "
                f"{_plain(exc)}",
                path=self.path,
            ) from exc

    def check(self) -> None:
        """Raise ``LockLost`` unless the lock file is still the file locked.

        One ``stat`` of the path against the held descriptor: a writer calls
        it before each append. Once lost, always lost for this object.
        """
        if self._lost is None and self._key is not None:
            self._lost = _lost_file(self.path, self._key)
        if self._lost is not None:
            raise LockLost(
                self.path,
                what=self._lost,
                advice="make sure no other collector writes to this run "
                "(`rollout-ledger doctor OUT` shows who holds it), then continue "
                "it with `rollout-ledger resume`, which makes the lock file again",
            )

    def release(self) -> None:
        """Release the lock; the file stays (EV-41)."""
        if self._fd is None:
            return
        # EV-41: the file stays; only the lock goes (closing releases the flock).
        os.close(self._fd)
        self._fd = None
        if self._folder_fd is not None:
            os.close(self._folder_fd)
            self._folder_fd = None
        with _HELD_GUARD:
            _HELD.difference_update(
                key for key in (self._key, self._folder_key) if key is not None
            )
        self._key = None
        self._folder_key = None

    @property
    def name(self) -> str:
        """The lock file's path."""
        return str(self.path)

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None


def _lost_file(path: Path, key: tuple[int, int]) -> str | None:
    """What happened to the lock file at ``path``, or ``None``: still ``key``."""
    try:
        info = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return f"the lock file {path} was removed while this process held it"
    except OSError as exc:
        return f"the lock file {path} could not be checked ({exc.strerror})"
    if (info.st_dev, info.st_ino) != key:
        return f"the lock file {path} was replaced while this process held it"
    return None


def _open_folder(folder: Path) -> int:
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(folder, flags)
    except OSError as exc:
        raise StorageError(
            f"could not open {folder} to lock it: {exc.strerror}", path=folder
        ) from exc


#: A folder ``flock`` refused for a reason other than another holder: NFS
#: emulates ``flock`` with byte-range locks, which a folder (open read-only)
#: cannot take. The lock file alone then excludes, and the holder's check
#: still stops it at its next append (``doctor`` says so).
_FOLDER_LOCK_UNSUPPORTED = frozenset(
    {errno.EBADF, errno.EINVAL, errno.EISDIR, errno.ENOLCK, errno.EOPNOTSUPP}
)


def _lock_folder(folder_fd: int) -> bool:
    """Lock the folder; ``False`` when another holder has it."""
    try:
        fcntl.flock(folder_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno not in _FOLDER_LOCK_UNSUPPORTED:
            raise StorageError(
                f"could not lock the folder of the run lock: {exc.strerror}"
            ) from exc
    return True


def _folder_holders(info: os.stat_result) -> list[int]:
    """Pids holding a ``flock`` on the folder ``info`` describes, per /proc/locks."""
    device = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        with open("/proc/locks", encoding="utf-8") as locks:
            lines = locks.read().splitlines()
    except OSError:
        return []
    return sorted(
        {
            int(fields[4])
            for fields in (line.split() for line in lines)
            if len(fields) > 5
            and fields[1] == "FLOCK"
            and fields[5] == device
            and fields[4].isdigit()
        }
    )


def _pids_on_this_host(pids: list[int]) -> str | None:
    if not pids:
        return None
    named = ", ".join(f"pid {pid}" for pid in pids)
    return f"{named} on host {socket.gethostname()}"


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(
            f"could not create {folder}: {exc.strerror}", path=folder
        ) from exc


def _plain(exc: OSError) -> str:
    """The error in plain words, and what to do when the disk is full."""
    said = (exc.strerror or str(exc)).lower()
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{said}; free space on that disk, then run the command again"
    return said
