"""The collector of ``rollout-ledger run``: a process started from ``-- COMMAND``.

``ProcessLauncher`` starts the command (no shell: an argv list) in its own
process group with ``{plan}``, ``{output}`` and ``{failures}`` replaced in its
arguments (once, in one pass: a path holding ``{output}`` stays as it is) and
``ROLLOUT_LEDGER_PLAN``, ``ROLLOUT_LEDGER_OUTPUT`` and
``ROLLOUT_LEDGER_FAILURES`` in its environment. While it is installed,
SIGTERM and SIGINT (Slurm preemption, Ctrl-C) are passed to the collector's
process group and mark the launcher ``interrupted``; the loop then records
the collector's rows and stops (exit 75). A signal that came before (while
``run`` started up: ``cli.launch.early_signals``) counts the same.

A round lasts until every process of the collector's group has exited, not
only the one it started: a worker that outlives its leader may still write
rows (issue 25). A collector past the round's time limit, or asked to stop,
gets SIGTERM to its whole group, then SIGKILL after ``GRACE_SECONDS``.

On Linux the collector also gets SIGTERM when ``run`` itself dies (even by
SIGKILL); if ``run`` died before that was set up, the collector ends itself
at once. Each round's collector is noted in its folder (``collector.json``:
its process group and the leader's start time), so the next ``run`` waits for
a collector a killed ``run`` left draining (stopping it after the grace)
before it records that round's files: nothing it writes is lost, and nothing
runs on unsignalled.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from cli.launch import early_signals
from cli.launch.process_group import group_alive, start_time

if TYPE_CHECKING:
    from projections import RoundFiles

__all__ = [
    "GRACE_SECONDS",
    "ProcessLauncher",
    "collector_stdout",
    "dies_with_parent",
    "replace_places",
    "sidecar_warning",
]

#: Seconds between SIGTERM and SIGKILL when a collector is stopped.
GRACE_SECONDS = 10.0
#: How often the group is looked at once its leader has exited.
_GROUP_POLL = 0.05
_PR_SET_PDEATHSIG = 1  # prctl(2)
_PLACES = re.compile(r"\{(plan|output|failures)\}")
_RECORD = "collector.json"


def dies_with_parent() -> Any:
    """A ``preexec_fn`` that asks the kernel for SIGTERM when ``run`` dies, or
    ``None`` where prctl is not there. libc is loaded here, before the fork:
    the child only calls it. A ``run`` that died between the fork and the
    prctl call sends nothing: the child sees its parent changed and ends."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    import ctypes.util

    try:
        prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
        if os.getppid() != parent:  # run died before the prctl: no signal comes
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


class _Process:
    """One collector process group: its leader, and whoever else is in it."""

    def __init__(self, popen: subprocess.Popen[bytes], timeout: float | None) -> None:
        self.popen = popen
        self.pgid = popen.pid
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.timed_out = False
        self._code: int | None = None

    def wait(self, seconds: float) -> int | None:
        """The leader's exit code once every process of the group has exited."""
        until = time.monotonic() + seconds
        if self._code is None:
            try:
                self._code = self.popen.wait(seconds)
            except subprocess.TimeoutExpired:
                self._check_deadline()
                return None
        while group_alive(self.pgid):
            left = until - time.monotonic()
            if left <= 0:
                self._check_deadline()
                return None
            time.sleep(min(_GROUP_POLL, left))
        return self._code

    def _check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.timed_out = True

    def signal(self, number: int) -> None:
        with suppress(ProcessLookupError, PermissionError):  # gone already
            os.killpg(self.pgid, number)

    def stop(self) -> None:
        """SIGTERM to the group; SIGKILL to what is left after the grace."""
        self.signal(signal.SIGTERM)
        if self.wait(GRACE_SECONDS) is None:
            self.signal(signal.SIGKILL)
            self.popen.wait()
            _wait_gone(self.pgid, GRACE_SECONDS)


def _wait_gone(pgid: int, seconds: float) -> bool:
    until = time.monotonic() + seconds
    while group_alive(pgid):
        if time.monotonic() >= until:
            return False
        time.sleep(_GROUP_POLL)
    return True


