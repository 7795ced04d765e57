"""Following a file a collector appends to: its complete new lines, as they land.

``rollout-ledger run`` records each row a collector appends to its per-round
files while it runs (the adoption of REC-86, done by following the files).
A ``FollowedFile`` remembers how far it read (byte offset and line number) and
the last bytes it read; each ``read`` returns the complete lines appended
since, all of them, a line of any length included. A partial last line waits
for its newline, unless the writer is done (``final``), when it is returned
marked unterminated. A file that shrank, was
replaced (another inode) or whose bytes already read changed is a rewrite:
``broken`` says so in plain words and nothing more is read from it, so nothing
read before is taken twice and nothing rewritten is taken at all.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

import msgspec

__all__ = ["FollowedFile", "FollowedLine"]

#: Bytes kept from the end of what was read, compared at each read (a rewrite).
_TAIL = 256
#: At most this much is read at a time (a read goes on to the file's end).
_CHUNK = 64 * 1024 * 1024


class FollowedLine(msgspec.Struct, frozen=True):
    """One line of a followed file: its number, bytes and whether it ended."""

    number: int
    raw: bytes
    terminated: bool = True


class FollowedFile:
    """The complete lines appended to ``path`` since the last ``read``.

    Everything appended is read, however much (issue 25): at most ``_CHUNK``
    bytes are read at a time, and a line longer than that is held across
    chunks (and across reads, while its writer is still writing it) until its
    newline comes. ``offset`` is where the complete lines returned end.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.line = 0
        #: Why nothing more is read (the file was rewritten), or ``None``.
        self.broken: str | None = None
        self._inode: int | None = None
        self._tail = b""
        self._partial = b""  # read past ``offset``: a line without its newline yet

    def read(self, *, final: bool = False) -> list[FollowedLine]:
        """New complete lines; with ``final``, an unterminated last one too."""
        if self.broken is not None:
            return []
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            if self.offset or self._partial:
                self._break("was removed")
            return []
        if self._inode is not None and status.st_ino != self._inode:
            self._break("was replaced by another file")
            return []
        read_to = self.offset + len(self._partial)
        if status.st_size < read_to:
            self._break(f"shrank from {read_to} to {status.st_size} bytes")
            return []
        found = self._new_lines(status.st_size)
        if found is None:
            return []
        self._inode = status.st_ino
        if final and self._partial.strip():
            self.line += 1
            found.append(FollowedLine(self.line, self._partial, terminated=False))
            self._took(self._partial)
            self._partial = b""
        return found

    def _new_lines(self, size: int) -> list[FollowedLine] | None:
        found: list[FollowedLine] = []
        with open(self.path, "rb") as handle:
            if not self._unchanged(handle):
                return None
            position = self.offset + len(self._partial)
            handle.seek(position)
            while position < size:
                chunk = handle.read(min(size - position, _CHUNK))
                if not chunk:
                    break
                position += len(chunk)
                data = self._partial + chunk if self._partial else chunk
                end = data.rfind(b"\n") + 1
                if not end:
                    self._partial = data
                    continue
                for raw in data[: end - 1].split(b"\n"):
                    self.line += 1
                    found.append(FollowedLine(self.line, raw))
                self._took(data[:end])
                self._partial = data[end:]
        return found

    def _unchanged(self, handle: BinaryIO) -> bool:
        """The bytes last read are still there: the tail and a waiting line's end."""
        handle.seek(self.offset - len(self._tail))
        if handle.read(len(self._tail)) != self._tail:
            self._break(f"changed before byte {self.offset}")
            return False
        end = self._partial[-_TAIL:]
        if end:
            handle.seek(self.offset + len(self._partial) - len(end))
            if handle.read(len(end)) != end:
                self._break(f"changed before byte {self.offset + len(self._partial)}")
                return False
        return True

    def _took(self, taken: bytes) -> None:
        self.offset += len(taken)
        self._tail = (self._tail + taken[-_TAIL:])[-_TAIL:]

    def _break(self, why: str) -> None:
        self.broken = (
            f"{self.path} {why} after its line {self.line} was read: it was "
            "truncated or rewritten, so nothing more of it is recorded"
        )
