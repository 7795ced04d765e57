"""``verify``: every check of CLI-9, returned as findings (empty: all hold).

The hash chain (EV-2), every recorded row against its file (bytes present,
sha256 equal), unrecorded or torn bytes (EV-12, pending repair), two refolds
from seq 1 compared byte for byte (R-3), the materialized inputs' digest, and
the published files against fresh projections (events.md). A reader's job:
nothing is modified. ``verify_run`` adds the head the findings are about.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import msgspec

from ledger import Aside, Ledger, LedgerError, aside_pays, plural
from ledger.collector_files.rows_seen import file_shape
from ledger.events import IndexEntry
from ledger.store.materialize import index_entry
from projections.decisions.rules import Decision, decide_all
from projections.fold.left import open_problems
from projections.fold.reading import replay
from projections.fold.state import RunState
from projections.views.published import rendered_files
from projections.views.row_checks import (
    Finding,
    findings_of,
    log_checks,
    log_checks_at,
    recorded_places,
    safely,
)
from projections.views.snapshot_checks import index_problems, state_problems
from projections.views.status import adopt_note

__all__ = [
    "Finding",
    "Verification",
    "hashed_before",
    "log_checks_at",
    "note_hashed",
    "recorded_places",
    "verify",
    "verify_run",
]

_CHUNK = 1 << 20
Decisions = dict[tuple[int, int], Decision]


class Verification(msgspec.Struct, frozen=True, kw_only=True):
    """The findings of ``verify`` (empty: all hold) and the head they are about."""

    findings: tuple[Finding, ...]
    seq: int
    head: bytes
    #: Rows another collector appended, waiting to be adopted (REC-86): not
    #: findings; what waits and the command that adopts it, or ``None``.
    waiting: str | None = None
    #: When only what came after the last proof was checked (issue 30): the
    #: seq that proof ends at (``None``: every check, every byte, now).
    proved_up_to: int | None = None
    #: What was checked, in words a person reads ("" for a full verify).
    words: str = ""


def _refold(ledger: Ledger) -> tuple[RunState | None, list[Finding]]:
    try:
        first = replay(ledger, use_snapshot=False)  # CLI-9: from seq 1
        second = replay(ledger, use_snapshot=False)
    except LedgerError as exc:
        return None, [Finding("replay", str(exc), seq=getattr(exc, "seq", None))]
    # Insertion order is the log's order, so equal folds give equal bytes.
    encode = msgspec.msgpack.Encoder().encode
    try:
        differ = encode(first) != encode(second)
    except OverflowError:  # a number over 64 bits, from an old log
        differ = first != second
    if differ:
        return first, [Finding("replay", "two refolds from seq 1 differ")]
    return first, []


#: Whole files hashed in this process, by identity and times (issue 30: the
#: proof's thread and the inputs' check read the same file once between them).
_HASHED: dict[tuple[int, int, int, int, int], str] = {}


def hashed_before(path: Path) -> str | None:
    """The sha256 of ``path`` if this process hashed it whole as it is now."""
    key = file_shape(path)
    return None if key is None else _HASHED.get(key)


def note_hashed(path: Path, before: object, sha256: str) -> None:
    """Note ``path``'s whole sha256, read while its identity stayed ``before``."""
    key = file_shape(path)
    if key is not None and key == before:
        _HASHED[key] = sha256


def _inputs_digest(ledger: Ledger, name: str) -> str:
    """The materialized inputs' sha256, read whole (once in this process)."""
    path = None if ledger.folder is None else ledger.folder / name
    if path is not None and (known := hashed_before(path)) is not None:
        return known
    before = None if path is None else file_shape(path)
    digest = hashlib.sha256()
    for chunk in ledger.files.chunks(name):
        digest.update(chunk)
    if path is not None:
        note_hashed(path, before, digest.hexdigest())
    return digest.hexdigest()


def _materialized(
    ledger: Ledger, state: RunState, decisions: Decisions
) -> list[Finding]:
    name = ledger.files.names.materialized
    expected = state.manifest.get("materialized_digest")
    try:
        found = _inputs_digest(ledger, name)
    except OSError as exc:
        return [Finding("inputs", f"cannot read it ({exc.strerror})", file=name)]
    path = None if ledger.folder is None else ledger.folder / name
    left = [  # P-8: the snapshot of what is left, and what it trusts of the file
        Finding("snapshot", text, seq=seq)
        for text, seq in open_problems(ledger, path, found, state, decisions)
    ]
    if found != expected:
        lines = safely("inputs", lambda led: _changed_inputs(led, name), ledger)
        told = "" if lines else _UNTOLD
        return [
            Finding(
                "inputs",
                f"its sha256 is not the manifest's materialized_digest{told}",
                file=name,
            ),
            *lines,
            *left,
        ]
    return left


#: Said when no line differs from what run_created records of each input row.
_UNTOLD = (
    "; no row differs from what run_created records of each (its length, task "
    "and rollout indices, agent and rollout id), so the changed bytes lie inside "
    "a value and their line cannot be told: compare the file with a backup"
)
_MAX_INPUT_LINES = 100


