"""One line of an older collector's files, parsed on its own (REC-71, REC-72).

Everything an import finds in a line that does not depend on the lines before
it: whether it is a row, its key, why it cannot be one of this run's outcomes,
its own attempt index, its place and sha256, and the facts its event carries.
``OutcomeReader`` then places it in order (the attempts of a key's sidecar
rows, the keys of the run, moved rows): that part is cheap, so the parsing,
the bulk of an import, runs in other processes on a large file (issue 30),
and both give the same events (``tests/test_import_jobs.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any, Final, NamedTuple

import msgspec

from ledger.bounds import MAX_ATTEMPT_INDEX
from ledger.events import (
    Event,
    FailureSaved,
    Location,
    OmissionSaved,
    ResultSaved,
    encode_body,
    kind_of,
)
from ledger.jsonl import is_json_object
from ledger.rows.all_facts import row_facts
from ledger.rows.facts import RowFacts
from ledger.rows.kinds import omission_reason, row_route
from ledger.rows.stages import stage_event_fields
from ledger.rows.values import brief

__all__ = [
    "BLANK",
    "NO_INDEX",
    "REASONS",
    "TORN",
    "UNKNOWN_KEY",
    "Chunk",
    "ChunkLines",
    "Key",
    "Parsed",
    "RawLine",
    "chunks",
    "decode_line",
    "parse_chunk",
    "parse_line",
    "raw_lines",
    "row_key",
]

Key = tuple[int, int]

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
_DECODER = msgspec.json.Decoder()

_JSON_TYPES: Final = {
    list: "array", str: "string", int: "number", float: "number",
    bool: "boolean", type(None): "null",
}  # fmt: skip


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


def _location(line: RawLine, file: str) -> Location:
    return Location(
        file=file,
        offset=line.offset,
        length=len(line.data),
        row_sha256=hashlib.sha256(line.data).hexdigest(),
    )


class Parsed(NamedTuple):
    """A keyed line, parsed: why it cannot be an outcome (``problem``), or
    what its event needs once the reader has numbered its attempt."""

    key: Key
    problem: str | None
    own: int | None  # its own _ng_attempt_index, when it has one
    migrated: bool  # REC-82: a sidecar copy of a moved row
    sidecar: bool
    location: Location | None = None
    facts: RowFacts | None = None
    omission: str | None = None  # an omission stand-in's reason
    staged: dict[str, int] = {}  # noqa: RUF012  never mutated
    #: Encoded in a parsing process: the event's kind and its bytes before
    #: and after the attempt number the reader puts in (``encoded``).
    around: tuple[str, bytes, bytes] | None = None

    def encoded(self, attempt: int) -> tuple[str, bytes]:
        """The event's kind and ``encode_body``'s bytes of it, once numbered
        (a line ``parse_chunk`` encoded: ``around`` is set)."""
        assert self.around is not None
        kind, head, tail = self.around
        return kind, b"%s%d%s" % (head, attempt, tail)

    def body(self, key: Key, attempt: int, number: int) -> Event:
        """The event, once the reader numbered its attempt."""
        assert self.location is not None
        facts = self.facts
        fields = {"task": key[0], "rollout": key[1], "attempt": attempt}
        if not self.sidecar:
            # The event follows the file; the facts say what the row is, so a
            # failure an older build wrote to OUT is classified as a failure.
            assert facts is not None
            return ResultSaved(
                **fields, location=self.location, facts=facts, **self.staged
            )
        if self.omission is not None:
            return OmissionSaved(
                **fields,
                location=self.location,
                sidecar_line=number - 1,
                reason=self.omission,
            )
        assert facts is not None
        return FailureSaved(
            **fields,
            location=self.location,
            sidecar_line=number - 1,
            facts=facts,
            **self.staged,
        )


def parse_line(line: RawLine, file: str, run_id: str, sidecar: bool) -> Parsed | str:
    """What ``line`` is on its own: a reason it is no row, or a ``Parsed``."""
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
    own = _index(row, "_ng_attempt_index")
    migrated = row.get("_ng_migrated_invalid_judge_response") is True
    problem = _misfit(row, run_id, sidecar=sidecar)
    if problem is None and _attempt(row, 0) is None:
        problem = (
            f"{BAD_ATTEMPT} from 0 to {MAX_ATTEMPT_INDEX} "
            f"({brief(row.get('_ng_attempt_index'))})"
        )
    staged: dict[str, int] = {}
    if problem is None:
        stage = stage_event_fields(row)  # ROW-64: a multistage row's stage
        problem, staged = (stage, {}) if isinstance(stage, str) else (None, stage)
    if problem is not None:
        return Parsed(key, problem, own, migrated, sidecar)
    location = _location(line, file)
    if sidecar and row_route(row) == "omission":
        reason = omission_reason(row)
        return Parsed(key, None, own, migrated, sidecar, location, omission=reason)
    facts = row_facts(row)
    return Parsed(key, None, own, migrated, sidecar, location, facts, None, staged)


class Chunk(NamedTuple):
    """Whole lines of a file from line ``number`` at byte ``offset``."""

    number: int
    offset: int
    data: bytes


#: What a chunk's lines were: each line's length, whether it ends without a
#: newline (torn) and is kept, and what it parsed to.
ChunkLines = list[tuple[int, bool, bool, "Parsed | str"]]

_CHUNK_BYTES = 1 << 22


def chunks(handle: IO[bytes]) -> Iterator[Chunk]:
    """The file in chunks of whole lines (the last may end without a newline)."""
    number, offset, rest = 1, 0, b""
    while block := handle.read(_CHUNK_BYTES):
        data = rest + block
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            rest = data
            continue
        whole, rest = data[:cut], data[cut:]
        yield Chunk(number, offset, whole)
        number += whole.count(b"\n")
        offset += len(whole)
    if rest:
        yield Chunk(number, offset, rest)


def parse_chunk(chunk: Chunk, file: str, run_id: str, sidecar: bool) -> ChunkLines:
    """Each line of ``chunk``, parsed (run in another process on a large file)."""
    found: ChunkLines = []
    number, offset, data = chunk
    start = 0
    while start < len(data):
        end = data.find(b"\n", start) + 1 or len(data)
        line = RawLine(number, offset + start, data[start:end])
        parsed = parse_line(line, file, run_id, sidecar)
        if isinstance(parsed, Parsed) and parsed.location is not None:
            parsed = _encoded(parsed, number)
        found.append((end - start, line.torn, line.kept, parsed))
        number, start = number + 1, end
    return found


#: An attempt number no row has: where the reader's number goes in the bytes.
_SENTINEL = 987_654_321_987_654_321
_MARK = b'"attempt":%d' % _SENTINEL


def _encoded(parsed: Parsed, number: int) -> Parsed:
    """``parsed`` with its event encoded here, its attempt left to the reader:
    only bytes cross back to the reading process (issue 30)."""
    body = parsed.body(parsed.key, _SENTINEL, number)
    data = encode_body(body)
    if data.count(_MARK) != 1:
        return parsed  # the reader builds it (the sentinel met elsewhere)
    at = data.index(_MARK) + len(b'"attempt":')
    tail = data[at + len(str(_SENTINEL)) :]
    return Parsed(
        parsed.key,
        None,
        parsed.own,
        parsed.migrated,
        parsed.sidecar,
        around=(kind_of(body), data[:at], tail),
    )
