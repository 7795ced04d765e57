"""The writer's bookkeeping: releases, reservations, admissions and file ends (REC-3).

This is not a decision: it only remembers what the log says was released,
reserved and admitted, so the recorder can refuse to run what recovery has
closed, and where each collector file's recorded bytes end (EV-12).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ledger import event_files, events
from ledger.events import (
    TAIL_CUT,
    AttemptReserved,
    AttemptsReleased,
    FailureSaved,
    JudgeAdmitted,
    JudgeOutcomeSaved,
    LegacyImported,
    Location,
    OmissionSaved,
    ResultSaved,
    ResumeStarted,
    RunCreated,
    StoredEvent,
    TailRepaired,
)

__all__ = ["END_KINDS", "INDEX_CODE_VERSION", "Attempt", "FileEnd", "WriteIndex"]

Attempt = tuple[int, int, int]

#: The kinds that move a file's recorded end (``WriteIndex.ends``).
END_KINDS = (
    "judge_outcome_saved",
    "legacy_imported",
    "result_saved",
    "failure_saved",
    "omission_saved",
    "tail_repaired",
)
#: The kinds the index folds; the writer reads only these on open.
INDEX_KINDS = (
    "run_created",
    "attempts_released",
    "resume_started",
    "attempt_reserved",
    "judge_admitted",
    *END_KINDS,
)


def _code_version() -> str:
    # The fold below and the event Structs it reads decide what a stored index
    # means; a change to either makes older index snapshots unused (EV-14).
    here = Path(__file__)
    digest = hashlib.sha256(here.read_bytes())
    digest.update(Path(str(events.__file__)).read_bytes())
    digest.update(Path(str(event_files.__file__)).read_bytes())
    return "write-index/" + digest.hexdigest()[:32]


#: The snapshot key of a stored write index (``snapshots.code_version``).
INDEX_CODE_VERSION = _code_version()


class _Stored(msgspec.Struct, array_like=True):
    """A write index as stored: every set sorted, so equal indexes give equal bytes."""

    run_id: str
    keys: list[tuple[int, int, int]]
    released: list[Attempt]
    released_by_key: list[tuple[int, int, int]]
    released_rejudge: list[Attempt]
    reserved: list[Attempt]
    admitted_since_release: list[Attempt]
    open_admissions: list[tuple[str, Attempt]]
    ends: list[tuple[str, int, int]]
    reserved_stages: list[tuple[int, int, int, int]] = []
    explicit_ids: list[tuple[str, int, int]] = []


class _StoredEnds(msgspec.Struct, array_like=True):
    """``_Stored`` read for its file ends alone (the rest left undecoded)."""

    run_id: msgspec.Raw
    keys: msgspec.Raw
    released: msgspec.Raw
    released_by_key: msgspec.Raw
    released_rejudge: msgspec.Raw
    reserved: msgspec.Raw
    admitted_since_release: msgspec.Raw
    open_admissions: msgspec.Raw
    ends: list[tuple[str, int, int]]
    reserved_stages: msgspec.Raw = msgspec.Raw()
    explicit_ids: msgspec.Raw = msgspec.Raw()


@dataclass
class FileEnd:
    """Where the recorded bytes of one collector file end, and its line count."""

    offset: int = 0
    lines: int = 0


@dataclass
class WriteIndex:
    """What the log says is released, reserved, admitted and recorded."""

    run_id: str = ""
    keys: dict[tuple[int, int], int] = field(default_factory=dict)  # key -> line
    released: set[Attempt] = field(default_factory=set)
    released_by_key: dict[tuple[int, int], int] = field(default_factory=dict)
    released_rejudge: set[Attempt] = field(default_factory=set)
    reserved: set[Attempt] = field(default_factory=set)
    #: ROW-64: ``(task, rollout, attempt, stage)`` of each later stage reserved.
    reserved_stages: set[tuple[int, int, int, int]] = field(default_factory=set)
    admitted_since_release: set[Attempt] = field(default_factory=set)
    open_admissions: dict[str, Attempt] = field(default_factory=dict)
    ends: dict[str, FileEnd] = field(default_factory=dict)
    #: The materialized rows' own ``_ng_rollout_id`` values (ROW-24), by key:
    #: how a collector's row is matched to the rollout it answers (issue 25).
    explicit_ids: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: The keys of ``explicit_ids``' rows (derived from it, never stored).
    own_id_keys: set[tuple[int, int]] = field(default_factory=set)

    @classmethod
    def build(cls, events: Iterable[StoredEvent]) -> WriteIndex:
        """Fold the index from stored events of the INDEX_KINDS, in seq order."""
        index = cls()
        for event in events:
            index.apply(event.body)
        return index

    def encode(self) -> bytes:
        """The index as deterministic bytes (for its snapshot, EV-14)."""
        stored = _Stored(
            run_id=self.run_id,
            keys=sorted((t, r, line) for (t, r), line in self.keys.items()),
            released=sorted(self.released),
            released_by_key=sorted(
                (t, r, a) for (t, r), a in self.released_by_key.items()
            ),
            released_rejudge=sorted(self.released_rejudge),
            reserved=sorted(self.reserved),
            admitted_since_release=sorted(self.admitted_since_release),
            open_admissions=sorted(self.open_admissions.items()),
            ends=sorted((f, e.offset, e.lines) for f, e in self.ends.items()),
            reserved_stages=sorted(self.reserved_stages),
            explicit_ids=sorted((i, t, r) for i, (t, r) in self.explicit_ids.items()),
        )
        return msgspec.msgpack.encode(stored)

    @classmethod
    def decode(cls, data: bytes) -> WriteIndex:
        """An index from :meth:`encode`'s bytes."""
        stored = msgspec.msgpack.decode(data, type=_Stored)
        return cls(
            run_id=stored.run_id,
            keys={(t, r): line for t, r, line in stored.keys},
            released=set(stored.released),
            released_by_key={(t, r): a for t, r, a in stored.released_by_key},
            released_rejudge=set(stored.released_rejudge),
            reserved=set(stored.reserved),
            admitted_since_release=set(stored.admitted_since_release),
            open_admissions=dict(stored.open_admissions),
            ends={f: FileEnd(offset, lines) for f, offset, lines in stored.ends},
            reserved_stages=set(stored.reserved_stages),
            explicit_ids={i: (t, r) for i, t, r in stored.explicit_ids},
            own_id_keys={(t, r) for _, t, r in stored.explicit_ids},
        )

    @classmethod
    def decode_ends(cls, data: bytes) -> WriteIndex:
        """An index holding only the file ends of :meth:`encode`'s bytes.

        What a reader needs to find rows past the recorded ones (EV-12,
        REC-86): at a million rollouts the keys alone are 100 MiB decoded.
        """
        stored = msgspec.msgpack.decode(data, type=_StoredEnds)
        return cls(ends={f: FileEnd(offset, lines) for f, offset, lines in stored.ends})

    def apply(self, body: object) -> None:
        """Fold one event body into the index."""
        # One dict lookup on the body's type instead of a chain of isinstance
        # (P-2, P-7); a subclass of an event type takes the isinstance route.
        handler = _APPLY.get(type(body))
        if handler is None:
            handler = next(
                (h for cls, h in _APPLY.items() if isinstance(body, cls)), None
            )
        if handler is not None:
            handler(self, body)

    def _run_created(self, body: RunCreated) -> None:
        self.run_id = body.run_id
        self.keys = {(e[0], e[1]): line for line, e in enumerate(body.index, 1)}
        self.explicit_ids = {e[5]: (e[0], e[1]) for e in body.index if e[5] is not None}
        self.own_id_keys = set(self.explicit_ids.values())

    def _resume_started(self, body: ResumeStarted) -> None:
        # REC-3: a release holds until the next resume_started.
        self.released.clear()
        self.released_by_key.clear()
        self.released_rejudge.clear()
        self.admitted_since_release.clear()

    def _attempts_released(self, body: AttemptsReleased) -> None:
        self.released.update(body.dispatch)
        self.released_by_key.update({(t, r): a for t, r, a in body.dispatch})
        self.released_rejudge.update(body.rejudge)
        self.admitted_since_release.difference_update(body.rejudge)

    def _attempt_reserved(self, body: AttemptReserved) -> None:
        self.reserved.add((body.task, body.rollout, body.attempt))
        if body.stage_index is not None:  # ROW-64: a later stage, reserved once
            self.reserved_stages.add(
                (body.task, body.rollout, body.attempt, body.stage_index)
            )

    def _judge_admitted(self, body: JudgeAdmitted) -> None:
        attempt = (body.task, body.rollout, body.attempt)
        self.open_admissions[body.admission_id] = attempt
        self.admitted_since_release.add(attempt)

    def _judge_outcome_saved(self, body: JudgeOutcomeSaved) -> None:
        self.open_admissions.pop(body.admission_id, None)
        self._advance(body.location, body.sidecar_line)

    def _sidecar_saved(self, body: FailureSaved | OmissionSaved) -> None:
        self._advance(body.location, body.sidecar_line)

    def _result_saved(self, body: ResultSaved) -> None:
        self._advance(body.location, None)

    def _legacy_imported(self, body: LegacyImported) -> None:
        # REC-70: everything an import read counts as recorded, rejected
        # lines included, so a writer's open never mistakes them for rows
        # a crash left unrecorded (EV-12).
        for source in body.sources:
            end = self.ends.setdefault(source.file, FileEnd())
            end.offset = max(end.offset, source.size)
            end.lines = max(end.lines, source.lines)

    def _tail_repaired(self, body: TailRepaired) -> None:
        # REC-83: the newline completing the last recorded row (kept by an
        # import without it) is recorded bytes; a cut is past the recorded
        # end, and so is the newline of a row recorded after it.
        end = self.ends.get(body.file)
        if body.action != TAIL_CUT and end is not None and body.offset == end.offset:
            end.offset += body.length
            end.lines += 1

    def advance(self, location: Location, line: int | None) -> None:
        """A row recorded at ``location`` (``line``: its 0-based sidecar line)."""
        self._advance(location, line)

    def _advance(self, location: Location, line: int | None) -> None:
        end = self.ends.get(location.file)
        if end is None:
            end = self.ends[location.file] = FileEnd()
        stop = location.offset + location.length
        new_bytes = stop > end.offset
        if new_bytes:
            end.offset = stop
        # The sidecar's 0-based line is stored (an import may have left
        # unrecorded lines before it); results count their own rows.
        if line is not None:
            if line >= end.lines:
                end.lines = line + 1
        elif new_bytes:  # an import already counted the rows it read
            end.lines += 1

    def end_of(self, file: str) -> FileEnd:
        """The recorded end of ``file`` (zero when nothing was recorded there)."""
        found = self.ends.get(file)
        return FileEnd() if found is None else found


#: ``WriteIndex.apply``'s handler per event type, in the order the isinstance
#: chain it replaces tested them.
_APPLY: dict[type, Callable[[WriteIndex, Any], None]] = {
    RunCreated: WriteIndex._run_created,
    ResumeStarted: WriteIndex._resume_started,
    AttemptsReleased: WriteIndex._attempts_released,
    AttemptReserved: WriteIndex._attempt_reserved,
    JudgeAdmitted: WriteIndex._judge_admitted,
    JudgeOutcomeSaved: WriteIndex._judge_outcome_saved,
    FailureSaved: WriteIndex._sidecar_saved,
    OmissionSaved: WriteIndex._sidecar_saved,
    ResultSaved: WriteIndex._result_saved,
    LegacyImported: WriteIndex._legacy_imported,
    TailRepaired: WriteIndex._tail_repaired,
}
