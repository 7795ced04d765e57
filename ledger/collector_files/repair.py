r"""EV-12: compare the collector files with the log, and repair what a crash left.

A writer opens the run, then: bytes after the last newline (a torn last line)
are cut back and saved, and so are blank lines after the last row (a ``"\n"`` or
``"\r\n"`` another tool appended is not a row: left in place it would sit
between the recorded rows and the next one, and every later open would stop on
it); complete rows past the last recorded location are
recorded once (actor ``repair``) when each is the outcome of an attempt reserved
in this run, or of a released attempt whose reservation was lost with the
row's transaction (a ``record`` killed after its rows), or the row of an open
re-judgment; anything else refuses the open before anything is written (keyed
rows without a run id, another collector's, with the ``import`` that adopts
them, REC-86). A reader only reports what is pending.

REC-83: a last line that is a complete JSON object without its newline is
kept: the open appends the newline (``tail_repaired``) and records the row as
above if it is not. An import records such a row as it is, so the recorded
bytes may end without a newline, which the open appends (or records, when
another collector appended it).

Lines are numbered as the importer and ``verify`` number them: 1-based, split
at ``"\n"`` only (a ``"\r"`` belongs to its line). Before reading past the
recorded end, the open checks that the recorded rows still end there (a
newline before it, as many lines as recorded); when bytes were inserted or
changed before it, the first recorded row the file no longer holds is named,
the line ``verify`` names, instead of a line after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import msgspec

from ledger.collector_files.changed_rows import (
    Locations,
    changed_line,
    count_lines,
    refuse_changed_rows,
)
from ledger.collector_files.tail_repair import (
    append_newline,
    cut_tail,
    newline_after,
    open_end_of,
    record_newline,
    split_tail,
)
from ledger.collector_files.waiting import (
    ADOPT,
    adopt_advice,
    waiting_in,
    without_ledger,
)
from ledger.errors import (
    CorruptLedger,
    IdentityMismatch,
    LedgerError,
)
from ledger.events import TailRepaired
from ledger.files import open_regular, refuse_irregular
from ledger.paths import RunPaths
from ledger.run.recorder import Recorder, Staged
from ledger.run.write_index import FileEnd, WriteIndex
from ledger.store.prepared import Prepared

__all__ = ["REPAIRS", "PendingRepair", "Unrecorded", "find_unrecorded"]
__all__ += ["Locations", "refuse_changed_rows", "repair"]


@dataclass(frozen=True)
class Unrecorded:
    """Bytes of one collector file past its last recorded row."""

    file: str
    offset: int  # where the unrecorded bytes start
    first_line: int  # 1-based line number of the first unrecorded row
    rows: tuple[bytes, ...]  # complete lines, newline included
    torn: bytes  # bytes after the last newline
    #: Whitespace-only lines after the last row ("\n", "\r\n"): cut with ``torn``.
    blank: bytes = b""
    #: REC-83: where a writer's open appends the newline a last line that is
    #: a complete JSON object lacks (the last recorded row's, or the last of
    #: ``rows``, whose bytes there include it), or ``None``.
    newline_at: int | None = None
    #: REC-83: the offset of a newline another collector appended after the
    #: last recorded row, which lacked it; a writer's open records it.
    newline_found: int | None = None

    @property
    def cut(self) -> bytes:
        """The bytes a writer's open cuts back and saves: blank lines, torn line."""
        return self.blank + self.torn


@dataclass(frozen=True)
class PendingRepair:
    """What a writer's open would repair, as a reader reports it."""

    file: str
    line: int
    what: str  # one of REPAIRS

    @property
    def waiting(self) -> bool:
        """A row another collector appended, for ``import`` to adopt (REC-86)."""
        return self.what == ADOPT

    @property
    def fix(self) -> str:
        """What a writer's open does with it, in plain words."""
        return REPAIRS.get(self.what, "a writer's open repairs it")


UNRECORDED = "unrecorded row"
BLANK = "blank line after the last row"
BLANK_BETWEEN = "blank line before an unrecorded row"
TORN = "torn last line"
NO_NEWLINE = "last row without its newline"
NEWLINE_FOUND = "newline after a recorded row, not recorded"
#: Each kind of pending repair and what a writer's open does with it (EV-12).
REPAIRS = {
    UNRECORDED: "a writer's open records it",
    BLANK: "a writer's open cuts it back and saves its bytes in the ledger folder",
    BLANK_BETWEEN: "a writer's open refuses until it is removed",
    TORN: "a writer's open cuts it back and saves its bytes in the ledger folder",
    NO_NEWLINE: "a writer's open appends the newline and keeps the row",
    NEWLINE_FOUND: "a writer's open records it",
    ADOPT: "`rollout-ledger import OUT` adopts it",
}


