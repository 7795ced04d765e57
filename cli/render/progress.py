"""Progress on stderr: a spinner, and ``run``'s line per round (cli.md, issue 28).

``working("verifying")`` shows ``verifying |  1.2s`` on stderr, redrawn a few
times a second by a daemon thread, and erases it when the step ends. Off a
terminal (stderr redirected, a pipe, CI) or with ``quiet`` it does nothing at
all, so scripts and logs never see it. A step whose items are counted uses
``cli.common.progress`` (a bar) instead.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from projections import RoundProgress

__all__ = ["RoundProgressLine", "progress_words", "working"]

_FRAMES = "|/-\\"
#: Seconds between two redraws.
_EVERY = 0.1
#: Seconds between two redraws of ``run``'s progress line on a terminal.
_REDRAW = 0.5


def _spin(label: str, stream: TextIO, stop: threading.Event) -> None:
    started = time.monotonic()
    frame = 0
    while True:
        elapsed = time.monotonic() - started
        stream.write(f"\r{label} {_FRAMES[frame % len(_FRAMES)]} {elapsed:5.1f}s")
        stream.flush()
        frame += 1
        if stop.wait(_EVERY):
            return


@contextmanager
def working(label: str, *, quiet: bool = False) -> Iterator[None]:
    """A spinner labelled ``label`` on stderr while the block runs (a terminal only)."""
    stream = sys.stderr
    if quiet or not stream.isatty():
        yield
        return
    stop = threading.Event()
    thread = threading.Thread(target=_spin, args=(label, stream, stop), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        stream.write("\r\x1b[K")  # erase the spinner's line
        stream.flush()


def _duration(seconds: float) -> str:
    """``seconds`` as a person reads it: ``45 s``, ``3 min 20 s``, ``2 h 05 min``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def progress_words(progress: RoundProgress) -> str:
    """One round's progress in a line (issue 28), the same on and off a terminal.

    ``round 2: 1,204 of 10,000 rows recorded (12%); failures 4 (model 3,
    infrastructure 1); 41.2 rows/s; about 3 min 34 s left``.
    """
    planned = progress.planned
    share = f" ({100 * progress.recorded // planned}%)" if planned else ""
    parts = [
        f"round {progress.round}: {progress.recorded:,} of {planned:,} rows "
        f"recorded{share}"
    ]
    failures = sum(progress.failures.values())
    if failures:
        sides = ", ".join(f"{side} {n:,}" for side, n in progress.failures.items())
        parts.append(f"failures {failures:,} ({sides})")
    else:
        parts.append("no failures")
    if progress.refused:
        parts.append(f"{progress.refused:,} refused")
    rate = progress.rate
    parts.append("rows/s not known yet" if rate is None else f"{rate:,.1f} rows/s")
    left = progress.seconds_left
    if left is not None:
        parts.append(f"about {_duration(left)} left")
    parts.append(f"{_duration(progress.seconds)} so far")
    return "; ".join(parts)


class RoundProgressLine:
    """``run``'s progress (issue 28): a line redrawn on a terminal, else every N s.

    On a terminal (``stream`` a tty) the line is redrawn in place at most
    every ``_REDRAW`` seconds, cut to the terminal's width, and erased when
    the round ends (its summary line follows). Off a terminal (a Slurm log) a
    plain line is written every ``every`` seconds of a round. ``quiet``:
    nothing at all.
    """

    def __init__(
        self, *, every: float = 60.0, quiet: bool = False, stream: TextIO | None = None
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.every = every
        self.quiet = quiet
        self.tty = self.stream.isatty()
        self._last: tuple[int, float] | None = None  # round, seconds at last line
        self.lines = 0

    def __call__(self, progress: RoundProgress) -> None:
        """Show ``progress`` if it is time to."""
        if self.quiet:
            return
        if self.tty:
            self._draw(progress)
        elif not progress.ended and self._due(progress, self.every):
            self.stream.write(progress_words(progress) + "\n")
            self.stream.flush()
            self.lines += 1

    def _due(self, progress: RoundProgress, every: float) -> bool:
        """Whether ``every`` seconds passed since the round's last line (or start)."""
        last = self._last
        since = progress.seconds
        if last is not None and last[0] == progress.round:
            since -= last[1]
        if since < every:
            return False
        self._last = (progress.round, progress.seconds)
        return True

    def _draw(self, progress: RoundProgress) -> None:
        if progress.ended:
            self.stream.write("\r\x1b[K")  # the round's summary line follows
            self.stream.flush()
            return
        if not self._due(progress, _REDRAW):
            return
        width = shutil.get_terminal_size().columns - 1
        line = progress_words(progress)
        if len(line) > width:
            line = line[: max(width - 3, 0)] + "..."
        self.stream.write("\r\x1b[K" + line)
        self.stream.flush()
        self.lines += 1
