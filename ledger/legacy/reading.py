"""Reading the files of a run saved without a ledger, line by line (REC-71, REC-72).

Each line is a row or is rejected with its file, line number and a reason. The
materialized inputs define the run, so a bad input row refuses the import; a
bad outcome row is a rejection, which ``--skip-rejected`` may skip. Outcome
rows are turned into their events at once, so no row is held in memory.
"""

from __future__ import annotations

import hashlib
from collections import Counter, deque
from collections.abc import Callable, Collection
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ledger.errors import ConfigError, StorageError
from ledger.events import Event, LegacyRejection, LegacySource, decode_body
from ledger.files import open_regular
from ledger.identity.secrets.patterns import redact_secrets
from ledger.legacy.parsing import (
    BLANK,
    NO_INDEX,
    REASONS,
    TORN,
    UNKNOWN_KEY,
    Chunk,
    ChunkLines,
    Key,
    Parsed,
    RawLine,
    chunks,
    decode_line,
    parse_chunk,
    parse_line,
    raw_lines,
    row_key,
)

__all__ = [
    "NO_INDEX",
    "REASONS",
    "TORN",
    "Key",
    "Meter",
    "OutcomeReader",
    "Progress",
    "RawLine",
    "decode_line",
    "listing",
    "raw_lines",
    "row_key",
]

_REASON_LIMIT = 2000
_LISTED = 20
_PROGRESS_SHIFT = 20  # report progress once per MiB read

Progress = Callable[[int, int], None]

#: A file this large is parsed in other processes when ``jobs`` allows.
PARALLEL_BYTES = 1 << 24


def listing(problems: list[tuple[str, int, str]]) -> str:
    """Problems as indented ``file line N: reason`` lines, the first few of them."""
    shown = [f"  {file} line {line}: {reason}" for file, line, reason in problems]
    if len(shown) > _LISTED:
        shown[_LISTED:] = [f"  ... and {len(shown) - _LISTED} more"]
    return "\n".join(shown)


@dataclass
class Meter:
    """Work done of ``total``, reported to ``progress`` once per MiB and at the end.

    An import counts the bytes it reads, then as many again for the outcome
    rows it appends to the log, so the bar moves while the log is written too.
    """

    progress: Progress | None
    total: int
    done: int = 0

    def advance(self, read: int) -> None:
        """Count ``read`` more bytes read."""
        before, self.done = self.done, self.done + read
        if self.progress is not None and (
            self.done >> _PROGRESS_SHIFT > before >> _PROGRESS_SHIFT
            or self.done >= self.total
        ):
            self.progress(self.done, self.total)

    def finish(self) -> None:
        """All done (what was left to count was skipped: rejected rows, a dry run)."""
        if self.done < self.total:
            self.advance(self.total - self.done)


