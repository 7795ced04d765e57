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

import json
import os
from contextlib import suppress
from pathlib import Path
from typing import Any

import msgspec

from ledger import (
    ROLLOUT_ID,
    FollowedFile,
    FollowedLine,
    Ledger,
    RowError,
    identify_row,
    read_plan_rows,
)
from ledger.events import RowRefused
from ledger.policy.model import RecoveryPolicy
from projections.operations.recorded import (
    FailureSides,
    Recorded,
    Refusal,
    record_rows,
)

__all__ = [
    "RoundFiles",
    "RoundRecorder",
    "latest_round",
    "mark_recorded",
    "next_round_files",
    "recorded_whole",
    "round_numbers",
]

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
        (_rounds(ledger) / str(number)).mkdir(parents=True, exist_ok=True)
        return cls.named(ledger, number)

    @classmethod
    def named(cls, ledger: Ledger, number: int) -> RoundFiles:
        """Round ``number``'s files, named only: nothing is created."""
        folder = _rounds(ledger) / str(number)
        return cls(
            number=number,
            plan=str(folder / "plan.jsonl"),
            output=str(folder / "output.jsonl"),
            failures=str(folder / "output_failures.jsonl"),
        )


def _rounds(ledger: Ledger) -> Path:
    return ledger.paths.ledger_dir / "rounds"


def round_numbers(ledger: Ledger) -> list[int]:
    """The numbers of the rounds begun, in order."""
    folder = _rounds(ledger)
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def latest_round(ledger: Ledger) -> int:
    """The number of the last round begun (0: none yet)."""
    return max(round_numbers(ledger), default=0)


def next_round_files(ledger: Ledger) -> RoundFiles:
    """The files the next round of ``run`` would use, named only (a dry run)."""
    return RoundFiles.named(ledger, latest_round(ledger) + 1)


#: Beside a round's files once they were read whole with their collector gone:
#: each file's device, inode and size then.
_RECORDED = "recorded.json"


def _shapes(files: RoundFiles) -> list[list[int] | None]:
    shapes: list[list[int] | None] = []
    for path in (files.output, files.failures):
        try:
            status = os.stat(path)
        except FileNotFoundError:
            shapes.append(None)
            continue
        shapes.append([status.st_dev, status.st_ino, status.st_size])
    return shapes


def mark_recorded(files: RoundFiles) -> None:
    """Note that round ``files``' files were recorded whole as they are now."""
    marker = Path(files.plan).with_name(_RECORDED)
    with suppress(OSError):  # without it the next run reads the round again
        marker.write_text(json.dumps(_shapes(files)))


def recorded_whole(files: RoundFiles) -> bool:
    """Round ``files``' files are as they were when last recorded whole."""
    marker = Path(files.plan).with_name(_RECORDED)
    try:
        noted = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return bool(noted == _shapes(files))


class _Released(msgspec.Struct, frozen=True):
    """The attempts and re-judgments a round's plan released.

    ``renumberable`` are the tasks whose plan rows are not rollouts 0, 1, ...
    in file order: a collector that numbers each task's rows from 0 in the
    file it reads (NeMo Gym 0.7.0) returns their rows under other numbers.
    Where the plan gave each row its ``_ng_rollout_id`` (``identified``), a row
    of such a task that comes back without one names no rollout for sure, and
    is refused (issue 25: never recorded under a rollout it may not answer).
    """

    dispatch: frozenset[Key]
    rejudge: frozenset[Key]
    renumberable: dict[int, list[int]] = msgspec.field(default_factory=dict)
    identified: bool = False

    @classmethod
    def read(cls, plan: Path) -> _Released:
        if not plan.exists():  # released nothing that a collector could run
            return cls(frozenset(), frozenset())
        rows, _ = read_plan_rows(plan)
        dispatch, rejudge = set(), set()
        order: dict[int, list[int]] = {}
        identified = False
        for row in rows:
            item = row.get("rejudge")
            if isinstance(item, dict):
                rejudge.add(_key(item, "task", "rollout", "attempt"))
                continue
            key = _key(row, *_INDICES)
            dispatch.add(key)
            order.setdefault(key[0], []).append(key[1])
            identified = identified or ROLLOUT_ID in row
        renumberable = {
            task: rollouts
            for task, rollouts in order.items()
            if rollouts != list(range(len(rollouts)))
        }
        return cls(frozenset(dispatch), frozenset(rejudge), renumberable, identified)

    def refusal(self, row: dict[str, Any], *, identified: bool) -> str | None:
        """Why ``row`` is no outcome of this round's releases, or ``None``.

        ``identified``: the row carried its ``_ng_rollout_id`` (its task and
        rollout are the ones that id names).
        """
        rejudgment = row.get("_ng_rejudgment")
        if isinstance(rejudgment, dict):
            key = _key(rejudgment, "task", "rollout", "attempt")
            return None if key in self.rejudge else f"re-judges {_words(key)}, " + _NOT
        key = _key(row, *_INDICES)
        if None in key[:2]:
            return None  # recording names what is missing
        if not identified and self.identified and key[0] in self.renumberable:
            return _unnamed(key[0], self.renumberable[key[0]])
        if key[2] is None:
            known = {k[:2] for k in self.dispatch}
            return None if key[:2] in known else f"names {_words(key)}, " + _NOT
        return None if key in self.dispatch else f"names {_words(key)}, " + _NOT


