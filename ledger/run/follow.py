"""Following a file a collector appends to: its complete new lines, as they land.

``rollout-ledger run`` records each row a collector appends to its per-round
files while it runs (the adoption of REC-86, done by following the files).
A ``FollowedFile`` remembers how far it read (byte offset and line number) and
the last bytes it read; each ``read`` returns the complete lines appended
since. A partial last line waits for its newline, unless the writer is done
(``final``), when it is returned marked unterminated. A file that shrank, was
replaced (another inode) or whose bytes already read changed is a rewrite:
``broken`` says so in plain words and nothing more is read from it, so nothing
read before is taken twice and nothing rewritten is taken at all.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

__all__ = ["FollowedFile", "FollowedLine"]

#: Bytes kept from the end of what was read, compared at each read (a rewrite).
_TAIL = 256
#: At most this much is read per call; the rest waits for the next.
_CHUNK = 64 * 1024 * 1024


class FollowedLine(msgspec.Struct, frozen=True):
    """One line of a followed file: its number, bytes and whether it ended."""

    number: int
    raw: bytes
    terminated: bool = True


class FollowedFile:
    """The complete lines appended to ``path`` since the last ``read``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.line = 0
        #: Why nothing more is read (the file was rewritten), or ``None``.
        self.broken: str | None = None
        self._inode: int | None = None
        self._tail = b""

    def read(self, *, final: bool = False) -> list[FollowedLine]:
        """New complete lines; with ``final``, an unterminated last one too."""
        if self.broken is not None:
            return []
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            if self.offset:
                self._break("was removed")
            return []
        if self._inode is not None and status.st_ino != self._inode:
            self._break("was replaced by another file")
            return []
        if status.st_size < self.offset:
            self._break(f"shrank from {self.offset} to {status.st_size} bytes")
            return []
        data = self._new_bytes(status.st_size)
        if data is None:
            return []
        self._inode = status.st_ino
        return self._lines(data, final=final)

    def _new_bytes(self, size: int) -> bytes | None:
        with open(self.path, "rb") as handle:
            start = self.offset - len(self._tail)
            handle.seek(start)
            if handle.read(len(self._tail)) != self._tail:
                self._break(f"changed before byte {self.offset}")
                return None
            return handle.read(min(size - self.offset, _CHUNK))

    def _lines(self, data: bytes, *, final: bool) -> list[FollowedLine]:
        end = data.rfind(b"\n") + 1
        complete, rest = data[:end], data[end:]
        found = []
        for raw in complete.split(b"\n")[:-1]:
            self.line += 1
            found.append(FollowedLine(self.line, raw))
        taken = complete
        if final and rest.strip():
            self.line += 1
            found.append(FollowedLine(self.line, rest, terminated=False))
            taken = data
        self.offset += len(taken)
        self._tail = (self._tail + taken)[-_TAIL:]
        return found

    def _break(self, why: str) -> None:
        self.broken = (
            f"{self.path} {why} after its line {self.line} was read: it was "
            "truncated or rewritten, so nothing more of it is recorded"
        )
