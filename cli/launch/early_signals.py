"""``run`` takes SIGTERM and SIGINT from its first instant (issue 25).

A Slurm preemption or a Ctrl-C can come while ``rollout-ledger run`` is still
importing, resuming, or between rounds. Left to Python's defaults, SIGTERM
then ends the process with 143 and SIGINT with click's "Aborted!" (exit 1),
and a requeue loop that reads 75 as "go on" stops instead. ``install`` runs
before anything else of the command line is imported: for ``run`` only, it
notes each signal instead (``pending``), and ``run``'s launcher reads the note
when it takes the signals over (``cli.launch.collector``), so the run records what
was written and exits 75. Other commands keep Python's defaults.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType

__all__ = ["SIGNALS", "install", "pending"]

SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: The signals received before ``run``'s launcher took them over, in order.
pending: list[int] = []


def _note(number: int, frame: FrameType | None) -> None:
    del frame
    pending.append(number)


def _subcommand(argv: list[str]) -> str | None:
    return next((arg for arg in argv if not arg.startswith("-")), None)


def install(argv: list[str] | None = None) -> bool:
    """For ``run``, note SIGTERM and SIGINT from now on; whether it did."""
    if _subcommand(sys.argv[1:] if argv is None else argv) != "run":
        return False
    # SIGINT first: Python catches it from its own start (KeyboardInterrupt),
    # so SIGTERM caught says both are ours (tests/test_run_collector_life.py).
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, _note)
    return True
