"""Adopting rows a collector appended to a run that has a ledger (REC-86).

NeMo Gym's own ``--resume`` continues an imported run (or one this ledger
created) without the ledger: it appends rows to ``OUT`` and the sidecar. A
second ``import`` records exactly the rows past each file's last recorded row,
the sidecar's first, each in file order, as outcome events (actor ``import``),
their attempts numbered by REC-72 over the whole run: the sidecar rows of the
key already recorded count. Rows recorded before must still be as recorded
(R-7), or nothing is adopted. A torn last line and blank lines after the last
row are left to the next writer's open, which cuts and saves them (EV-12).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from ledger.clock import Clock
from ledger.collector_files.repair import Unrecorded
from ledger.errors import RowError
from ledger.events import (
    Event,
    LegacyRejection,
    StoredEvent,
    chain_hash,
    encode_body,
    kind_of,
)
from ledger.files import open_regular
from ledger.legacy.reading import OutcomeReader, RawLine, listing, raw_lines
from ledger.paths import RunPaths
from ledger.run.ledger import Ledger
from ledger.run.lock import RunLock
from ledger.run.write_index import WriteIndex
from ledger.store.decode import stored_from_row
from ledger.store.port import EventRow, NewEvent

__all__ = ["AdoptedRows", "Adoption", "adopt"]

ACTOR = "import"


class AdoptedRows(msgspec.Struct, frozen=True, kw_only=True):
    """The rows adopted (or to adopt) from one file: how many, from which line."""

    file: str
    rows: int
    first_line: int


@dataclass(frozen=True)
class Adoption:
    """What an adoption read and recorded (or, without a lock, would record)."""

    run_id: str
    rows_read: int
    files: tuple[AdoptedRows, ...]
    events: tuple[StoredEvent, ...]


def adopt(paths: RunPaths, *, lock: RunLock | None, clock: Clock) -> Adoption:
    """Adopt the rows past the recorded ends; without ``lock``, a dry run.

    Raises:
        CorruptLedger: a recorded row changed, or a file lost recorded bytes
            (R-7); nothing is adopted then.
        RowError: an appended line is not a row of this run (REC-71), listed
            with its file and line; nothing is adopted.
    """
    with Ledger.open(paths.out, lock=lock, clock=clock, adopting=True) as led:
        found = led.unrecorded()  # R-7 first
        index = led.write_index()
        reader = OutcomeReader(index.keys.keys(), index.run_id)
        _count_recorded_sidecar(paths, index, reader)
        files = _read_tails(paths, found, reader)
        if reader.rejections:
            raise _refused(paths, reader.rejections)
        bodies = reader.bodies
        if lock is not None and bodies:
            events = tuple(led.append_many(bodies, actor=ACTOR))
        else:
            events = _would_be(led.head(), bodies, clock)
    return Adoption(index.run_id, reader.rows_read, files, events)


def _count_recorded_sidecar(
    paths: RunPaths, index: WriteIndex, reader: OutcomeReader
) -> None:
    end = index.end_of(paths.relative(paths.sidecar)).offset
    if end == 0:
        return
    with open_regular(paths.sidecar) as handle:
        for line in raw_lines(handle):
            if line.offset >= end:
                break
            reader.count(line)


def _read_tails(
    paths: RunPaths, found: Sequence[Unrecorded], reader: OutcomeReader
) -> tuple[AdoptedRows, ...]:
    """The sidecar's new rows, then OUT's (REC-70's order), into ``reader``."""
    sidecar = paths.relative(paths.sidecar)
    files = []
    for tail in sorted(found, key=lambda u: u.file != sidecar):
        offset = tail.offset
        for number, data in enumerate(tail.rows):
            line = RawLine(tail.first_line + number, offset, data)
            reader.take(line, tail.file, sidecar=tail.file == sidecar)
            offset += len(data)
        if tail.rows:
            files.append(
                AdoptedRows(
                    file=tail.file, rows=len(tail.rows), first_line=tail.first_line
                )
            )
    return tuple(files)


def _refused(paths: RunPaths, rejections: Sequence[LegacyRejection]) -> RowError:
    first = rejections[0]
    many = len(rejections) != 1
    return RowError(
        f"{len(rejections)} line{'s' if many else ''} appended to {paths.out.name} "
        f"or its sidecar since the ledger last recorded {'them' if many else 'it'} "
        f"cannot be adopted, so nothing was recorded:\n"
        f"{listing([(r.file, r.line, r.reason) for r in rejections])}\n"
        "move these lines aside, then import again (--skip-rejected does not "
        "apply here: a skipped line would stay unrecorded between recorded rows)",
        path=paths.folder / first.file,
        line=first.line,
    )


def _would_be(
    head: tuple[int, bytes], bodies: Sequence[Event], clock: Clock
) -> tuple[StoredEvent, ...]:
    """The events as a writer would store them after ``head`` (a dry run)."""
    seq, prev = head
    stored = []
    for body in bodies:
        seq += 1
        event = NewEvent(kind_of(body), clock.now(), ACTOR, encode_body(body))
        digest = chain_hash(prev, seq, *event)
        stored.append(stored_from_row(EventRow(seq, *event, prev, digest), body))
        prev = digest
    return tuple(stored)
