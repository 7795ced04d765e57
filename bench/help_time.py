"""P-6: ``rollout-ledger --help`` wall time against ``python -c "import click"``.

Both run as subprocesses of the same interpreter; the value is the mean wall
time of ``help_reps`` invocations (interpreter start included on both sides).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from bench.context import Context, Measured

__all__ = ["help_command", "p6_baseline", "p6_ours"]


def help_command() -> list[str]:
    """The installed console script with ``--help`` (or its entry point)."""
    script = Path(sys.executable).with_name("rollout-ledger")
    if script.is_file():
        return [str(script), "--help"]
    code = "import sys; from cli import main; sys.exit(main())"
    return [sys.executable, "-c", code, "--help"]


def _mean_wall(argv: list[str], reps: int) -> float:
    total = 0.0
    for _ in range(reps):
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
        total += time.perf_counter() - started
    return total / reps


def p6_ours(ctx: Context) -> Measured:
    """P-6: seconds per ``rollout-ledger --help``."""
    reps = ctx.sizes.help_reps
    return Measured(_mean_wall(help_command(), reps), f"mean of {reps} runs")


def p6_baseline(ctx: Context) -> Measured:
    """P-6 baseline: seconds per ``python -c "import click"``."""
    reps = ctx.sizes.help_reps
    argv = [sys.executable, "-c", "import click"]
    return Measured(_mean_wall(argv, reps), f"mean of {reps} runs")
