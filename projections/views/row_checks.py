"""``verify``'s checks of the log and the collector files (CLI-9, EV-2, R-7).

The hash chain recomputed, every recorded row read at its place and hashed
against its event, the bytes a writer's open would repair (EV-12), and the
write index's stored file ends against the events they cover: the checks that
read the log and the files, not a fold of them. ``log_checks`` makes them in
one pass over the log (issue 30); ``log_checks_at`` is that pass in a second
process, beside ``verify``'s refolds.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterator

import msgspec

from ledger import Ledger, LedgerError, plural
from ledger.events import Location, StoredEvent
from ledger.store.chain import first_chain_break
from ledger.store.decode import decode_row
from ledger.store.port import EventRow, RunFiles
from ledger.store.run_files import ChunkReader
from projections.views.snapshot_checks import EndsCheck, ends_problems

__all__ = [
    "Finding",
    "findings_of",
    "log_checks",
    "log_checks_at",
    "recorded_places",
    "safely",
]

_CHUNK = 1 << 20


class Finding(msgspec.Struct, frozen=True):
    """One check that does not hold, and where (seq, or file and line)."""

    check: str
    message: str
    seq: int | None = None
    file: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = f"seq {self.seq}: " if self.seq is not None else ""
        if self.file is not None:
            where = f"{self.file}" + (f" line {self.line}" if self.line else "") + ": "
        return f"{self.check}: {where}{self.message}"


def _chain(ledger: Ledger) -> list[Finding]:
    broken = ledger.verify_chain()
    if broken is None:
        return []
    return [Finding("chain", broken.reason, seq=broken.seq)]


def recorded_places(
    ledger: Ledger, from_seq: int = 1
) -> Iterator[tuple[Location, int]]:
    """Each recorded row's place and its event's seq, from ``from_seq`` on."""
    for event in ledger.events(from_seq):
        where = getattr(event.body, "location", None)
        if isinstance(where, Location):
            yield where, event.seq


def _locations(
    ledger: Ledger, ends: EndsCheck | None = None
) -> dict[str, list[tuple[int, int, str, int]]]:
    """Each file's recorded rows; ``ends`` sees every event on the way."""
    by_file: dict[str, list[tuple[int, int, str, int]]] = defaultdict(list)
    for event in ledger.events(1):
        _place(by_file, ends, event)
    return by_file


def _place(
    by_file: dict[str, list[tuple[int, int, str, int]]],
    ends: EndsCheck | None,
    event: StoredEvent,
) -> None:
    """``event``'s row place noted in ``by_file``, and ``event`` shown to ``ends``."""
    if ends is not None:
        ends.add(event)
    where = getattr(event.body, "location", None)
    if isinstance(where, Location):
        by_file[where.file].append(
            (where.offset, where.length, where.row_sha256, event.seq)
        )


def _check_file(
    files: RunFiles, file: str, rows: list[tuple[int, int, str, int]]
) -> Iterator[Finding]:
    chunks = files.chunks(file)
    try:
        first = next(chunks, b"")
    except FileNotFoundError:
        yield Finding(
            "rows",
            f"missing, but {plural(len(rows), 'recorded row')} "
            f"{'is' if len(rows) == 1 else 'are'} in it",
            file=file,
        )
        return
    handle = ChunkReader(itertools.chain([first], chunks))
    line, position = 1, 0
    for offset, length, digest, seq in sorted(rows):
        while position < offset:  # count the lines before this row
            chunk = handle.read(min(_CHUNK, offset - position))
            if not chunk:
                break
            line += chunk.count(b"\n")
            position += len(chunk)
        data = handle.read(length)
        position += len(data)
        if len(data) < length:
            yield Finding(
                "rows",
                f"the row of seq {seq} is missing (file truncated)",
                seq=seq,
                file=file,
                line=line,
            )
            return
        if hashlib.sha256(data).hexdigest() != digest:
            yield Finding(
                "rows",
                f"the row of seq {seq} changed since it was recorded",
                seq=seq,
                file=file,
                line=line,
            )
        line += data.count(b"\n")


def _rows(ledger: Ledger) -> list[Finding]:
    return _rows_in(ledger, _locations(ledger))


def _rows_in(
    ledger: Ledger, by_file: dict[str, list[tuple[int, int, str, int]]]
) -> list[Finding]:
    findings: list[Finding] = []
    for file, rows in sorted(by_file.items()):
        findings.extend(_check_file(ledger.files, file, rows))
    return findings


def _pending(ledger: Ledger) -> list[Finding]:
    try:
        pending = ledger.pending_repairs()
    except LedgerError as exc:  # what a writer's open would refuse, as it names it
        return [Finding("repair", str(exc))]
    return [
        Finding(
            "repair", f"{p.what}: pending repair ({p.fix})", file=p.file, line=p.line
        )
        for p in pending
        if not p.waiting  # REC-86: waiting to be adopted, not damage
    ]


def findings_of(problems: list[tuple[str, int]]) -> list[Finding]:
    return [Finding("snapshot", message, seq=seq) for message, seq in problems]


def safely(
    check: str, run: Callable[[Ledger], list[Finding]], ledger: Ledger
) -> list[Finding]:
    # One damaged event must not hide the other checks' findings (CLI-9).
    try:
        return run(ledger)
    except LedgerError as exc:
        return [Finding(check, str(exc), seq=getattr(exc, "seq", None))]


def log_checks(ledger: Ledger) -> tuple[list[Finding], list[Finding]]:
    """The checks that read the log and the files, not the fold: the chain,
    the rows, pending repairs; and the write index's ends (apart: they count
    only when the refold holds)."""
    try:  # one pass: the chain, the rows' places, the events the ends cover
        ends = EndsCheck(ledger)
        chain, by_file = _log_pass(ledger, ends)
    except LedgerError:  # each on its own, for its own finding (CLI-9)
        rows = safely("rows", _rows, ledger)
        return _chain(ledger) + rows + _pending(ledger), safely(
            "snapshot", lambda led: findings_of(ends_problems(led)), ledger
        )
    rows = safely("rows", lambda led: _rows_in(led, by_file), ledger)
    return chain + rows + _pending(ledger), findings_of(ends.problems())


def _log_pass(
    ledger: Ledger, ends: EndsCheck
) -> tuple[list[Finding], dict[str, list[tuple[int, int, str, int]]]]:
    """The log read once for three checks: the hash chain recomputed
    (``_chain``'s finding), and each event decoded for its row's place and
    for the write index's ends. ``LedgerError``: an event does not decode."""
    by_file: dict[str, list[tuple[int, int, str, int]]] = defaultdict(list)
    where = ledger.where

    def read() -> Iterator[EventRow]:
        for row in ledger.raw_events(1):
            _place(by_file, ends, decode_row(row, path=where))
            yield row

    rows = read()
    broken = first_chain_break(rows)
    for _ in rows:  # past a break, the places and ends are read all the same
        pass
    chain = [] if broken is None else [Finding("chain", broken.reason, seq=broken.seq)]
    return chain, by_file


def log_checks_at(out: str) -> tuple[list[Finding], list[Finding]]:
    """``log_checks`` of the run at ``out``, opened here (the second process)."""
    from ledger import open_run

    with open_run(out, check_head=False) as ledger:
        return log_checks(ledger)