class ProcessLauncher:
    """Starts ``command`` for each round; passes SIGTERM and SIGINT on."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        round_timeout: float | None = None,
        stdout: Any = None,
    ) -> None:
        self.command = list(command)
        self.round_timeout = round_timeout
        self.stdout = stdout
        self.interrupted = False
        self.running: _Process | None = None

    def start(self, files: RoundFiles) -> _Process:
        """The collector of round ``files``, started (no shell)."""
        places = {"plan": files.plan, "output": files.output}
        places["failures"] = files.failures
        argv = [replace_places(arg, places) for arg in self.command]
        env = dict(os.environ)
        env["ROLLOUT_LEDGER_PLAN"] = files.plan
        env["ROLLOUT_LEDGER_OUTPUT"] = files.output
        env["ROLLOUT_LEDGER_FAILURES"] = files.failures
        from ledger import ConfigError

        try:
            popen = subprocess.Popen(
                argv,
                env=env,
                stdout=self.stdout,
                start_new_session=True,
                preexec_fn=dies_with_parent(),  # prctl only: no lock taken
            )
        except OSError as exc:
            raise ConfigError(
                f"cannot start the collector {argv[0]}: {exc.strerror or exc}"
            ) from exc
        self.running = _Process(popen, self.round_timeout)
        _note_collector(files, popen.pid)
        return self.running

    def finish_earlier(self, files: RoundFiles) -> bool:
        """Wait for round ``files``' collector if it still runs (a killed ``run``'s).

        It got SIGTERM when that ``run`` died and may be writing its last
        rows: it is given ``GRACE_SECONDS`` to end, then its group is killed.
        Returns whether one was still running.
        """
        noted = _noted_collector(files)
        if noted is None or not _same_group(*noted):
            return False
        pgid = noted[0]
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        if not _wait_gone(pgid, GRACE_SECONDS):
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            _wait_gone(pgid, GRACE_SECONDS)
        return True

    def _on_signal(self, number: int, frame: FrameType | None) -> None:
        del frame
        self.interrupted = True
        if self.running is not None:
            self.running.signal(number)

    @contextmanager
    def signals(self) -> Iterator[ProcessLauncher]:
        """SIGTERM and SIGINT passed to the collector while the block runs."""
        before = {number: signal.getsignal(number) for number in early_signals.SIGNALS}
        for number in early_signals.SIGNALS:
            signal.signal(number, self._on_signal)
        if early_signals.pending:  # came while run started up
            self.interrupted = True
        try:
            yield self
        finally:
            for number, handler in before.items():
                signal.signal(number, handler)
            if self.running is not None and self.running.wait(0) is None:
                self.running.stop()  # an error mid-round: leave no collector behind


def replace_places(arg: str, places: dict[str, str]) -> str:
    """``arg`` with ``{plan}``, ``{output}`` and ``{failures}`` replaced, once.

    One pass: a replacement that itself holds ``{output}`` (a run path) is
    never replaced again.
    """
    return _PLACES.sub(lambda match: places[match.group(1)], arg)


def _note_collector(files: RoundFiles, pid: int) -> None:
    noted = {"pgid": pid, "start_time": start_time(pid)}
    with suppress(OSError):  # a note for the next run: its loss costs a wait only
        Path(files.plan).with_name(_RECORD).write_text(json.dumps(noted))


def _noted_collector(files: RoundFiles) -> tuple[int, int | None] | None:
    try:
        noted = json.loads(Path(files.plan).with_name(_RECORD).read_text())
        pgid, started = noted["pgid"], noted.get("start_time")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(pgid, int) or pgid <= 1:
        return None
    return pgid, started if isinstance(started, int) else None


def _same_group(pgid: int, started: int | None) -> bool:
    """The noted group still has a process, and its id was not reused since.

    A group's id is its leader's pid, never given to another process while any
    member lives; once the leader is gone its members keep it. A leader that
    lives with another start time is a new process that got the id later.
    """
    if not group_alive(pgid):
        return False
    now = start_time(pgid)
    return now is None or started is None or now == started


def collector_stdout(as_json: bool) -> Any:
    """Where the collector's stdout goes: stderr (fd 2) when ours carries JSON."""
    return 2 if as_json else None


#: NeMo Gym 0.7.0's collector, by the names its wheel installs it under.
_NEMO_GYM_COLLECTORS = frozenset(
    {
        "ng_collect_rollouts",
        "ng_e2e_collect_rollouts",
        "nemo_gym_collect_rollouts",
        "nemo_gym_e2e_collect_rollouts",
    }
)


def sidecar_warning(argv: list[str]) -> str | None:
    """A warning when ``argv`` runs NeMo Gym 0.7.0's collector without its sidecar.

    As shipped, 0.7.0 ends the whole collection at the first agent request
    that fails (a traceback, no failure row) unless
    ``route_failures_to_sidecar`` is true (issue 25).
    """
    names = {Path(arg).name for arg in argv[:3]}
    if not names & _NEMO_GYM_COLLECTORS and "nemo_gym.cli.legacy" not in argv[:3]:
        return None
    if any(
        arg.lstrip("+").replace(" ", "").lower() == "route_failures_to_sidecar=true"
        for arg in argv
    ):
        return None
    return (
        "NeMo Gym's collector is run without +route_failures_to_sidecar=true: as "
        "shipped it ends the whole collection at the first agent request that fails "
        "(one HTTP error), with no row for it; add +route_failures_to_sidecar=true "
        "after the collector's command so that failure is written as a row, "
        "recorded and retried (unless your configuration files set it already)"
    )
