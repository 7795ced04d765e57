"""A run's file names, and its files in a folder beside ``OUT``.

Projections read rows at their recorded locations, hash the materialized
inputs, and publish files through ``Ledger.files`` (a
:class:`ledger.store.port.RunFiles`), so they need not know where the run
lives. ``FolderFiles`` serves a run in its folder. Names are the file names
events locate rows in (``rollouts.jsonl``, ...).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ledger.files import atomic_replace, open_regular, read_regular, refuse_irregular
from ledger.paths import RunPaths
from ledger.store.port import RowReader, RunNames

__all__ = ["ChunkReader", "FolderFiles", "RunNames"]

_CHUNK = 1 << 22  # 4 MiB: hashed in a helper thread while lines are split (P-4)


class _FolderReader:
    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._handles: dict[str, IO[bytes] | None] = {}

    def read_at(self, file: str, offset: int, length: int) -> bytes | None:
        if file not in self._handles:
            try:
                self._handles[file] = open_regular(self._folder / file)
            except FileNotFoundError:
                self._handles[file] = None
        handle = self._handles[file]
        if handle is None:
            return None
        # One positioned read: no seek, no buffer filled and thrown away (P-8).
        data = os.pread(handle.fileno(), length, offset)
        while len(data) < length:  # a short read: go on, up to the file's end
            more = os.pread(handle.fileno(), length - len(data), offset + len(data))
            if not more:
                break
            data += more
        return data

    def read_many(self, places: Sequence[tuple[str, int, int]]) -> list[bytes | None]:
        return [self.read_at(file, offset, length) for file, offset, length in places]

    def close(self) -> None:
        for handle in self._handles.values():
            if handle is not None:
                handle.close()


@dataclass(frozen=True)
class FolderFiles:
    """The files of a run in its folder beside ``OUT`` (architecture.md)."""

    paths: RunPaths

    @property
    def names(self) -> RunNames:
        """The run's file names."""
        return RunNames(self.paths.stem)

    def describe(self, file: str) -> str:
        """The file's path."""
        return str(self.paths.folder / file)

    @contextlib.contextmanager
    def reader(self) -> Iterator[RowReader]:
        """Keeps each file open for the pass."""
        reader = _FolderReader(self.paths.folder)
        try:
            yield reader
        finally:
            reader.close()

    def chunks(self, file: str) -> Iterator[bytes]:
        """The file read in 4 MiB chunks, unbuffered (each chunk read once)."""
        with open_regular(self.paths.folder / file, buffering=0) as handle:
            while chunk := handle.read(_CHUNK):
                yield chunk

    def read_published(self, name: str) -> bytes | None:
        """``<stem>_ledger/<name>``."""
        path = self.paths.ledger_dir / name
        return read_regular(path) if refuse_irregular(path) else None

    def publish(self, name: str, data: bytes) -> None:
        """``atomic_replace`` into ``<stem>_ledger/``."""
        atomic_replace(self.paths.ledger_dir / name, data)


class ChunkReader:
    """``read(n)`` over an iterator of chunks (a file read in order, anywhere)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buffer = b""
        self._start = 0

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes; fewer only at the end."""
        while len(self._buffer) - self._start < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buffer = self._buffer[self._start :] + chunk
            self._start = 0
        data = self._buffer[self._start : self._start + size]
        self._start += len(data)
        return data
