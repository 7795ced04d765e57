"""The real NeMo Gym 0.7.0 resume: its tools, its venv, its ``RESULT`` line.

The tools (``incumbent_plan.py``, ``gen_run.py``, ``compare_dispatch.py`` and
the two configuration files both sides resume under) live beside the
repository, at ``../shared/tools/incumbent-0.7`` (``TOOLS_ENV`` names another
folder). NeMo Gym 0.7.0 itself runs in its own venv, set up as the tools'
README says: a folder holding ``venv/`` and ``x/`` (the unpacked wheel), named
by ``--incumbent-venv`` or ``VENV_ENV``. Without it the real rows say so and
the imitation (``bench/incumbent.py``) still runs. A path of this machine is
never written into a report: the rows say "real NeMo Gym 0.7.0".
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.rowpool import REPO_ROOT

__all__ = [
    "NO_VENV",
    "TOOLS_ENV",
    "VENV_ENV",
    "Incumbent",
    "RealRun",
    "find_venv",
    "parse_result",
    "tools_dir",
]

VENV_ENV = "ROLLOUT_LEDGER_NG07"
TOOLS_ENV = "ROLLOUT_LEDGER_NG07_TOOLS"
NO_VENV = "not measured (no venv)"
_TOOLS = Path("shared") / "tools" / "incumbent-0.7"  # beside the repository


def tools_dir() -> Path:
    """The incumbent-0.7 tools folder (``TOOLS_ENV``, else beside the repository)."""
    named = os.environ.get(TOOLS_ENV)
    return Path(named) if named else REPO_ROOT.parent / _TOOLS


def find_venv(option: Path | None) -> Path | None:
    """The folder holding ``venv/`` and ``x/``: the option, else ``VENV_ENV``."""
    named = option or (Path(os.environ[VENV_ENV]) if os.environ.get(VENV_ENV) else None)
    if named is None:
        return None
    ready = (named / "venv" / "bin" / "python").is_file() and (named / "x").is_dir()
    return named if ready else None


def parse_result(stdout: str) -> dict[str, Any]:
    """The JSON of the last ``RESULT {...}`` line of ``incumbent_plan.py``'s output."""
    found = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    if not found:
        raise ValueError("no RESULT line in the incumbent's output")
    result = json.loads(found[-1][len("RESULT ") :])
    missing = {"import_s", "plan_s", "hwm_at_dispatch_kib", "dispatch"} - set(result)
    if not isinstance(result, dict) or missing:
        raise ValueError(f"the incumbent's RESULT lacks {sorted(missing)}")
    return result


@dataclass(frozen=True)
class RealRun:
    """One whole command of 0.7.0, in its own process."""

    wall_s: float  # the whole command, interpreter start and imports included
    import_s: float
    plan_s: float  # planning alone: the config read to the first dispatch
    peak_mib: float  # VmHWM at the first dispatch: the peak of all it did
    dispatch: int

    def detail(self) -> str:
        """A line for the rounds list."""
        return (
            f"import {self.import_s:.2f} s, planning {self.plan_s:.2f} s, "
            f"{self.dispatch} to dispatch"
        )


@dataclass(frozen=True)
class Incumbent:
    """How to run the real 0.7.0 resume on this machine."""

    venv: Path  # holds venv/ and x/
    tools: Path

    def command(self, out: Path, *, lean: bool, dump: Path | None = None) -> list[str]:
        """``incumbent_plan.py OUT`` under the tools' configuration files."""
        argv = [str(self.venv / "venv" / "bin" / "python")]
        argv += [str(self.tools / "incumbent_plan.py"), str(out)]
        argv += ["--servers", str(self.tools / "servers.yaml")]
        argv += ["--collection", str(self.tools / "collection.yaml")]
        if lean:
            argv.append("--no-retain")
        if dump is not None:
            argv += ["--dump", str(dump)]
        return argv

    def run(self, out: Path, *, lean: bool, dump: Path | None = None) -> RealRun:
        """Resume ``out`` up to its first dispatch; a failure raises with its stderr."""
        # The bytecode cache on, as for our commands (bench/commands.py): its
        # unpacked wheel's modules are compiled once, not at every run.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["NGW_ROOT"] = str(self.venv / "x")
        started = time.perf_counter()
        done = subprocess.run(
            self.command(out, lean=lean, dump=dump),
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        wall = time.perf_counter() - started
        if done.returncode != 0:
            tail = "\n".join(done.stderr.splitlines()[-20:])
            raise RuntimeError(f"NeMo Gym 0.7.0 exited {done.returncode}:\n{tail}")
        result = parse_result(done.stdout)
        return RealRun(
            wall_s=wall,
            import_s=float(result["import_s"]),
            plan_s=float(result["plan_s"]),
            peak_mib=float(result["hwm_at_dispatch_kib"]) / 1024,
            dispatch=int(result["dispatch"]),
        )
