"""A whole ``rollout-ledger`` command in a fresh process, timed, with its own peak RSS.

The command runs as the console script does (``from cli import main``), in an
interpreter whose only addition is an exit hook that saves the process's own
``VmHWM`` to a file: a subprocess's ``ru_maxrss`` would include its parent's
size at the fork (``bench/child.py``), ``VmHWM`` is the command's alone, as
``incumbent_plan.py`` reads it for 0.7.0. The wall time is the parent's, around
the whole subprocess: interpreter start and imports included.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CommandRun", "run_cli"]

HWM_ENV = "ROLLOUT_LEDGER_BENCH_HWM"

_WRAPPER = f"""\
import atexit, os, sys
def _hwm():
    with open('/proc/self/status') as status:
        kib = next((x.split()[1] for x in status if x.startswith('VmHWM:')), '0')
    with open(os.environ['{HWM_ENV}'], 'w') as out:
        out.write(kib)
atexit.register(_hwm)
sys.argv[0] = 'rollout-ledger'
from cli import main
sys.exit(main())
"""


@dataclass(frozen=True)
class CommandRun:
    """What one command did."""

    wall_s: float
    peak_mib: float
    stdout: str


def run_cli(args: Sequence[str], *, cwd: Path | None = None) -> CommandRun:
    """``rollout-ledger ARGS``; raises with its stderr when it exits non-zero."""
    with tempfile.TemporaryDirectory(prefix="bench-hwm-") as folder:
        hwm = Path(folder) / "hwm"
        # Python's bytecode cache on, as an installed package has it (a
        # machine may set PYTHONDONTWRITEBYTECODE: every command would then
        # compile the modules it imports, about half a second).
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env[HWM_ENV] = str(hwm)
        argv = [sys.executable, "-c", _WRAPPER, *args]
        started = time.perf_counter()
        done = subprocess.run(
            argv, capture_output=True, text=True, env=env, cwd=cwd, check=False
        )
        wall = time.perf_counter() - started
        if done.returncode != 0:
            tail = "\n".join(done.stderr.splitlines()[-20:])
            shown = " ".join(["rollout-ledger", *args])
            raise RuntimeError(f"{shown} exited {done.returncode}:\n{tail}")
        kib = int(hwm.read_text() or 0) if hwm.exists() else 0
    return CommandRun(wall, kib / 1024, done.stdout)
