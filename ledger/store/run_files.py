"""Where a run's rows live: its folder, or its PostgreSQL store (SC-2).

Projections read rows at their recorded locations, hash the materialized
inputs, and publish files; they do it through ``ledger.files``, so they need
not know whether the run is a folder beside ``OUT`` (``FolderFiles``) or a run
on PostgreSQL whose rows are stored with their events (``StoreFiles``). Names
are the file names events locate rows in (``rollouts.jsonl``, ...).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

from ledger.files import atomic_replace
from ledger.paths import RunPaths

if TYPE_CHECKING:
    from ledger.postgres.store import PostgresStore

__all__ = [
    "ChunkReader",
    "FolderFiles",
    "RowReader",
    "RunFiles",
    "RunNames",
    "StoreFiles",
]

_CHUNK = 1 << 20


@dataclass(frozen=True)
class RunNames:
    """The file names of a run, derived from its stem as NeMo Gym derives them."""

    stem: str

    @property
    def out(self) -> str:
        """The results file."""
        return f"{self.stem}.jsonl"

    @property
    def sidecar(self) -> str:
        """The failure rows and omission stand-ins."""
        return f"{self.stem}_failures.jsonl"

    @property
    def materialized(self) -> str:
        """The materialized inputs."""
        return f"{self.stem}_materialized_inputs.jsonl"


class RowReader(Protocol):
    """Reads rows at recorded places; open for a whole pass, then closed."""

    def read_at(self, file: str, offset: int, length: int) -> bytes | None:
        """The ``length`` bytes at ``offset`` of ``file`` (``None``: no such file)."""
        ...

    def read_many(self, places: Sequence[tuple[str, int, int]]) -> list[bytes | None]:
        """``read_at`` of each ``(file, offset, length)``, at once where it helps."""
        ...


class RunFiles(Protocol):
    """A run's files, wherever they are kept."""

    @property
    def names(self) -> RunNames:
        """The run's file names."""
        ...

    def describe(self, file: str) -> str:
        """Where ``file`` is, for messages (a path, or the run URL and the name)."""
        ...

    def reader(self) -> contextlib.AbstractContextManager[RowReader]:
        """A reader of rows at recorded places, closed when the pass ends."""
        ...

    def chunks(self, file: str) -> Iterator[bytes]:
        """The bytes of ``file`` in order (``FileNotFoundError`` when it is absent)."""
        ...

    def read_published(self, name: str) -> bytes | None:
        """A published file (``manifest.json``, ...), or ``None``."""
        ...

    def publish(self, name: str, data: bytes) -> None:
        """Replace a published file atomically (EV-31)."""
        ...


class _FolderReader:
    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._handles: dict[str, IO[bytes] | None] = {}

    def read_at(self, file: str, offset: int, length: int) -> bytes | None:
        if file not in self._handles:
            try:
                self._handles[file] = (self._folder / file).open("rb")
            except FileNotFoundError:
                self._handles[file] = None
        handle = self._handles[file]
        if handle is None:
            return None
        handle.seek(offset)
        return handle.read(length)

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
        """The file read in 1 MiB chunks."""
        with (self.paths.folder / file).open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                yield chunk

    def read_published(self, name: str) -> bytes | None:
        """``<stem>_ledger/<name>``."""
        path = self.paths.ledger_dir / name
        return path.read_bytes() if path.exists() else None

    def publish(self, name: str, data: bytes) -> None:
        """``atomic_replace`` into ``<stem>_ledger/``."""
        atomic_replace(self.paths.ledger_dir / name, data)


class _StoreReader:
    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def read_at(self, file: str, offset: int, length: int) -> bytes | None:
        return self.read_many([(file, offset, length)])[0]

    def read_many(self, places: Sequence[tuple[str, int, int]]) -> list[bytes | None]:
        found = self._store.pieces_at([(file, offset) for file, offset, _ in places])
        return [
            None if data is None else data[:length]
            for data, (_, _, length) in zip(found, places, strict=True)
        ]


@dataclass(frozen=True)
class StoreFiles:
    """The files of a run on PostgreSQL, kept in its tables (SC-2)."""

    store: PostgresStore
    names: RunNames

    def describe(self, file: str) -> str:
        """The run's URL (never with a password) and the file's name."""
        return f"{self.store.path} ({file})"

    @contextlib.contextmanager
    def reader(self) -> Iterator[RowReader]:
        """One query per row read."""
        yield _StoreReader(self.store)

    def chunks(self, file: str) -> Iterator[bytes]:
        """The file's pieces in offset order (absent: ``FileNotFoundError``)."""
        found = False
        for _, data in self.store.file_pieces(file):
            found = True
            yield data
        if not found and file == self.names.materialized:
            raise FileNotFoundError(file)

    def read_published(self, name: str) -> bytes | None:
        """From the run's ``published`` table."""
        return self.store.read_published(name)

    def publish(self, name: str, data: bytes) -> None:
        """Into the run's ``published`` table, in one transaction."""
        self.store.put_published(name, data)


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
