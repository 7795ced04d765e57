"""Progress on stderr: a spinner, and ``run``'s line per round (cli.md, issue 28).

``working("verifying")`` shows ``verifying |  1.2s`` on stderr, redrawn a few
times a second by a daemon thread, and erases it when the step ends. Off a
terminal (stderr redirected, a pipe, CI) or with ``quiet`` it does nothing at
all, so scripts and logs never see it. A step whose items are counted uses
``cli.common.progress`` (a bar) instead.
"""

from __future__ import annotations

import io
import os
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


def progress_words(progress: RoundProgress, width: int | None = None) -> str:
    """One round's progress in a line (issue 28), the same on and off a terminal.

    ``round 2: 1,204 of 10,000 rows recorded (12%); failures 4 (model 3,
    infrastructure 1); 41.2 rows/s; about 3 min 34 s left; 30 s so far``.
    Given a ``width``, what fits: the time so far goes first, then the
    failures' sides, then the line is cut.
    """
    planned = progress.planned
    share = f" ({100 * progress.recorded // planned}%)" if planned else ""
    head = (
        f"round {progress.round}: {progress.recorded:,} of {planned:,} rows "
        f"recorded{share}"
    )
    failures = sum(progress.failures.values())
    sides = ", ".join(f"{side} {n:,}" for side, n in progress.failures.items())
    failed = [f"failures {failures:,} ({sides})", f"failures {failures:,}"]
    if not failures:
        failed = ["no failures"] * 2
    rest = [f"{progress.refused:,} refused"] if progress.refused else []
    rate = progress.rate
    rest.append("rows/s not known yet" if rate is None else f"{rate:,.1f} rows/s")
    left = progress.seconds_left
    if left is not None:
        rest.append(f"about {_duration(left)} left")
    so_far = f"{_duration(progress.seconds)} so far"
    whole = "; ".join([head, failed[0], *rest, so_far])
    if width is None:
        return whole
    shorter = ("; ".join([head, failed[0], *rest]), "; ".join([head, failed[1], *rest]))
    for line in (whole, *shorter):
        if len(line) <= width:
            return line
    return shorter[-1][: max(width - 3, 0)] + "..."


class RoundProgressLine:
    """``run``'s progress (issue 28): a line kept on a terminal, else every N s.

    On a terminal (``stream`` a tty) the line is drawn on the terminal's last
    row, kept apart as apt does (a scrolling region above it), so the
    collector's own output and ``run``'s lines scroll above it and never
    through it; redrawn at most every ``_REDRAW`` seconds, fitted to the
    width, and given back when the round ends (``close`` gives it back on any
    exit). A terminal too small for that gets the line redrawn in place.
    Off a terminal (a Slurm log) a plain line is written every ``every``
    seconds of a round. ``quiet``: nothing at all.
    """

    def __init__(
        self, *, every: float = 60.0, quiet: bool = False, stream: TextIO | None = None
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.every = every
        self.quiet = quiet
        self.tty = self.stream.isatty()
        self._last: tuple[int, float] | None = None  # round, seconds at last line
        self._rows: int | None = None  # the terminal's rows, while the last is kept
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

    def close(self) -> None:
        """Give the terminal's last row back (when it was kept)."""
        if self._rows is not None:
            rows, self._rows = self._rows, None
            # save; whole screen scrolls again; clear the last row; restore
            self.stream.write(f"\x1b7\x1b[r\x1b[{rows};1H\x1b[K\x1b8")
            self.stream.flush()

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

    def _size(self) -> tuple[int, int]:
        try:
            size = os.get_terminal_size(self.stream.fileno())
        except (OSError, ValueError, io.UnsupportedOperation):
            return 80, 0
        return size.columns, size.lines

    def _draw(self, progress: RoundProgress) -> None:
        if progress.ended:
            if self._rows is None:
                self.stream.write("\r\x1b[K")  # the round's summary line follows
            self.close()
            self.stream.flush()
            return
        if not self._due(progress, _REDRAW):
            return
        columns, rows = self._size()
        line = progress_words(progress, max(columns - 1, 20))
        if rows < 3:  # no room to keep a row apart: redraw in place
            self.stream.write("\r\x1b[K" + line)
        else:
            if self._rows is None:  # a new line for the bar, then keep it apart
                self.stream.write(f"\n\x1b7\x1b[1;{rows - 1}r\x1b8\x1b[1A")
            elif self._rows != rows:  # resized: keep the new last row
                self.stream.write(f"\x1b7\x1b[r\x1b[1;{rows - 1}r\x1b8")
            self._rows = rows
            self.stream.write(f"\x1b7\x1b[{rows};1H\x1b[K{line}\x1b8")
        self.stream.flush()
        self.lines += 1
