"""The collector files a writer appends rows to: ``OUT`` and the sidecar (EV-12).

Rows are written before their events: appended in order, flushed and fsynced,
so a crash leaves at worst rows that the next writer's open records, never an
event pointing at nothing. The files stay open for the writer's life.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ledger.errors import CorruptLedger, LedgerError

if TYPE_CHECKING:
    from ledger.run.recorder import Prepared

__all__ = ["CollectorFiles"]


class CollectorFiles:
    """Appends prepared rows to the run folder's files, durably."""

    def __init__(self, folder: Path, *, durable: bool = True) -> None:
        self.folder = folder
        self._durable = durable
        self._handles: dict[str, IO[bytes]] = {}

    def write(self, ops: Sequence[Prepared]) -> None:
        """Write the rows of ``ops`` where they were located, then make them durable."""
        # One write per file and batch (P-7): the rows of a file are located
        # back to back, from where its recorded bytes end.
        by_file: dict[str, list[Prepared]] = {}
        for op in ops:
            if op.file is not None:
                by_file.setdefault(op.file, []).append(op)
        for file, group in by_file.items():
            handle = self._handle(file)
            expected = group[0].body.location.offset  # type: ignore[attr-defined]
            if handle.tell() != expected:
                raise CorruptLedger(
                    f"{file} is {handle.tell()} bytes, but its recorded rows end at "
                    f"{expected}: another process wrote to it; run "
                    "`rollout-ledger verify`",
                    path=self.folder / file,
                )
            for op in group:
                if op.body.location.offset != expected:  # type: ignore[attr-defined]
                    raise LedgerError(f"{file}: rows of one batch are not contiguous")
                expected += len(op.data)
            handle.write(b"".join(op.data for op in group))
        for file in by_file:
            handle = self._handles[file]
            handle.flush()
            if self._durable:
                os.fsync(handle.fileno())

    def _handle(self, file: str) -> IO[bytes]:
        if file not in self._handles:
            handle = open(self.folder / file, "ab")  # noqa: SIM115 - kept open
            handle.seek(0, os.SEEK_END)
            self._handles[file] = handle
        return self._handles[file]

    def close(self) -> None:
        """Close the files (idempotent)."""
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()
