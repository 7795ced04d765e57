"""What the materialized inputs were when last read whole (REC-55, for a stat).

The gate compares the inputs' sha256 with the saved one: a changed input
refuses a resume. Hashing 2 GB of inputs at a million rollouts costs about a
second of reading and hashing, on every resume, to learn what the file system
already says: whether the file was written since. So the last full read
records the file's identity and times with the digest it found
(``InputsSeen``), and a resume trusts that digest while the file shows the
same device, inode, size, modification and change times (``seen_digest``).

What this still catches: every write to the file through the file system
(appending, truncating, editing in place, even to the same size, replacing it
by a rename or a copy) changes its change time, which no program can set back
(``touch`` sets the modification time only), or its inode or size. What it
cannot catch: bytes changed under the file system (a raw write to the disk) or
a change made while the system clock was set back. A file written within
``_RACY_NS`` of being read whole is never trusted (its times could be equal to
a write that follows in the same tick), and ``verify`` always hashes
everything.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import msgspec

__all__ = ["InputsSeen", "before_read", "same_file", "seen_now", "still_seen"]

#: A file changed this close to the read is not trusted: coarse file-system
#: clocks (a tick of a few milliseconds, or a second on some) could give a
#: write just after the read the same times.
_RACY_NS = 2_000_000_000


class InputsSeen(msgspec.Struct, array_like=True, frozen=True):
    """The inputs' file as last read whole, and what that read found."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    read_at_ns: int  # when the read began (wall clock)
    digest: str  # sha256 hex of every byte
    rows: list[dict[str, Any]]  # the server references the identity needs


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _same(seen: InputsSeen, found: os.stat_result) -> bool:
    return (
        seen.device == found.st_dev
        and seen.inode == found.st_ino
        and seen.size == found.st_size
        and seen.mtime_ns == found.st_mtime_ns
        and seen.ctime_ns == found.st_ctime_ns
    )


def same_file(seen: InputsSeen, path: Path | None) -> bool:
    """Whether ``path`` shows ``seen``'s device, inode, size and times."""
    found = None if path is None else _stat(path)
    return found is not None and _same(seen, found)


def still_seen(seen: InputsSeen | None, path: Path | None) -> InputsSeen | None:
    """``seen`` when ``path`` is the file it describes, untouched since; or None."""
    if seen is None or path is None:
        return None
    found = _stat(path)
    if found is None or not _same(seen, found):
        return None
    if max(found.st_mtime_ns, found.st_ctime_ns) + _RACY_NS > seen.read_at_ns:
        return None  # written too close to the read to tell a later write apart
    return seen


def before_read(path: Path | None) -> tuple[os.stat_result, int] | None:
    """The file's stat and the time, taken before a full read of it."""
    if path is None:
        return None
    found = _stat(path)
    return None if found is None else (found, time.time_ns())


def seen_now(
    path: Path | None,
    before: tuple[os.stat_result, int] | None,
    digest: str,
    rows: list[dict[str, Any]],
) -> InputsSeen | None:
    """What a full read found, if the file did not change while it was read."""
    if path is None or before is None:
        return None
    found, read_at = before
    after = _stat(path)
    if after is None:
        return None
    seen = InputsSeen(
        found.st_dev,
        found.st_ino,
        found.st_size,
        found.st_mtime_ns,
        found.st_ctime_ns,
        read_at,
        digest,
        rows,
    )
    return seen if _same(seen, after) else None
