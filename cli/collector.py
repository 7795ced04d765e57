"""The collector of ``rollout-ledger run``: a process started from ``-- COMMAND``.

``ProcessLauncher`` starts the command (no shell: an argv list) in its own
process group with ``{plan}``, ``{output}`` and ``{failures}`` replaced in its
arguments and ``ROLLOUT_LEDGER_PLAN``, ``ROLLOUT_LEDGER_OUTPUT`` and
``ROLLOUT_LEDGER_FAILURES`` in its environment. While it is installed,
SIGTERM and SIGINT (Slurm preemption, Ctrl-C) are passed to the collector's
process group and mark the launcher ``interrupted``; the loop then records
the collector's rows and stops (exit 75). A collector past the round's time
limit, or asked to stop, gets SIGTERM, then SIGKILL after ``GRACE_SECONDS``.
On Linux the collector also gets SIGTERM when ``run`` itself dies (even by
SIGKILL): left running, it would go on writing a round's files after the next
``run`` had recorded them, work done for nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from projections import RoundFiles

__all__ = ["GRACE_SECONDS", "ProcessLauncher"]

#: Seconds between SIGTERM and SIGKILL when a collector is stopped.
GRACE_SECONDS = 10.0
_PR_SET_PDEATHSIG = 1  # prctl(2)


def _dies_with_parent() -> Any:
    """A ``preexec_fn`` that asks the kernel for SIGTERM when ``run`` dies, or
    ``None`` where prctl is not there. libc is loaded here, before the fork:
    the child only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    import ctypes.util

    try:
        prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").prctl
    except (OSError, AttributeError):
        return None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))

    return preexec


_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class _Process:
    """One collector process, in its own process group."""

    def __init__(self, popen: subprocess.Popen[bytes], timeout: float | None) -> None:
        self.popen = popen
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.timed_out = False

    def wait(self, seconds: float) -> int | None:
        try:
            return self.popen.wait(seconds)
        except subprocess.TimeoutExpired:
            if self.deadline is not None and time.monotonic() >= self.deadline:
                self.timed_out = True
            return None

    def signal(self, number: int) -> None:
        with suppress(ProcessLookupError, PermissionError):  # gone already
            os.killpg(self.popen.pid, number)

    def stop(self) -> None:
        self.signal(signal.SIGTERM)
        try:
            self.popen.wait(GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.popen.wait()


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
        places = {"{plan}": files.plan, "{output}": files.output}
        places["{failures}"] = files.failures
        argv = [_replace(arg, places) for arg in self.command]
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
                preexec_fn=_dies_with_parent(),  # prctl only: no lock taken
            )
        except OSError as exc:
            raise ConfigError(
                f"cannot start the collector {argv[0]}: {exc.strerror or exc}"
            ) from exc
        self.running = _Process(popen, self.round_timeout)
        return self.running

    def _on_signal(self, number: int, frame: FrameType | None) -> None:
        del frame
        self.interrupted = True
        if self.running is not None:
            self.running.signal(number)

    @contextmanager
    def signals(self) -> Iterator[ProcessLauncher]:
        """SIGTERM and SIGINT passed to the collector while the block runs."""
        before = {number: signal.getsignal(number) for number in _SIGNALS}
        for number in _SIGNALS:
            signal.signal(number, self._on_signal)
        try:
            yield self
        finally:
            for number, handler in before.items():
                signal.signal(number, handler)
            if self.running is not None and self.running.popen.poll() is None:
                self.running.stop()  # an error mid-round: leave no collector behind


def _replace(arg: str, places: dict[str, str]) -> str:
    for name, value in places.items():
        arg = arg.replace(name, value)
    return arg


def collector_stdout(as_json: bool) -> Any:
    """Where the collector's stdout goes: stderr (fd 2) when ours carries JSON."""
    return 2 if as_json else None
