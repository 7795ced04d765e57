"""Outcome events an import read, encoded and held on disk until they are appended.

``legacy_imported`` (seq 2) counts every row read, imported and rejected, so
it can only be written once ``OUT`` has been read to its end, and the outcome
events follow it (REC-70). Holding them in memory until then grew with the run
(P-9: 4.7 GiB for a million rollouts); an anonymous temporary file holds their
encoded bodies instead (about a kilobyte a row, written and read back once),
and the import appends them from it in batches. The file has no name, so
nothing is left behind whatever happens to the process.
"""

from __future__ import annotations

import contextlib
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from ledger.errors import StorageError
from ledger.events import Event, decode_body, encode_body, kind_of

__all__ = ["EventSpool"]

# One record: the kind's number among those seen, the body's length, the body.
_HEADER = struct.Struct("<BI")


class EventSpool:
    """Encoded event bodies in the order they came, and how many of each kind."""

    def __init__(self, folder: Path | None = None) -> None:
        """Spool in ``folder`` (the run's: the space is taken on its disk) or,
        without one, in the system's temporary folder."""
        self._where = folder or Path(tempfile.gettempdir())
        with self._translated():
            self._file: IO[bytes] = tempfile.TemporaryFile(dir=folder)  # noqa: SIM115 - closed in close()
        self._numbers: dict[str, int] = {}
        self._kinds: list[str] = []
        #: Events per kind, in the order each kind first came.
        self.kinds: dict[str, int] = {}
        self.count = 0

    def add(self, body: Event) -> None:
        """Encode ``body`` and spool it."""
        self.add_encoded(kind_of(body), encode_body(body))

    def add_encoded(self, kind: str, data: bytes) -> None:
        """Spool a body of ``kind`` already encoded (``encode_body``'s bytes)."""
        number = self._numbers.get(kind)
        if number is None:
            number = self._numbers[kind] = len(self._kinds)
            self._kinds.append(kind)
            self.kinds[kind] = 0
        self.kinds[kind] += 1
        with self._translated():
            self._file.write(_HEADER.pack(number, len(data)))
            self._file.write(data)
        self.count += 1

    def finish(self) -> None:
        """Write out what is buffered: a full disk shows now, before the log."""
        with self._translated():
            self._file.flush()

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            said = str(exc.strerror or exc).lower()
            raise StorageError(
                f"could not hold the events read in a temporary file in "
                f"{self._where}: {said}; nothing was imported; free space on "
                "that disk, then run the command again",
                path=self._where,
            ) from exc

    def batches(self, size: int) -> Iterator[list[tuple[str, bytes]]]:
        """``(kind, body bytes)`` in order, ``size`` at a time (the last fewer)."""
        handle = self._file
        self.finish()
        handle.seek(0)
        batch: list[tuple[str, bytes]] = []
        for _ in range(self.count):
            number, length = _HEADER.unpack(handle.read(_HEADER.size))
            batch.append((self._kinds[number], handle.read(length)))
            if len(batch) == size:
                yield batch
                batch = []
        if batch:
            yield batch

    def bodies(self) -> Iterator[Event]:
        """The spooled events decoded, in order (a dry run shows them)."""
        for batch in self.batches(1000):
            for _, data in batch:
                yield decode_body(data)

    def close(self) -> None:
        """Drop the spooled events (the file goes with its last descriptor).

        What is still buffered is dropped too: a full disk that stopped the
        import must not hide its own message behind a second error here.
        """
        with contextlib.suppress(OSError):
            self._file.close()

    def __enter__(self) -> EventSpool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
