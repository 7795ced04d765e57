"""A real small filesystem for disk-full tests: a tmpfs mounted under tmp_path.

``small_disk(tmp_path, kib)`` mounts a tmpfs of ``kib`` KiB (root only) and
unmounts it afterwards; without root, or where mounting fails, the test is
skipped with the reason (an environment limit: the fault needs a real full
disk). ``fill(folder)`` writes a ballast file until the disk is full, so the
next write that needs a new block fails with ENOSPC; ``free(folder)`` removes
it. Shared with the fault harness (``tests/test_fault_harness.py``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["BALLAST", "fill", "free", "small_disk"]

BALLAST = "ballast.bin"
_CHUNK = 4096


@contextlib.contextmanager
def small_disk(tmp_path: Path, kib: int) -> Iterator[Path]:
    """A tmpfs of ``kib`` KiB at ``tmp_path/small``, unmounted on the way out."""
    if os.geteuid() != 0:
        pytest.skip("a real full disk needs root to mount a small tmpfs")
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(folder: Path, *, leave: int = 0) -> int:
    """Fill the disk holding ``folder`` with a ballast file; its size.

    With ``leave``, that many bytes (rounded down to blocks) are freed again
    at the end, so a write needing more than ``leave`` fails with ENOSPC.
    """
    ballast = folder / BALLAST
    size = 0
    with ballast.open("ab", buffering=0) as handle:
        block = b"\0" * _CHUNK
        while True:
            try:
                written = handle.write(block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
            if not written:
                break
            size += written
        keep = max(0, size - leave // _CHUNK * _CHUNK)
        handle.truncate(keep)
    return keep


def free(folder: Path) -> None:
    """Remove the ballast: the disk has room again."""
    (folder / BALLAST).unlink(missing_ok=True)