@dataclass
class OutcomeReader:
    """Reads the sidecar, then ``OUT``, into outcome events and rejections."""

    keys: Collection[Key]
    run_id: str
    #: Where each outcome event goes as it is read; without one, ``bodies``
    #: keeps them (an adoption's few rows). An import spools them (P-9).
    sink: Callable[[Event], None] | None = None
    bodies: list[Event] = field(default_factory=list)
    imported: int = 0
    rejections: list[LegacyRejection] = field(default_factory=list)
    rows_read: int = 0
    # REC-72: sidecar rows per key, counted as the older collector counted them.
    sidecar_rows: Counter[Key] = field(default_factory=Counter)
    # REC-82: moved rows' attempts, by key and own `_ng_attempt_index`.
    migrated: dict[tuple[Key, int | None], int] = field(default_factory=dict)
    #: Counts the bytes read, for the CLI's progress.
    meter: Meter | None = None
    #: Processes that parse a large file's lines (1: all in this one).
    jobs: int = 1
    #: Where a body encoded by a parsing process goes, as its kind and bytes
    #: (an import's spool); without one it is decoded for ``sink``.
    encoded_sink: Callable[[str, bytes], None] | None = None

    @property
    def failing(self) -> list[LegacyRejection]:
        """The rejections that make an import fail: every one but blank lines."""
        return [r for r in self.rejections if not r.reason.startswith(BLANK)]

    def read(self, path: Path, file: str, *, sidecar: bool) -> LegacySource | None:
        """Read one file in order; its source record, or ``None`` when missing."""
        try:
            handle = open_regular(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror}", path=path) from exc
        source = _Source(file)
        with handle:
            if self.jobs > 1 and path.stat().st_size >= PARALLEL_BYTES:
                self._read_parallel(handle, source, sidecar=sidecar)
            else:
                for line in raw_lines(handle):
                    self.take(line, file, sidecar=sidecar)
                    source.add(line.data, torn=line.torn, kept=line.kept)
                    if self.meter is not None:
                        self.meter.advance(len(line.data))
        return source.record()

    def _read_parallel(
        self, handle: IO[bytes], source: _Source, *, sidecar: bool
    ) -> None:
        """``read``, its lines parsed in ``jobs`` processes, placed here in order."""
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        spawn = multiprocessing.get_context("spawn")  # no SQLite handle crosses
        waiting: deque[tuple[Chunk, Future[ChunkLines]]] = deque()
        try:
            with ProcessPoolExecutor(self.jobs, mp_context=spawn) as pool:
                for chunk in chunks(handle):
                    job = pool.submit(
                        parse_chunk, chunk, source.file, self.run_id, sidecar
                    )
                    waiting.append((chunk, job))
                    if len(waiting) > 2 * self.jobs:
                        self._place_chunk(*waiting.popleft(), source, sidecar)
                while waiting:
                    self._place_chunk(*waiting.popleft(), source, sidecar)
        except (BrokenProcessPool, OSError) as exc:  # nothing was written yet
            raise StorageError(
                f"the processes reading {source.file} stopped ({exc}); nothing "
                "was recorded: run the import again with --jobs 1"
            ) from exc

    def _place_chunk(
        self, chunk: Chunk, job: Future[ChunkLines], source: _Source, sidecar: bool
    ) -> None:
        start = kept_end = 0
        for number, (length, torn, kept, parsed) in enumerate(
            job.result(), start=chunk.number
        ):
            line = RawLine(number, chunk.offset + start, b"")  # its bytes: below
            self._taken(line, self._place(parsed, line, sidecar), source.file)
            source.count(length, torn=torn, kept=kept)
            start += length
            kept_end = start if kept else kept_end
            if self.meter is not None:
                self.meter.advance(length)
        # The chunk's kept lines hashed at once: only a torn last line is not.
        source.digest.update(chunk.data[:kept_end])

    def count(self, line: RawLine) -> None:
        """Count a sidecar row already recorded, by its key (REC-72, REC-86).

        Attempts of rows adopted later are numbered over the whole run, so the
        sidecar rows an import or a writer recorded before count too.
        """
        row = decode_line(line)
        key = None if isinstance(row, str) else row_key(row)
        if key is not None:
            self.sidecar_rows[key] += 1

    def take(self, line: RawLine, file: str, *, sidecar: bool) -> None:
        """Read one line into an outcome event or a rejection (REC-71)."""
        parsed = parse_line(line, file, self.run_id, sidecar)
        self._taken(line, self._place(parsed, line, sidecar), file)

    def _taken(
        self, line: RawLine, taken: Event | tuple[str, bytes] | str, file: str
    ) -> None:
        self.rows_read += 1
        if isinstance(taken, tuple):  # a body encoded in a parsing process
            if self.encoded_sink is not None:
                self.imported += 1
                self.encoded_sink(*taken)
                return
            taken = decode_body(taken[1])
        if isinstance(taken, str):
            self.rejections.append(
                LegacyRejection(
                    file=file,
                    line=line.number,
                    reason=redact_secrets(taken)[:_REASON_LIMIT],
                )
            )
        else:
            self.imported += 1
            if self.sink is None:
                self.bodies.append(taken)
            else:
                self.sink(taken)

    def _place(
        self, parsed: Parsed | str, line: RawLine, sidecar: bool
    ) -> Event | tuple[str, bytes] | str:
        """What only the reader, reading in order, knows: the attempts the
        sidecar rows before this one number (REC-72), the keys, the moves."""
        if isinstance(parsed, str):
            return parsed
        key = parsed.key
        earlier = self.sidecar_rows[key]
        if sidecar:
            self.sidecar_rows[key] += 1
        if key not in self.keys:
            return f"{UNKNOWN_KEY} (task {key[0]}, rollout {key[1]})"
        if parsed.problem is not None:
            return parsed.problem
        # REC-72: the row's own attempt; else, in the sidecar, the earlier
        # sidecar rows of its key, and in OUT, all of them.
        attempt = parsed.own
        if attempt is None:
            attempt = earlier if sidecar else self.sidecar_rows[key]
        own = (key, parsed.own)
        if sidecar and parsed.migrated:  # REC-82: moved rows keep their attempt
            self.migrated.setdefault(own, attempt)
        elif not sidecar:
            attempt = self.migrated.get(own, attempt)
        if parsed.around is not None:  # encoded where it was parsed
            return parsed.encoded(attempt)
        return parsed.body(key, attempt, line.number)


@dataclass
class _Source:
    """What an import records of one file: the bytes of its kept lines."""

    file: str
    digest: Any = field(default_factory=hashlib.sha256)
    size: int = 0
    lines: int = 0

    def add(self, data: bytes, *, torn: bool, kept: bool) -> None:
        """A line, counted and hashed."""
        self.count(len(data), torn=torn, kept=kept)
        if kept:
            self.digest.update(data)

    def count(self, length: int, *, torn: bool, kept: bool) -> None:
        """A line counted (its bytes hashed by the caller when kept).

        A torn last line is not part of what the ledger records: a writer's
        open cuts and saves it (EV-12), so no later row is ever appended onto
        it (a kept one gets its newline).
        """
        if kept:
            self.size, self.lines = self.size + length, self.lines + (not torn)

    def record(self) -> LegacySource:
        return LegacySource(
            file=self.file,
            size=self.size,
            sha256=self.digest.hexdigest(),
            lines=self.lines,
        )