def _ends_as_recorded(open_end: bool, end: FileEnd, lines: int) -> bool:
    """Whether the recorded rows still end at ``end``: a newline, as many lines."""
    return end.offset == 0 or (not open_end and lines == end.lines)


def _unrecorded_in(
    paths: RunPaths, file: str, end: FileEnd, locations: Locations | None = None
) -> Unrecorded | None:
    path = paths.folder / file
    if not refuse_irregular(path):
        if end.offset > 0:
            raise CorruptLedger(
                f"{path} is missing, but the ledger records rows in it up to byte "
                f"{end.offset}; restore it from a backup (rows were lost)",
                path=path,
            )
        return None
    size = path.stat().st_size
    if size < end.offset:
        line = changed_line(path, file, size, locations) or count_lines(path, size) + 1
        raise CorruptLedger(
            f"line {line} of {file} no longer holds the row the ledger recorded "
            f"there ({path} is {size} bytes, shorter than the {end.offset} bytes "
            "of recorded rows): rows were lost or edited; run `rollout-ledger verify`",
            path=path,
            line=line,
        )
    open_end = open_end_of(path, end)
    if size == end.offset:
        if not open_end:
            return None
        # REC-83: the last recorded row, kept without its newline by an import.
        line = count_lines(path, end.offset) + 1
        return Unrecorded(file, end.offset, line, (), b"", newline_at=end.offset)
    lines = count_lines(path, end.offset)
    if not _ends_as_recorded(open_end, end, lines):
        # Bytes inserted (a "\r\n", a line) or removed before the recorded end
        # shift what is past it: name the first row that moved, not the tail.
        changed = changed_line(path, file, size, locations)
        if changed is not None:
            raise CorruptLedger(
                f"line {changed} of {file} no longer holds the row the ledger "
                "recorded there (bytes were inserted, removed or changed before "
                f"byte {end.offset}, where the recorded rows end): rows were edited; "
                "run `rollout-ledger verify`, and restore the file from a backup",
                path=path,
                line=changed,
            )
    with open_regular(path) as handle:
        handle.seek(end.offset)
        tail = handle.read()
    offset, first_line, found = end.offset, lines + 1, None
    if open_end:
        found, offset, first_line = newline_after(file, end, lines, tail)
        tail = tail[1:]
    rows, blank, torn, kept = split_tail(tail)
    newline_at = offset + len(tail) if kept else None
    return Unrecorded(
        file, offset, first_line, rows, torn, blank, newline_at, newline_found=found
    )


def find_unrecorded(
    paths: RunPaths, index: WriteIndex, locations: Locations | None = None
) -> Iterator[Unrecorded]:
    """The bytes of OUT and the sidecar past its last recorded row."""
    for path in (paths.out, paths.sidecar):
        file = paths.relative(path)
        found = _unrecorded_in(paths, file, index.end_of(file), locations)
        if found is not None:
            yield found


def pending_repairs(
    paths: RunPaths, index: WriteIndex, locations: Locations | None = None
) -> list[PendingRepair]:
    """What a writer would repair, for readers to report (EV-12: "pending repair")."""
    pending = []
    for found in find_unrecorded(paths, index, locations):
        line = found.first_line
        if found.newline_found is not None:  # after the recorded row, a line up
            pending.append(PendingRepair(found.file, line - 1, NEWLINE_FOUND))
        for data in found.rows:
            what = _kind_of(data)
            pending.append(PendingRepair(found.file, line, what))
            line += 1
        if found.newline_at is not None:  # REC-83: the last row, kept
            pending.append(
                PendingRepair(found.file, max(line - 1, found.first_line), NO_NEWLINE)
            )
        for _ in range(found.blank.count(b"\n")):
            pending.append(PendingRepair(found.file, line, BLANK))
            line += 1
        if found.torn:
            pending.append(PendingRepair(found.file, line, TORN))
    return pending


def _kind_of(data: bytes) -> str:
    if not data.strip():
        return BLANK_BETWEEN
    # REC-86: no run id: another collector's row, for `import` to adopt.
    return ADOPT if without_ledger(data) else UNRECORDED


