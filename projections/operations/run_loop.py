"""``rollout-ledger run``: resume, run the collector, record as it writes, repeat.

Each round: ``resume`` (replay, gate, plan: REC-56, exactly as the ``resume``
command) releases the plan, written to the round's ``plan.jsonl`` (CLI-4);
the collector (a ``Launcher``'s ``Collector``: a process, in the command
line) runs it, and every complete line it appends to the round's output and
failures files is recorded as it lands (``RoundRecorder``, CLI-5's path);
once it exits, the rest is recorded and ``check`` (REC-40, CLI-7) decides:

- complete: stop, exit 0; unfinished and nothing retryable: stop, exit 76;
- ``max_rounds`` rounds done, or a signal asked the run to stop: exit 75
  (the rows so far recorded; a requeued job goes on);
- a plan that releases nothing while work is retryable: exit 75 at once;
- ``STALL_ROUNDS`` rounds in a row that recorded nothing (a collector that
  crashes, hangs or writes nothing usable): stop with exit 3, the collector
  named as the problem, rather than retry it forever;
- otherwise the next round.

Before its first round, ``run`` records what every earlier round's collector
wrote past what was recorded (a ``run`` killed mid-round, even by SIGKILL),
after waiting for a collector such a ``run`` left draining: rows recorded
already are skipped, so nothing is recorded twice and nothing written is
lost. A round is followed until every process of its collector's group has
exited (``Collector.wait``), so a worker outliving its leader loses nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from ledger import ConfigError, Ledger, RecoveryIncomplete, plural
from ledger.policy.log import policy_from_json
from ledger.policy.model import RecoveryPolicy
from projections.operations.keep import replay_kept
from projections.operations.plan_file import write_plan_file
from projections.operations.publishing import publish
from projections.operations.recorded import Recorded
from projections.operations.resuming import resume
from projections.operations.round_files import (
    RoundFiles,
    RoundRecorder,
    mark_recorded,
    recorded_whole,
    round_numbers,
)
from projections.views.refused import history_command, refusals_fix
from projections.views.status import check_run

__all__ = [
    "STALL_ROUNDS",
    "Collector",
    "CollectorExit",
    "Launcher",
    "RoundProgress",
    "RoundReport",
    "RunCheck",
    "run_rounds",
]

#: Rounds in a row that recorded nothing before ``run`` stops (exit 3).
STALL_ROUNDS = 2
#: Seconds between two reads of the collector's files.
POLL_SECONDS = 0.2
#: ``resume``'s options that record something once: the first round's only.
_ONCE = frozenset({"approvals", "retry_terminal_timeouts"})


class Collector(Protocol):
    """A running collector, as the loop sees it."""

    def wait(self, seconds: float) -> int | None:
        """Its exit code once it exited; else ``None`` after at most ``seconds``."""

    def stop(self) -> None:
        """Ask it to stop (terminate, then kill after a grace period)."""

    @property
    def timed_out(self) -> bool:
        """It ran past the round's time limit."""


class Launcher(Protocol):
    """Starts a round's collector; knows whether ``run`` was asked to stop."""

    def start(self, files: RoundFiles) -> Collector:
        """The collector of ``files``, started."""

    @property
    def interrupted(self) -> bool:
        """A signal (SIGTERM, SIGINT) asked ``run`` to stop."""

    def finish_earlier(self, files: RoundFiles) -> bool:
        """Wait for (or stop) round ``files``' collector if a killed run left it."""


class RunCheck(msgspec.Struct, frozen=True):
    """``check``'s answer after a round (CLI-7)."""

    complete: bool
    exit_code: int
    message: str
    unfinished: dict[str, int]


class CollectorExit(msgspec.Struct, frozen=True):
    """How a round's collector ended."""

    exit_code: int | None
    timed_out: bool = False
    stopped: bool = False  # stopped because ``run`` was asked to stop


class RoundReport(msgspec.Struct):
    """One round of ``run``; the last one carries ``stop`` and ``exit_code``."""

    round: int
    adopted: Recorded | None
    plan: dict[str, int] | None
    files: RoundFiles | None
    collector: CollectorExit | None
    recorded: Recorded
    check: RunCheck
    stop: str | None = None
    exit_code: int | None = None
    #: Why the loop cannot progress and what to fix (a stall), in words.
    why: str | None = None


