"""Atomic file publication (EV-30, EV-31).

A reader of a published file sees the old bytes or the new ones, never a part:
the new bytes go to a temporary file in the same folder, are fsynced, take the
mode of the file they replace, and are renamed over it; then the folder is
fsynced so the rename itself survives a power loss.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO, cast

import msgspec

from ledger.errors import ConfigError, StorageError

__all__ = [
    "atomic_replace",
    "canonical_json",
    "fsync_dir",
    "json_problem",
    "not_regular",
    "open_regular",
    "publish_json",
    "read_regular",
    "refuse_irregular",
]

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def not_regular(mode: int) -> str | None:
    """What a file of ``st_mode`` is when it is not a regular file, else ``None``."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def refuse_irregular(path: Path | str, what: str = "", *, given: bool = False) -> bool:
    """Whether ``path`` exists; ``StorageError`` when it is not a regular file.

    Checked before any open: a named pipe is never opened (a reader would wait
    for a writer forever), a folder never read. ``given``: a file the caller
    named (an option file), refused as ``ConfigError``.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StorageError(
            f"could not read {path}: {exc.strerror or exc}", path=path
        ) from exc
    kind = not_regular(mode)
    if kind is not None:
        name = f"{what} {path}" if what else str(path)
        if given:
            raise ConfigError(
                f"{name} is {kind}, not a regular file; pass a file", path=path
            )
        raise StorageError(
            f"{name} is {kind}, not a regular file; rollout-ledger reads and writes "
            "only regular files there: move it aside and put the file back "
            "(`rollout-ledger verify OUT` checks the run)",
            path=path,
        )
    return True


def open_regular(
    path: Path | str,
    mode: str = "rb",
    what: str = "",
    *,
    given: bool = False,
    buffering: int = -1,
) -> BinaryIO:
    """``open(path, mode)`` in binary, refused unless ``path`` is a regular file.

    A missing file raises ``FileNotFoundError`` as ``open`` does (for modes that
    do not create it); anything else not a regular file is ``StorageError``.
    """
    refuse_irregular(path, what, given=given)
    # O_NONBLOCK: a FIFO put in place since the check still never blocks the open.
    handle = open(path, mode, buffering, opener=_nonblocking)  # noqa: SIM115 - returned
    kind = not_regular(os.fstat(handle.fileno()).st_mode)
    if kind is not None:
        handle.close()
        raise StorageError(f"{path} is {kind}, not a regular file", path=path)
    os.set_blocking(handle.fileno(), True)
    return cast(BinaryIO, handle)


def json_problem(exc: Exception) -> str:
    """What is wrong with a document that did not decode, in a few words."""
    if isinstance(exc, RecursionError):
        return "its arrays or objects nest too deeply"
    return str(exc)


def read_regular(path: Path | str, what: str = "", *, given: bool = False) -> bytes:
    """The bytes of ``path``, refused unless it is a regular file (``open_regular``)."""
    with open_regular(path, "rb", what, given=given) as handle:
        return handle.read()


def _nonblocking(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NONBLOCK, 0o666)


def fsync_dir(folder: Path) -> None:
    """Flush a folder's entries to disk so a rename or create inside it is durable."""
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _current_umask() -> int:
    # os.umask can only be read by setting it; restore it at once.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _target_mode(path: Path, mode: int | None) -> int:
    if mode is not None:
        return mode
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~_current_umask()


def _remove_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)


def atomic_replace(
    path: Path | str, data: bytes | Iterable[bytes], mode: int | None = None
) -> None:
    """Replace ``path`` with ``data`` (bytes, or chunks of them) atomically (EV-30).

    Raises:
        StorageError: the write failed; the original file is untouched and the
            temporary file is removed.
    """
    target = Path(path)
    folder = target.parent
    tmp = folder / f".{target.name}.{secrets.token_hex(6)}.tmp"
    try:
        final_mode = _target_mode(target, mode)
        # EV-30: exclusive create, so a stale temporary file is never reused.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            for chunk in (data,) if isinstance(data, bytes) else data:
                view = memoryview(chunk)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
            os.fsync(fd)
            os.fchmod(fd, final_mode)
        finally:
            os.close(fd)
        os.replace(tmp, target)
        fsync_dir(folder)
    except OSError as exc:
        _remove_quietly(tmp)  # its folder may be what failed: never mask exc
        said = str(exc.strerror or exc)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            said += "; free space on that disk, then run the command again"
        raise StorageError(f"could not write {target}: {said}", path=target) from exc
    except BaseException:
        _remove_quietly(tmp)
        raise


_JSON_ENCODER = msgspec.json.Encoder(order="sorted")


def _refuse_nan(value: Any, where: str) -> None:
    # msgspec encodes NaN and infinities silently as null; EV-31 refuses them.
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(
            f"{where} is {value!r}; published JSON refuses NaN and infinity"
        )
    if isinstance(value, dict):
        for key, item in value.items():
            _refuse_nan(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _refuse_nan(item, f"{where}[{index}]")


def canonical_json(value: Any) -> bytes:
    """Canonical JSON: sorted keys, 2-space indent, trailing newline, NaN refused."""
    plain = msgspec.to_builtins(value, order="sorted")
    _refuse_nan(plain, "$")
    return msgspec.json.format(_JSON_ENCODER.encode(plain), indent=2) + b"\n"


def publish_json(path: Path | str, value: Any) -> None:
    """Publish ``value`` as canonical JSON through :func:`atomic_replace` (EV-31)."""
    atomic_replace(path, canonical_json(value))