def _unnamed(task: int, rollouts: list[int]) -> str:
    shown = ", ".join(str(r) for r in rollouts[:5]) + (", ..." if rollouts[5:] else "")
    return (
        f"the row carries no {ROLLOUT_ID}, and this round ran rollouts {shown} of "
        f"task {task}, which a collector that numbers each task's rows from 0 (as "
        "NeMo Gym 0.7.0 does) writes back under other numbers, so its number does "
        f"not say which rollout it answers; the collector must copy each plan row's "
        f"{ROLLOUT_ID} onto the row it writes for it"
    )


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
    """Records the lines a round's collector appends, as they land (REC-86).

    Every line it does not record leaves a ``row_refused`` event (once, however
    often the files are read again), so the log holds every answer the
    collector produced (issue 25).
    """

    def __init__(
        self,
        ledger: Ledger,
        files: RoundFiles,
        policy: RecoveryPolicy | None = None,
        *,
        sides: bool = False,
    ) -> None:
        self.ledger = ledger
        self.files = files
        # failures counted by side for ``run``'s progress, under ``policy``
        self.sides = FailureSides(policy) if sides else None
        self.released = _Released.read(Path(files.plan))
        self.followed = [
            FollowedFile(Path(files.output)),
            FollowedFile(Path(files.failures)),
        ]
        self._reported: set[str] = set()
        self._refused: set[tuple[str, int, str | None]] | None = None

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
        self._keep(recorded.refused)
        return recorded

    def _keep(self, refused: list[Refusal]) -> None:
        """A ``row_refused`` event for each refusal the log does not hold yet."""
        if not refused:
            return
        seen = self._seen()
        bodies = []
        for refusal in refused:
            file = self._relative(refusal.file)
            key = (file, refusal.line, refusal.sha256)
            if key in seen:
                continue
            seen.add(key)
            bodies.append(
                RowRefused(
                    file=file,
                    line=refusal.line,
                    length=refusal.length,
                    row_sha256=refusal.sha256,
                    reason=refusal.message[:2000],
                    round=self.files.number or None,
                )
            )
        if bodies:
            self.ledger.append_many(bodies, actor="collector")

    def _seen(self) -> set[tuple[str, int, str | None]]:
        if self._refused is None:
            self._refused = {
                (body.file, body.line, body.row_sha256)
                for event in self.ledger.events(1, kinds=("row_refused",))
                if isinstance(body := event.body, RowRefused)
            }
        return self._refused

    def _relative(self, path: str) -> str:
        if self.ledger.folder is None:  # a worker's round, on its own node's disk
            return path
        folder = self.ledger.paths.folder
        try:
            return Path(path).relative_to(folder).as_posix()
        except ValueError:
            return path

    def _record(self, name: str, lines: list[FollowedLine]) -> Recorded:
        recorded = Recorded()
        rows: list[Any] = []
        numbers: list[int] = []
        raw: dict[int, bytes] = {}
        for line in lines:
            row, why = self._row(line)
            if why is not None:
                recorded.refused.append(Refusal.of(name, line.number, why, line.raw))
            elif row is not None:
                rows.append(row)
                numbers.append(line.number)
                raw[line.number] = line.raw
        done = record_rows(self.ledger, name, rows, numbers, self.sides)
        done.refused = [
            Refusal.of(r.file, r.line, r.message, raw.get(r.line, b""))
            for r in done.refused
        ]
        recorded.add(done)
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
        try:
            identified = identify_row(self.ledger.direct_recorder().index, row)
        except RowError as exc:
            return None, str(exc)
        return row, self.released.refusal(row, identified=identified)
