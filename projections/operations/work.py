"""``rollout-ledger run URL --worker``: one worker of a run on PostgreSQL (issue 29).

A worker opens the run without its lock (SC-4: it may reserve and record),
takes its seat (``ledger.WorkerSeat``: an advisory lock of its own on the
session it records through, and a row in the run's ``workers`` table), then
repeats:

- claim up to ``batch`` items the coordinator offered (atomically: no item
  is ever held by two workers);
- write them as a plan file in a round folder of its own work folder, on its
  own node's disk (``<workdir>/rounds/<n>/``: ``plan.jsonl``,
  ``output.jsonl``, ``output_failures.jsonl``, as ``run`` names a file run's
  round), and run the collector on it;
- record each complete line as it lands (``RoundRecorder``, the path a file
  run's rounds take: each row reserved with its outcome in one transaction,
  SC-3, by the ``_ng_rollout_id`` its plan row gave it);
- when the collector's group has exited, mark what got an outcome done and
  offer the rest again.

It stops when nothing is claimable: exit 0 once the run is complete, 76 when
nothing retryable is left (``check``, CLI-7), 75 after waiting ``wait``
seconds for more work (or for a coordinator, when none holds the run lock);
75 on a signal, after recording what its collector wrote; 3 when its
collector recorded nothing in ``STALL_ROUNDS`` batches in a row. When its own
session is lost, it stops its collector and records nothing more (exit 75):
the coordinator offers its work again, and its rows stay in its round files.

Before its first claim it records what earlier batches in the same work
folder wrote past what was recorded (a worker killed mid-batch, started
again): a row already recorded is skipped, a row whose attempt is no longer
released is refused by name, so nothing is recorded twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from ledger import ConfigError, Ledger, LedgerError, LockLost, WorkerSeat, plural
from ledger.policy.log import policy_from_json
from projections.decisions.plan import PlanKeys
from projections.operations.keep import replay_kept
from projections.operations.plan_file import write_plan_file
from projections.operations.recorded import Recorded
from projections.operations.release import build_plan
from projections.operations.round_files import (
    RoundFiles,
    RoundRecorder,
    mark_recorded,
    recorded_whole,
)
from projections.operations.run_loop import (
    STALL_ROUNDS,
    CollectorExit,
    Launcher,
    OnProgress,
    RoundProgress,
    RunCheck,
    check_outcome,
)

__all__ = ["WorkerReport", "work_batches"]

#: Seconds between two reads of the collector's files.
POLL_SECONDS = 0.2
#: Seconds between two looks for work when none was claimable.
IDLE_POLL_SECONDS = 1.0
#: Seconds between two notes of the worker's progress in ``workers``.
HEARD_SECONDS = 2.0

Key = tuple[int, int, int]


class WorkerReport(msgspec.Struct):
    """One batch of a worker; the last report carries ``stop`` and ``exit_code``."""

    worker: str
    batch: int
    claimed: dict[str, int] | None
    files: RoundFiles | None
    collector: CollectorExit | None
    recorded: Recorded
    adopted: Recorded | None = None
    check: RunCheck | None = None
    total_rows: int = 0
    stop: str | None = None
    exit_code: int | None = None
    why: str | None = None


#: What the worker is told as it goes (a line of text each).
OnNote = Callable[[str], None]


def _round_files(workdir: Path, number: int) -> RoundFiles:
    folder = workdir / "rounds" / str(number)
    folder.mkdir(parents=True, exist_ok=True)
    return RoundFiles(
        number=number,
        plan=str(folder / "plan.jsonl"),
        output=str(folder / "output.jsonl"),
        failures=str(folder / "output_failures.jsonl"),
    )


def _rounds(workdir: Path) -> list[int]:
    folder = workdir / "rounds"
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def _record_whole(ledger: Ledger, files: RoundFiles) -> Recorded:
    """Every line of ``files`` recorded (an earlier batch's, read again).

    Another worker may record an attempt of these files meanwhile (its claim
    was offered again): the database refuses the second reservation, and the
    files are read again from the start, that row then skipped.
    """
    try:
        return RoundRecorder(ledger, files).record(final=True)
    except ConfigError:
        ledger.direct_recorder().catch_up_now()
        return RoundRecorder(ledger, files).record(final=True)


def _adopt(ledger: Ledger, launcher: Launcher, workdir: Path) -> Recorded | None:
    rounds = _rounds(workdir)
    if not rounds:
        return None
    recorded = Recorded()
    for number in rounds:
        files = _round_files(workdir, number)
        launcher.finish_earlier(files)
        if recorded_whole(files):
            continue
        recorded.add(_record_whole(ledger, files))
        mark_recorded(files)
    return recorded


def _outcomes(ledger: Ledger, claimed: dict[str, set[Key]]) -> dict[str, set[Key]]:
    """The claimed items that got an outcome (reserved, or admitted)."""
    ledger.direct_recorder().catch_up_now()
    index = ledger.direct_recorder().index
    return {
        "dispatch": claimed["dispatch"] & index.reserved,
        "rejudge": claimed["rejudge"] & index.admitted_since_release,
    }


class _Batch:
    """One claimed batch: its plan, its collector, its rows recorded."""

    def __init__(
        self,
        ledger: Ledger,
        seat: WorkerSeat,
        launcher: Launcher,
        files: RoundFiles,
        claimed: dict[str, set[Key]],
    ) -> None:
        self.ledger = ledger
        self.seat = seat
        self.launcher = launcher
        self.files = files
        self.claimed = claimed
        self.recorded = Recorded()
        self.lost = False

    def plan(self) -> int:
        state = replay_kept(self.ledger)
        keys = PlanKeys(
            tuple(sorted(self.claimed["dispatch"])),
            tuple(sorted(self.claimed["rejudge"])),
            (),
            0,
        )
        write_plan_file(self.files.plan, build_plan(self.ledger, state, {}, keys))
        self.policy = policy_from_json(state.policy)
        return len(keys.dispatch) + len(keys.rejudge)

    def run(
        self, planned: int, total: int, on_progress: OnProgress | None
    ) -> CollectorExit:
        recorder = RoundRecorder(
            self.ledger, self.files, self.policy, sides=on_progress is not None
        )
        collector = self.launcher.start(self.files)
        started = heard = time.monotonic()
        stopped = False
        code: int | None = None
        while True:
            code = collector.wait(POLL_SECONDS)
            if not self._record(recorder, final=False):
                collector.stop()
                code = collector.wait(0)
                break
            if code is not None:
                break
            if on_progress is not None:
                on_progress(
                    RoundProgress(
                        self.files.number,
                        planned,
                        self.recorded.rows,
                        len(self.recorded.refused),
                        self.recorded.failures,
                        time.monotonic() - started,
                    )
                )
            if time.monotonic() - heard >= HEARD_SECONDS:
                heard = time.monotonic()
                self.seat.heard(total + self.recorded.rows)
            if self.launcher.interrupted or collector.timed_out:
                stopped = stopped or self.launcher.interrupted
                collector.stop()
        if not self.lost and self._record(recorder, final=True):
            mark_recorded(self.files)  # its collector's whole group has exited
        return CollectorExit(code, collector.timed_out, stopped)

    def _record(self, recorder: RoundRecorder, *, final: bool) -> bool:
        """Record what landed; ``False`` once the worker's session is lost."""
        try:
            self.seat.check()  # never record on a session that lost its lock
            self.recorded.add(recorder.record(final=final))
        except LockLost:
            self.lost = True
            return False
        except LedgerError:
            try:
                self.seat.check()
            except LockLost:
                self.lost = True
                return False
            raise
        return True


def work_batches(
    ledger: Ledger,
    launcher: Launcher,
    *,
    name: str,
    workdir: Path,
    batch: int,
    wait: float,
    on_batch: Callable[[WorkerReport], None] | None = None,
    on_progress: OnProgress | None = None,
    on_note: OnNote | None = None,
) -> WorkerReport:
    """Claim, run, record until nothing is claimable; the last report.

    ``ledger`` is the run opened without its lock (a worker); ``workdir`` is
    this worker's own folder (never shared by two living workers).
    """
    seat = WorkerSeat.take(ledger, name)
    state = "stopped"
    try:
        report = _work(
            ledger, seat, launcher, workdir, batch, wait, on_batch, on_progress, on_note
        )
        state = {0: "done", 76: "done"}.get(report.exit_code or 0, "stopped")
    finally:
        seat.leave(state)
    return report


def _work(
    ledger: Ledger,
    seat: WorkerSeat,
    launcher: Launcher,
    workdir: Path,
    size: int,
    wait: float,
    on_batch: Callable[[WorkerReport], None] | None,
    on_progress: OnProgress | None,
    on_note: OnNote | None,
) -> WorkerReport:
    def note(text: str) -> None:
        if on_note is not None:
            on_note(text)

    adopted = _adopt(ledger, launcher, workdir)
    total = 0 if adopted is None else adopted.rows
    number = max(_rounds(workdir), default=0)
    idle = 0
    waiting_since: float | None = None
    report = WorkerReport(seat.name, number, None, None, None, Recorded(), adopted)
    while True:
        if _interrupted(launcher):
            return _stopped(report, "interrupted", 75, total)
        try:
            claimed = seat.claim(size)
        except LockLost as exc:
            return _stopped(report, "session_lost", 75, total, why=str(exc))
        if not any(claimed.values()):
            check = check_outcome(ledger)
            report.check = check
            if check.complete:
                return _stopped(report, "complete", 0, total)
            if check.exit_code == 76:
                return _stopped(report, "nothing_retryable", 76, total)
            now = time.monotonic()
            coordinator = seat.board.coordinator()
            if waiting_since is None:
                waiting_since = now
                note(
                    "nothing to claim now; waiting up to "
                    f"{wait:g} seconds for the coordinator to release more"
                    if coordinator is not None
                    else "no coordinator holds the run lock, and nothing is left "
                    f"to claim; waiting up to {wait:g} seconds for one (start it "
                    "with rollout-ledger run URL --config ... without --worker)"
                )
            if now - waiting_since >= wait:
                why = (
                    "no coordinator held the run lock"
                    if coordinator is None
                    else "the coordinator released nothing more to claim"
                )
                return _stopped(
                    report,
                    "no_work",
                    75,
                    total,
                    why=f"{why} for {wait:g} seconds; start this worker again "
                    "(a requeue) to go on",
                )
            seat.heard(total)
            time.sleep(IDLE_POLL_SECONDS)
            continue
        waiting_since = None
        number += 1
        files = _round_files(workdir, number)
        work = _Batch(ledger, seat, launcher, files, claimed)
        planned = work.plan()
        ended = work.run(planned, total, on_progress)
        total += work.recorded.rows
        report = WorkerReport(
            seat.name,
            number,
            {kind: len(keys) for kind, keys in claimed.items()},
            files,
            ended,
            work.recorded,
            total_rows=total,
        )
        if work.lost:
            return _stopped(
                report,
                "session_lost",
                75,
                total,
                why="this worker's PostgreSQL session ended (terminated, or the "
                "server restarted), so it recorded nothing more; the coordinator "
                "offers its work to the other workers, and the rows its collector "
                f"wrote stay in {files.output}; start it again with the same "
                "--workdir to adopt them",
            )
        finished = _outcomes(ledger, claimed)
        unfinished = {kind: claimed[kind] - finished[kind] for kind in claimed}
        seat.settle(finished, unfinished)
        seat.heard(total)
        idle = 0 if work.recorded.rows else idle + 1
        if idle >= STALL_ROUNDS:
            return _stopped(
                report,
                "stalled",
                3,
                total,
                why="the collector recorded no row in "
                f"{plural(idle, 'batch', 'batches')} in a row (the last: "
                f"{files.output} and {files.failures}); read what it printed "
                "above, fix it, then start the worker again",
            )
        if _interrupted(launcher):
            return _stopped(report, "interrupted", 75, total)
        if on_batch is not None:
            on_batch(report)


def _interrupted(launcher: Launcher) -> bool:
    """A signal asked the worker to stop (read afresh: the handler sets it)."""
    return launcher.interrupted


def _stopped(
    report: WorkerReport, stop: str, code: int, total: int, *, why: str | None = None
) -> WorkerReport:
    report.stop, report.exit_code, report.total_rows = stop, code, total
    report.why = why
    return report
