"""The write path of a run in a folder: rows into ``OUT`` and the sidecar, then events.

Rows are written before their events (EV-12): appended in order, flushed and
fsynced, then every event of the batch is appended in one SQLite transaction.
A crash leaves at worst rows that the next writer's open records, never an
event pointing at nothing. The files stay open for the writer's life.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from ledger.errors import CorruptLedger, StorageError
from ledger.events import Event
from ledger.files import open_regular
from ledger.store.port import EventRow, EventStore, NewEvent
from ledger.store.prepared import Prepared, locate

__all__ = ["FileSink"]


class FileSink:
    """Appends located rows to the run folder's files durably, then the events."""

    def __init__(self, folder: Path, store: EventStore) -> None:
        self.folder = folder
        self._store = store
        self._handles: dict[str, IO[bytes]] = {}
        self._broken: str | None = None

    def commit(
        self,
        ops: Sequence[Prepared],
        *,
        encode: Callable[[Event], NewEvent],
        recorded_ends: Mapping[str, tuple[int, int]],
        written: bool = False,
    ) -> tuple[list[EventRow], list[Event]]:
        """Locate the rows after the recorded ones, write them, append the events."""
        if self._broken is not None:
            raise StorageError(self._broken, path=self.folder)
        # One writer owns the files (the run lock): where its index says each
        # file's recorded rows end is where the next row goes.
        ends = {file: list(end) for file, end in recorded_ends.items()}
        bodies = locate(ops, ends)
        if not written:
            self._write_durably(ops, recorded_ends)
        try:
            rows = self._store.append_many([encode(body) for body in bodies])
        except BaseException:
            if not written and any(op.file is not None for op in ops):
                # The rows are in the files, their events are not: this writer
                # must not append after them; the next writer's open records
                # them (EV-12).
                self._broken = (
                    "rows were written but their events were not appended; this "
                    "writer stops: open the run again to record them"
                )
            raise
        return rows, bodies

    def _write_durably(
        self, ops: Sequence[Prepared], recorded_ends: Mapping[str, tuple[int, int]]
    ) -> None:
        # One write per file and batch (P-7): the rows of a file are located
        # back to back, from where its recorded bytes end.
        by_file: dict[str, list[bytes]] = {}
        for op in ops:
            if op.file is not None:
                by_file.setdefault(op.file, []).append(op.data)
        for file, rows in by_file.items():
            with self._stopping_on_error(file):
                handle = self._handle(file)
                self._check_end(file, handle, recorded_ends.get(file, (0, 0))[0])
                handle.write(b"".join(rows))
        for file in by_file:
            with self._stopping_on_error(file):
                handle = self._handles[file]
                handle.flush()
                os.fsync(handle.fileno())

    @contextmanager
    def _stopping_on_error(self, file: str) -> Iterator[None]:
        """An OSError writing ``file`` stops this writer, with a plain message."""
        try:
            yield
        except OSError as exc:
            path = self.folder / file
            self._broken = (
                f"writing rows to {path} failed: {_plain(exc)}; this writer stops. "
                f"{_advice(exc)}, then run the command again: rows already "
                "written are recorded then, none twice"
            )
            raise StorageError(self._broken, path=path) from exc

    def _check_end(self, file: str, handle: IO[bytes], expected: int) -> None:
        if handle.tell() != expected:
            raise CorruptLedger(
                f"{file} is {handle.tell()} bytes, but its recorded rows end at "
                f"{expected}: another process wrote to it; run "
                "`rollout-ledger verify`",
                path=self.folder / file,
            )

    def _handle(self, file: str) -> IO[bytes]:
        if file not in self._handles:
            handle = open_regular(self.folder / file, "ab")
            handle.seek(0, os.SEEK_END)
            self._handles[file] = handle
        return self._handles[file]

    def close(self) -> None:
        """Close the files (idempotent); a failed flush is a StorageError."""
        failed: tuple[str, OSError] | None = None
        for file, handle in self._handles.items():
            try:
                handle.close()
            except OSError as exc:  # the buffered rows could not be flushed
                failed = failed or (file, exc)
        self._handles.clear()
        if failed is not None:
            path = self.folder / failed[0]
            raise StorageError(
                f"closing {path} failed: {_plain(failed[1])}. {_advice(failed[1])}, "
                "then run the command again: rows already written are recorded "
                "then, none twice",
                path=path,
            ) from failed[1]


def _plain(exc: OSError) -> str:
    """The error in plain words ("no space left on device", "permission denied")."""
    return (exc.strerror or str(exc)).lower()


def _advice(exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "Free space on that disk"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "Make the file writable"
    return "Fix the cause"