def _decode_line(found: Unrecorded, number: int, data: bytes) -> dict[str, object]:
    line = found.first_line + number
    if not data.strip():
        raise IdentityMismatch(
            f"line {line} of {found.file} is blank, and rows the ledger has not "
            "recorded follow it; remove the blank line, then open the run again",
            path=found.file,
            line=line,
        )
    try:
        row = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError):
        row = None
    if not isinstance(row, dict):
        raise IdentityMismatch(
            f"line {line} of {found.file} is not a JSON row and is not recorded in the "
            "ledger; move it aside, then open the run again",
            path=found.file,
            line=line,
        )
    return row


def _prepare_rows(recorder: Recorder, found: list[Unrecorded]) -> list[Prepared]:
    staged = Staged()
    prepared = []
    for unrecorded in found:
        for number, data in enumerate(unrecorded.rows):
            row = _decode_line(unrecorded, number, data)
            try:
                reserve = _reservation_lost(recorder, row, staged)
                if reserve is not None:
                    prepared.append(reserve)
                op = recorder.prepare_record(row, staged, raw=data)
            except LedgerError as exc:
                line = unrecorded.first_line + number
                raise IdentityMismatch(
                    f"line {line} of {unrecorded.file} is not recorded in the ledger "
                    "and is not an outcome of an attempt released or reserved in "
                    f"this run ({exc}); nothing was changed",
                    path=unrecorded.file,
                    line=line,
                ) from exc
            if op is not None:
                prepared.append(op)
    return prepared


def _reservation_lost(
    recorder: Recorder, row: dict[str, object], staged: Staged
) -> Prepared | None:
    """The reservation a row's transaction would have held, when it was lost.

    ``record`` reserves and records each row in one transaction after writing
    the rows (CLI-5, EV-12): killed between the two, or its commit failing on
    a full disk, it leaves rows of released attempts that nobody reserved. The
    row is what that transaction would have recorded, so the open reserves
    the attempt and records the row, once (actor ``repair``). A row of an
    attempt that is not released (a late or foreign row) is still refused.
    A re-judgment row is left to its open admission.
    """
    if "_ng_rejudgment" in row:
        return None
    attempt = recorder.attempt_named(row)
    if attempt in recorder.index.reserved or attempt in staged.reserved:
        return None
    return recorder.prepare_reserve(row, staged)


def repair(
    paths: RunPaths, recorder: Recorder, locations: Locations | None = None
) -> int:
    """EV-12 on a writer's open; returns how many repair events were appended."""
    found = list(find_unrecorded(paths, recorder.index, locations))
    if not found:
        return 0
    for unrecorded in found:  # a blank line between rows is refused first
        for number, data in enumerate(unrecorded.rows):
            if not data.strip():
                _decode_line(unrecorded, number, data)
    waiting = waiting_in((u.file, u.first_line, u.rows) for u in found)
    if waiting:  # REC-86: not a crash's leftovers; `import` adopts them
        raise IdentityMismatch(
            f"{adopt_advice(str(paths.out), waiting)}, then run this command "
            "again; nothing was changed",
            path=waiting[0].file,
            line=waiting[0].first_line,
        )
    prepared = _prepare_rows(recorder, found)  # refuses before anything changes
    tails = [_tail_repair(paths, unrecorded) for unrecorded in found]
    appended = 0
    if any(tails):
        events = [Prepared(event) for events in tails for event in events]
        appended += len(recorder.commit(events, actor="repair", written=True))
    appended += len(recorder.commit(prepared, actor="repair", written=True))
    return appended


def _tail_repair(paths: RunPaths, found: Unrecorded) -> list[TailRepaired]:
    """Complete the kept last line, or cut back what follows the last row."""
    done = []
    if found.newline_found is not None:  # REC-83: another collector's newline
        done.append(record_newline(found.file, found.newline_found))
    if found.newline_at is not None:  # REC-83: kept, so completed
        done.append(append_newline(paths, found.file, found.newline_at))
    if found.cut:
        # A blank line another tool appended after the last row is cut like a
        # torn line, not kept: kept, the next row would land after it, and it
        # would sit unrecorded between recorded rows, stopping every later open.
        offset = found.offset + sum(len(row) for row in found.rows)
        done.append(cut_tail(paths, found.file, offset, found.cut))
    return done
