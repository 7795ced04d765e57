"""Line numbers of recorded rows, for anything a person reads.

An event records where a row's bytes are (file and byte offset); a person is
told the file and the line (cli.md: rows are named by file and line, never by
byte offset). ``RowLines`` reads each collector file once, the first time a
line of it is asked for, and answers every later question from the line
starts it kept.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable

from ledger.store.port import RunFiles

__all__ = ["RowLines", "line_starts"]


def line_starts(chunks: Iterable[bytes]) -> list[int]:
    """The byte offset where each line starts (the first is 0)."""
    starts, position = [0], 0
    for chunk in chunks:
        found = chunk.find(b"\n")
        while found >= 0:
            starts.append(position + found + 1)
            found = chunk.find(b"\n", found + 1)
        position += len(chunk)
    return starts


class RowLines:
    """The line (from 1) of a row at a byte offset of a run's file."""

    def __init__(self, files: RunFiles | None) -> None:
        self._files = files
        self._starts: dict[str, list[int] | None] = {}

    def _of(self, file: str) -> list[int] | None:
        if file not in self._starts:
            starts = None
            if self._files is not None:
                try:
                    starts = line_starts(self._files.chunks(file))
                except (FileNotFoundError, OSError):
                    starts = None
            self._starts[file] = starts
        return self._starts[file]

    def line(self, file: str, offset: int) -> int | None:
        """The row's line, or ``None`` when the file cannot be read."""
        starts = self._of(file)
        if starts is None:
            return None
        return bisect_right(starts, offset)

    def where(self, file: str, offset: int) -> str:
        """``"rollouts.jsonl line 12"``, or the file alone when it cannot be read."""
        line = self.line(file, offset)
        return file if line is None else f"{file} line {line}"
