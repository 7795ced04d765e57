"""One round of ``rollout-ledger run``: its files, and recording what they hold.

A round's files live in the ledger's folder, ``<stem>_ledger/rounds/<n>/``:
``plan.jsonl`` (the released plan, as ``resume --plan-out`` writes it, CLI-4),
and ``output.jsonl`` and ``output_failures.jsonl``, which only the collector
writes (named as NeMo Gym names a sidecar, ``<stem>_failures.jsonl``, so its
own collector given ``{output}`` writes its failures to ``{failures}``).
``OUT`` and the sidecar are written by the ledger alone, so a collector that
truncates or rewrites its own files can harm nothing recorded.

``RoundRecorder`` follows the two files (``ledger.FollowedFile``) and records
each complete new line through ``record_plan_rows``, the path ``record`` takes
(CLI-5: each row's attempt reserved with its outcome in one transaction; a row
already recorded is skipped, so reading a file again records nothing twice).
Unlike ``record``, one bad line does not refuse the others: a line that is not
JSON, names an attempt this round did not release, or that recording refuses
is reported (``Refusal``: file, line, why) and left out, and every other line
is recorded.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import msgspec

from ledger import (
    FollowedFile,
    FollowedLine,
    Ledger,
    RowError,
    read_plan_rows,
    record_plan_rows,
)

__all__ = ["Recorded", "Refusal", "RoundFiles", "RoundRecorder", "latest_round"]

Key = tuple[int, int, int]
_DECODER = msgspec.json.Decoder()


class RoundFiles(msgspec.Struct, frozen=True):
    """The files of round ``number``: the plan, and the collector's two files."""

    number: int
    plan: str
    output: str
    failures: str

    @classmethod
    def of(cls, ledger: Ledger, number: int) -> RoundFiles:
        """Round ``number``'s files in the run's ledger folder (created)."""
        folder = _rounds(ledger) / str(number)
        folder.mkdir(parents=True, exist_ok=True)
        return cls(
            number=number,
            plan=str(folder / "plan.jsonl"),
            output=str(folder / "output.jsonl"),
            failures=str(folder / "output_failures.jsonl"),
        )


def _rounds(ledger: Ledger) -> Path:
    return ledger.paths.ledger_dir / "rounds"


def latest_round(ledger: Ledger) -> int:
    """The number of the last round begun (0: none yet)."""
    folder = _rounds(ledger)
    if not folder.is_dir():
        return 0
    numbers = [int(p.name) for p in folder.iterdir() if p.name.isdigit()]
    return max(numbers, default=0)


class Refusal(msgspec.Struct, frozen=True):
    """A line of a collector's file that was not recorded, and why."""

    file: str
    line: int
    message: str


class Recorded(msgspec.Struct):
    """What recording a round's lines did: rows recorded and skipped, refusals."""

    rows: int = 0
    skipped: int = 0
    events: dict[str, int] = msgspec.field(default_factory=dict)
    refused: list[Refusal] = msgspec.field(default_factory=list)

    def add(self, other: Recorded) -> None:
        """Count ``other`` in."""
        self.rows += other.rows
        self.skipped += other.skipped
        self.events = dict(
            sorted((Counter(self.events) + Counter(other.events)).items())
        )
        self.refused += other.refused


class _Released(msgspec.Struct, frozen=True):
    """The attempts and re-judgments a round's plan released."""

    dispatch: frozenset[Key]
    rejudge: frozenset[Key]

    @classmethod
    def read(cls, plan: Path) -> _Released:
        if not plan.exists():  # released nothing that a collector could run
            return cls(frozenset(), frozenset())
        rows, _ = read_plan_rows(plan)
        dispatch, rejudge = set(), set()
        for row in rows:
            item = row.get("rejudge")
            if isinstance(item, dict):
                rejudge.add(_key(item, "task", "rollout", "attempt"))
            else:
                dispatch.add(_key(row, *_INDICES))
        return cls(frozenset(dispatch), frozenset(rejudge))

    def refusal(self, row: dict[str, Any]) -> str | None:
        """Why ``row`` is no outcome of this round's releases, or ``None``."""
        rejudgment = row.get("_ng_rejudgment")
        if isinstance(rejudgment, dict):
            key = _key(rejudgment, "task", "rollout", "attempt")
            return None if key in self.rejudge else f"re-judges {_words(key)}, " + _NOT
        key = _key(row, *_INDICES)
        if None in key[:2]:
            return None  # recording names what is missing
        if key[2] is None:
            known = {k[:2] for k in self.dispatch}
            return None if key[:2] in known else f"names {_words(key)}, " + _NOT
        return None if key in self.dispatch else f"names {_words(key)}, " + _NOT