class RoundProgress(msgspec.Struct, frozen=True):
    """Where a round stands while its collector runs (issue 28: ``run``'s progress).

    ``planned`` counts the attempts and re-judgments the round released,
    ``recorded`` the rows recorded so far (``refused`` the lines refused),
    ``failures`` the failure rows among them by side, in words; ``seconds``
    since the collector started. ``ended``: the collector's group has exited
    and every line was read.
    """

    round: int
    planned: int
    recorded: int
    refused: int
    failures: dict[str, int]
    seconds: float
    ended: bool = False

    @property
    def rate(self) -> float | None:
        """Rows recorded a second, once there is a second to count over."""
        return self.recorded / self.seconds if self.seconds >= 1 else None

    @property
    def seconds_left(self) -> float | None:
        """At the rate so far, seconds until every planned row is recorded."""
        rate = self.rate
        if not rate or self.ended:
            return None
        return max(self.planned - self.recorded, 0) / rate


#: What ``run`` is told while a round runs (``None``: nothing).
OnProgress = Callable[[RoundProgress], None]


def check_outcome(ledger: Ledger) -> RunCheck:
    """``check`` on the run as recorded now: 0, 75 or 76 (CLI-7)."""
    try:
        cover = check_run(ledger)
    except RecoveryIncomplete as exc:
        return RunCheck(False, exc.exit_code, str(exc), dict(exc.counts))
    return RunCheck(
        True, 0, f"all {cover.expected} rollouts are complete or omitted", {}
    )


def _stop(
    report: RoundReport,
    *,
    rounds: int,
    max_rounds: int | None,
    idle: int,
    interrupted: bool,
) -> tuple[str, int] | None:
    """Why the loop stops after ``report``, and the exit code; ``None``: go on."""
    check, plan = report.check, report.plan
    if check.complete:
        return "complete", 0
    if check.exit_code == 76:
        return "nothing_retryable", 76
    if interrupted:
        return "interrupted", 75
    if plan is not None and not plan["dispatch"] + plan["rejudge"]:
        return "nothing_released", 75
    if idle >= STALL_ROUNDS:
        return "stalled", 3
    if max_rounds is not None and rounds >= max_rounds:
        return "max_rounds", 75
    return None


def _adopt(ledger: Ledger, launcher: Launcher) -> tuple[int, Recorded | None]:
    """Every earlier round's files recorded past what was (a killed ``run``'s).

    A collector a killed ``run`` left draining is waited for first (issue 25:
    its last rows are recorded, and it runs no longer). A round whose files
    have not changed since it was last recorded whole is not read again.
    Returns the last round begun and what was recorded.
    """
    rounds = round_numbers(ledger)
    if not rounds:
        return 0, None
    recorded = Recorded()
    for number in rounds:
        files = RoundFiles.of(ledger, number)
        launcher.finish_earlier(files)
        if recorded_whole(files):
            continue
        recorded.add(RoundRecorder(ledger, files).record(final=True))
        mark_recorded(files)
    return rounds[-1], recorded


def _collect(
    launcher: Launcher,
    recorder: RoundRecorder,
    planned: int,
    on_progress: OnProgress | None,
) -> tuple[CollectorExit, Recorded]:
    recorded = Recorded()
    collector = launcher.start(recorder.files)
    started = time.monotonic()

    def told(*, ended: bool = False) -> None:
        if on_progress is not None:
            on_progress(
                RoundProgress(
                    recorder.files.number,
                    planned,
                    recorded.rows,
                    len(recorded.refused),
                    recorded.failures,
                    time.monotonic() - started,
                    ended,
                )
            )

    stopped = False
    while True:
        code = collector.wait(POLL_SECONDS)
        recorded.add(recorder.record())
        if code is not None:
            break
        told()
        if launcher.interrupted or collector.timed_out:
            stopped = stopped or launcher.interrupted
            collector.stop()
    recorded.add(recorder.record(final=True))
    mark_recorded(recorder.files)  # its collector's whole group has exited
    told(ended=True)
    return CollectorExit(code, collector.timed_out, stopped), recorded