def _changed_inputs(ledger: Ledger, name: str) -> list[Finding]:
    """R-7: each line of the materialized inputs that is not the row recorded.

    ``run_created`` records of each row its length, keys, agent and rollout id
    (its index), not its bytes; a line whose length, JSON or index entry
    differs is named, lines counted from 1 at each ``"\n"``.
    """
    index = ledger.run_created().index
    if not index:
        return []
    findings: list[Finding] = []
    number = 0
    for number, data in enumerate(_lines(ledger.files.chunks(name)), start=1):
        entry = index[number - 1] if number <= len(index) else None
        problem = _input_problem(data, entry, number)
        if problem is not None:
            findings.append(Finding("inputs", problem, file=name, line=number))
            if len(findings) == _MAX_INPUT_LINES:
                findings.append(Finding("inputs", "more lines differ", file=name))
                return findings
    if number < len(index):
        findings.append(
            Finding(
                "inputs",
                f"the file ends at line {number} but {plural(len(index), 'row')} "
                f"{'was' if len(index) == 1 else 'were'} recorded",
                file=name,
                line=number + 1,
            )
        )
    return findings


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The file's lines, each with its ``"\n"`` (the last may lack it)."""
    rest = b""
    for chunk in chunks:
        rest += chunk
        *whole, rest = rest.split(b"\n")
        for line in whole:
            yield line + b"\n"
    if rest:
        yield rest


def _input_problem(data: bytes, entry: IndexEntry | None, line: int) -> str | None:
    if entry is None:
        return "a row after the last one recorded when the run was created"
    if len(data) != entry[3]:
        return f"{len(data)} bytes where the recorded row had {entry[3]}"
    try:
        found = index_entry(
            msgspec.json.decode(data), line=line, offset=entry[2], length=len(data)
        )
    except (msgspec.DecodeError, RecursionError, LedgerError):
        return "no longer the JSON object recorded when the run was created"
    if found != entry:
        return (
            "its indices, agent or rollout id differ from those recorded when the "
            "run was created"
        )
    return None


def _published(ledger: Ledger, state: RunState, decisions: Decisions) -> list[Finding]:
    findings: list[Finding] = []
    rendered = rendered_files(state, decisions)
    for name, expected in rendered.items():
        if name == "coverage.json":
            findings.extend(_coverage_file(ledger, name, state, expected))
            continue
        actual = ledger.files.read_published(name)
        if actual != expected and (expected or actual):
            what = "missing" if actual is None else "does not match the log"
            fix = "rewrite it with `rollout-ledger status --publish`"
            findings.append(Finding("published", f"{what}; {fix}", file=name))
    return findings


def _coverage_file(
    ledger: Ledger, name: str, state: RunState, at_head: bytes | None
) -> list[Finding]:
    # events.md: coverage.json must match the projection at its own as_of_seq.
    fix = "rewrite it with `rollout-ledger status --publish`"
    data = ledger.files.read_published(name)
    try:
        saved = msgspec.json.decode(data or b"")
        as_of = int(saved["as_of_seq"])
    except (msgspec.DecodeError, RecursionError, KeyError, TypeError, ValueError):
        return [Finding("published", f"missing or unreadable; {fix}", file=name)]
    if as_of == state.as_of_seq:  # the usual case: written at the head
        at_seq = at_head
    else:
        events = [e for e in ledger.events() if e.seq <= as_of]
        at_seq = rendered_files(replay(events))["coverage.json"]
    if at_seq != data:
        return [
            Finding(
                "published",
                f"does not match the log at seq {as_of}; {fix}",
                file=name,
            )
        ]
    return []


def verify(ledger: Ledger, *, jobs: int | None = None) -> list[Finding]:
    """Every check of CLI-9; an empty list means everything holds.

    ``jobs``: 2 or more reads the log's own checks (the chain, every row
    against its file, the write index's ends) in a second process while this
    one refolds (issue 30: the two halves each read the whole log); 1 checks
    all in this process. By default, two for a run in files with a log of
    50,000 events or more where this machine has two CPUs (``aside_pays``).
    The findings are the same, in the same order, whatever the number.
    """
    aside = _aside(ledger, jobs)
    if aside is None:
        log, ends = log_checks(ledger)
    state, refold = _refold(ledger)
    found = []
    if state is not None:
        decisions = decide_all(state)  # once, for the two checks that decide
        found = _materialized(ledger, state, decisions)
        found += _published(ledger, state, decisions)
        found += findings_of(state_problems(ledger, state))
        indexed = safely(
            "snapshot", lambda led: findings_of(index_problems(led)), ledger
        )
        found += indexed
    if aside is not None:  # the same checks here if it gave no answer
        log, ends = aside.result(lambda: log_checks(ledger))
    findings = log + refold + found
    return findings + ends if state is not None else findings


def _aside(
    ledger: Ledger, jobs: int | None
) -> Aside[tuple[list[Finding], list[Finding]]] | None:
    """The log's checks started in a second process, or ``None`` (here)."""
    if ledger.folder is None:
        return None
    if jobs is None:
        jobs = 2 if aside_pays(ledger.head()[0]) else 1
    if jobs < 2:
        return None
    return Aside(log_checks_at, str(ledger.paths.out))


def verify_run(ledger: Ledger, *, jobs: int | None = None) -> Verification:
    """``verify`` (in ``jobs`` processes), and the run's last seq and head hash."""
    findings = verify(ledger, jobs=jobs)
    seq, head = ledger.head()
    try:
        waiting = adopt_note(ledger)
    except LedgerError:  # a changed row: a finding of its own already
        waiting = None
    return Verification(findings=tuple(findings), seq=seq, head=head, waiting=waiting)
