"""A spinner on a terminal's stderr for a step of unknown length (cli.md).

``working("verifying")`` shows ``verifying |  1.2s`` on stderr, redrawn a few
times a second by a daemon thread, and erases it when the step ends. Off a
terminal (stderr redirected, a pipe, CI) or with ``quiet`` it does nothing at
all, so scripts and logs never see it. A step whose items are counted uses
``cli.common.progress`` (a bar) instead.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["working"]

_FRAMES = "|/-\\"
#: Seconds between two redraws.
_EVERY = 0.1


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