def _round(
    ledger: Ledger,
    config: Any,
    global_config: Any,
    launcher: Launcher,
    number: int,
    options: dict[str, Any],
    on_progress: OnProgress | None = None,
) -> RoundReport:
    """Round ``number``: release the plan, run the collector, record, check."""
    files = RoundFiles.of(ledger, number)
    found = resume(ledger, config, global_config, **options)
    write_plan_file(files.plan, found.plan)
    plan = found.plan
    counts = {
        "dispatch": len(plan.dispatch),
        "rejudge": len(plan.rejudge),
        "held": len(plan.held),
    }
    ended, recorded = CollectorExit(None), Recorded()
    if (plan.dispatch or plan.rejudge) and not launcher.interrupted:
        policy: RecoveryPolicy = policy_from_json(found.state.policy)
        recorder = RoundRecorder(ledger, files, policy, sides=on_progress is not None)
        planned = counts["dispatch"] + counts["rejudge"]
        ended, recorded = _collect(launcher, recorder, planned, on_progress)
    check = check_outcome(ledger)
    return RoundReport(number, None, counts, files, ended, recorded, check)


def _stalled(ledger: Ledger, reports: list[RoundReport]) -> str:
    """Why rounds recorded nothing, and what to fix (issue 25)."""
    refused = [r for report in reports for r in report.recorded.refused]
    listing = history_command(ledger)
    if refused:
        last = refused[-1]
        fix = refusals_fix([r.message for r in refused])
        return (
            f"the collector wrote {plural(len(refused), 'line')} in the last "
            f"{plural(len(reports), 'round')} and every one was refused (the last: "
            f"{last.file} line {last.line}: {last.message}); running it again repeats "
            f"that: {fix}, then run again; `{listing}` lists each"
        )
    files = [report.files for report in reports if report.files is not None]
    named = (
        f" ({files[-1].output} and {files[-1].failures} stayed empty)" if files else ""
    )
    return (
        f"the collector wrote no row in the last {plural(len(reports), 'round')}"
        f"{named}; read what it printed above, fix it, then run again"
    )


def run_rounds(
    ledger: Ledger,
    config: Any,
    global_config: Any,
    launcher: Launcher,
    *,
    max_rounds: int | None = None,
    on_round: Callable[[RoundReport], None] | None = None,
    on_progress: OnProgress | None = None,
    **options: Any,
) -> RoundReport:
    """Rounds until complete, nothing retryable, ``max_rounds`` or a stop.

    ``options`` are ``resume``'s (``extend_attempts``, ``allow_unsafe``, ...);
    what is recorded once (``approvals``, ``retry_terminal_timeouts``) is
    given to the first round only. Each round's report goes to ``on_round``
    as it ends, and while its collector runs, where it stands goes to
    ``on_progress`` at every read of its files; the last report is returned,
    its ``stop`` and ``exit_code`` set (also when no round was needed).
    """
    if ledger.folder is None:
        raise ConfigError(
            "run keeps each round's plan and collector files in the run's ledger "
            "folder, so it needs a run kept in files (OUT a path), not in a store"
        )
    number, adopted = _adopt(ledger, launcher)
    report = RoundReport(
        number, adopted, None, None, None, Recorded(), check_outcome(ledger)
    )
    interrupted = launcher.interrupted
    why = _stop(report, rounds=0, max_rounds=None, idle=0, interrupted=interrupted)
    rounds = idle = 0
    idle_reports: list[RoundReport] = []
    while why is None:
        number, rounds = number + 1, rounds + 1
        report = _round(
            ledger, config, global_config, launcher, number, options, on_progress
        )
        options = {k: v for k, v in options.items() if k not in _ONCE}
        report.adopted, adopted = adopted, None
        idle = 0 if report.recorded.rows else idle + 1
        idle_reports = [*idle_reports, report] if idle else []
        why = _stop(
            report,
            rounds=rounds,
            max_rounds=max_rounds,
            idle=idle,
            interrupted=launcher.interrupted,
        )
        if why is None and on_round is not None:
            on_round(report)
    publish(ledger, replay_kept(ledger))
    report.stop, report.exit_code = why
    if why[0] == "stalled":
        report.why = _stalled(ledger, idle_reports)
    if on_round is not None:
        on_round(report)
    return report
