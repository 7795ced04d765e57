"""Reading the files of a run saved without a ledger, line by line (REC-71, REC-72).

Each line is a row or is rejected with its file, line number and a reason. The
materialized inputs define the run, so a bad input row refuses the import; a
bad outcome row is a rejection, which ``--skip-rejected`` may skip. Outcome
rows are turned into their events at once, so no row is held in memory.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

import msgspec

from ledger.bounds import MAX_ATTEMPT_INDEX
from ledger.errors import ConfigError
from ledger.events import (
    Event,
    FailureSaved,
    LegacyRejection,
    LegacySource,
    Location,
    OmissionSaved,
    ResultSaved,
)
from ledger.files import open_regular
from ledger.identity.secrets.patterns import redact_secrets
from ledger.jsonl import is_json_object
from ledger.rows.all_facts import row_facts
from ledger.rows.kinds import omission_reason, row_route
from ledger.rows.stages import stage_event_fields
from ledger.rows.values import brief

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

# REC-71: every reason starts with one of these phrases, so tools and tests can
# group rejections; the rest of the reason says what exactly was found.
BLANK: Final = "blank line"
NOT_JSON: Final = "not JSON"
PLACEHOLDER: Final = "a <PLACEHOLDER ROW> line"
NOT_OBJECT: Final = "not a JSON object"
NO_INDEX: Final = "no integer task/rollout index"
UNKNOWN_KEY: Final = "key not among the materialized rows"
TORN: Final = "torn last line"
OTHER_RUN: Final = "_ng_run_id of another run"
BAD_ATTEMPT: Final = "no integer _ng_attempt_index"
NOT_FAILURE: Final = "not a failure row"
OMISSION_IN_OUT: Final = "an omission stand-in outside the sidecar"
NO_PERSIST: Final = "marked _ng_no_persist"
REASONS: Final = (
    BLANK, NOT_JSON, PLACEHOLDER, NOT_OBJECT, NO_INDEX, UNKNOWN_KEY, TORN,
    OTHER_RUN, BAD_ATTEMPT, NOT_FAILURE, OMISSION_IN_OUT, NO_PERSIST,
)  # fmt: skip

_PLACEHOLDER_LINE = b"<PLACEHOLDER ROW>"
# Keys and attempts are stored as 64-bit integers (SQLite, msgspec).
_MAX_INDEX = 2**63 - 1
_REASON_LIMIT = 2000
_LISTED = 20
_DECODER = msgspec.json.Decoder()
_PROGRESS_SHIFT = 20  # report progress once per MiB read

_JSON_TYPES: Final = {
    list: "array", str: "string", int: "number", float: "number",
    bool: "boolean", type(None): "null",
}  # fmt: skip

Progress = Callable[[int, int], None]

Key = tuple[int, int]


@dataclass(frozen=True, slots=True)
class RawLine:
    """One line of a file: its 1-based number, offset and bytes (newline included)."""

    number: int
    offset: int
    data: bytes

    @property
    def torn(self) -> bool:
        """No newline at its end: the last line, perhaps cut short (EV-12, REC-83)."""
        return not self.data.endswith(b"\n")

    @property
    def kept(self) -> bool:
        """A whole line, or (REC-83) a last one that is a complete JSON object.

        Such a line is kept, as 0.7.0 keeps it (a writer's open appends its
        newline); any other unterminated line is torn, for the open to cut.
        """
        return not self.torn or is_json_object(self.data)

    @property
    def blank(self) -> bool:
        """Whitespace only."""
        return not self.data.strip()


def raw_lines(handle: IO[bytes]) -> Iterator[RawLine]:
    """The lines of a binary file in order, streamed."""
    offset = 0
    for number, data in enumerate(handle, start=1):
        yield RawLine(number, offset, data)
        offset += len(data)


def decode_line(line: RawLine) -> dict[str, Any] | str:
    """The line's JSON object, or the reason it is not one (REC-71)."""
    if line.data.strip() == _PLACEHOLDER_LINE:
        return f"{PLACEHOLDER}, not a row"
    try:
        value = _DECODER.decode(line.data)
    except (msgspec.DecodeError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        return f"{NOT_JSON} ({reason})"
    if not isinstance(value, dict):
        return f"{NOT_OBJECT} (a JSON {_JSON_TYPES.get(type(value), 'value')})"
    return value


def _index(row: Mapping[str, Any], name: str) -> int | None:
    value = row.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= _MAX_INDEX else None


def row_key(row: Mapping[str, Any]) -> Key | None:
    task, rollout = _index(row, "_ng_task_index"), _index(row, "_ng_rollout_index")
    return None if task is None or rollout is None else (task, rollout)


def listing(problems: list[tuple[str, int, str]]) -> str:
    """Problems as indented ``file line N: reason`` lines, the first few of them."""
    shown = [f"  {file} line {line}: {reason}" for file, line, reason in problems]
    if len(shown) > _LISTED:
        shown[_LISTED:] = [f"  ... and {len(shown) - _LISTED} more"]
    return "\n".join(shown)


# Outcome rows: the sidecar, then OUT.


def _attempt(row: Mapping[str, Any], default: int) -> int | None:
    if row.get("_ng_attempt_index") is None:
        return default
    attempt = _index(row, "_ng_attempt_index")
    return None if attempt is None or attempt > MAX_ATTEMPT_INDEX else attempt


def _misfit(row: Mapping[str, Any], run_id: str, *, sidecar: bool) -> str | None:
    """Why a keyed row cannot be an outcome of this run, or ``None``."""
    saved = row.get("_ng_run_id")
    if saved is not None and saved != run_id:
        # ID-40: dispatched under another run; it does not verify against this one.
        return f"{OTHER_RUN} ({brief(saved)}, not {run_id!r})"
    route = row_route(row)
    if route == "nowhere":
        return f"{NO_PERSIST}: its collector writes such rows nowhere"
    if sidecar and route == "result":
        # Every legacy writer stamps its sidecar rows; an unstamped one has no
        # failure to classify, and its reward 0.0 is a placeholder (ROW-12).
        return f"{NOT_FAILURE}: no _ng_failure_class or _ng_failure_record"
    if not sidecar and route == "omission":
        return f"{OMISSION_IN_OUT}: _ng_omitted rows belong in the sidecar"
    return None


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
        digest, size, lines = hashlib.sha256(), 0, 0
        with handle:
            for line in raw_lines(handle):
                self.take(line, file, sidecar=sidecar)
                if self.meter is not None:
                    self.meter.advance(len(line.data))
                if line.kept:
                    # A torn last line is not part of what the ledger records:
                    # a writer's open cuts and saves it (EV-12), so no later row
                    # is ever appended onto it (a kept one gets its newline).
                    digest.update(line.data)
                    size, lines = size + len(line.data), lines + (not line.torn)
        return LegacySource(
            file=file, size=size, sha256=digest.hexdigest(), lines=lines
        )

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
        self.rows_read += 1
        taken = self._take(line, file, sidecar=sidecar)
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

    def _take(self, line: RawLine, file: str, *, sidecar: bool) -> Event | str:
        if line.blank:
            return BLANK
        row = decode_line(line)
        if isinstance(row, str):
            if line.torn:  # REC-83: only a last line that is no JSON object
                return (
                    f"{TORN}: no newline at its end and not a complete JSON "
                    "object, so its write was cut short"
                )
            return row
        key = row_key(row)
        if key is None:
            return f"{NO_INDEX} (_ng_task_index, _ng_rollout_index)"
        earlier = self.sidecar_rows[key]
        if sidecar:
            self.sidecar_rows[key] += 1
        if key not in self.keys:
            return f"{UNKNOWN_KEY} (task {key[0]}, rollout {key[1]})"
        misfit = _misfit(row, self.run_id, sidecar=sidecar)
        if misfit is not None:
            return misfit
        # REC-72: the row's own attempt; else, in the sidecar, the earlier
        # sidecar rows of its key, and in OUT, all of them.
        attempt = _attempt(row, earlier if sidecar else self.sidecar_rows[key])
        if attempt is None:
            return (
                f"{BAD_ATTEMPT} from 0 to {MAX_ATTEMPT_INDEX} "
                f"({brief(row.get('_ng_attempt_index'))})"
            )
        attempt = self._migration(row, key, attempt, sidecar=sidecar)
        staged = stage_event_fields(row)  # ROW-64: a multistage row's stage
        if isinstance(staged, str):
            return staged
        where = _location(line, file)
        return _body(row, key, attempt, where, line, sidecar=sidecar, **staged)

    def _migration(
        self, row: Mapping[str, Any], key: Key, attempt: int, *, sidecar: bool
    ) -> int:
        """REC-82: a main row an interrupted move left takes its sidecar copy's
        attempt, so it is that attempt's duplicate (REC-1), whatever the policy."""
        own = (key, _index(row, "_ng_attempt_index"))
        if sidecar and row.get("_ng_migrated_invalid_judge_response") is True:
            self.migrated.setdefault(own, attempt)
        return attempt if sidecar else self.migrated.get(own, attempt)


def _location(line: RawLine, file: str) -> Location:
    return Location(
        file=file,
        offset=line.offset,
        length=len(line.data),
        row_sha256=hashlib.sha256(line.data).hexdigest(),
    )


def _body(
    row: dict[str, Any],
    key: Key,
    attempt: int,
    location: Location,
    line: RawLine,
    *,
    sidecar: bool,
    **staged: int,
) -> Event:
    fields = {"task": key[0], "rollout": key[1], "attempt": attempt}
    if not sidecar:
        # The event follows the file; the facts say what the row is, so a
        # failure an older build wrote to OUT is classified as a failure.
        return ResultSaved(**fields, location=location, facts=row_facts(row), **staged)
    if row_route(row) == "omission":
        reason = omission_reason(row)
        return OmissionSaved(
            **fields, location=location, sidecar_line=line.number - 1, reason=reason
        )
    facts, number = row_facts(row), line.number - 1
    return FailureSaved(
        **fields, location=location, sidecar_line=number, facts=facts, **staged
    )