_INDICES = ("_ng_task_index", "_ng_rollout_index", "_ng_attempt_index")
_NOT = "which this round did not release"


def _key(row: dict[str, Any], *names: str) -> Any:
    return tuple(
        value if isinstance(value, int) and not isinstance(value, bool) else None
        for value in (row.get(name) for name in names)
    )


def _words(key: tuple[int | None, ...]) -> str:
    task, rollout, attempt = key
    where = f"task {task}, rollout {rollout}"
    return where if attempt is None else f"attempt {attempt} of {where}"


class RoundRecorder:
    """Records the lines a round's collector appends, as they land (REC-86)."""

    def __init__(self, ledger: Ledger, files: RoundFiles) -> None:
        self.ledger = ledger
        self.files = files
        self.released = _Released.read(Path(files.plan))
        self.followed = [
            FollowedFile(Path(files.output)),
            FollowedFile(Path(files.failures)),
        ]
        self._reported: set[str] = set()

    def record(self, *, final: bool = False) -> Recorded:
        """Record the complete lines appended since; ``final``: the last one too."""
        recorded = Recorded()
        for followed in self.followed:
            lines = followed.read(final=final)
            if lines:
                recorded.add(self._record(str(followed.path), lines))
            if followed.broken is not None and str(followed.path) not in self._reported:
                self._reported.add(str(followed.path))
                recorded.refused.append(
                    Refusal(str(followed.path), followed.line + 1, followed.broken)
                )
        return recorded

    def _record(self, name: str, lines: list[FollowedLine]) -> Recorded:
        recorded = Recorded()
        rows: list[Any] = []
        numbers: list[int] = []
        for line in lines:
            row, why = self._row(line)
            if why is not None:
                recorded.refused.append(Refusal(name, line.number, why))
            elif row is not None:
                rows.append(row)
                numbers.append(line.number)
        recorded.add(_record_rows(self.ledger, name, rows, numbers))
        return recorded

    def _row(self, line: FollowedLine) -> tuple[Any, str | None]:
        if not line.raw.strip():
            return None, None
        try:
            row = _DECODER.decode(line.raw)
        except (msgspec.DecodeError, RecursionError):
            if not line.terminated:
                return (
                    None,
                    "the last line is incomplete (the collector stopped mid-row)",
                )
            return None, "the line is not JSON"
        if not isinstance(row, dict):
            return None, "a row must be a JSON object"
        return row, self.released.refusal(row)


def _record_rows(
    ledger: Ledger, name: str, rows: list[Any], numbers: list[int]
) -> Recorded:
    """``rows`` recorded; a refused row is reported and the others recorded."""
    recorded = Recorded()
    while rows:
        try:
            counts = record_plan_rows(ledger, rows, lines=numbers, source=name)
        except RowError as exc:
            if exc.line is None or exc.line not in numbers:
                raise
            at = numbers.index(exc.line)
            recorded.add(_record_rows(ledger, name, rows[:at], numbers[:at]))
            why = str(exc.__cause__ or exc)
            recorded.refused.append(Refusal(name, exc.line, why))
            rows, numbers = rows[at + 1 :], numbers[at + 1 :]
            continue
        skipped = counts.pop("already_recorded", 0)
        recorded.add(Recorded(rows=len(rows) - skipped, skipped=skipped, events=counts))
        break
    return recorded
