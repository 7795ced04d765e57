"""CLI-1: the Slurm script maps ``run``'s exit codes to requeue or stop.

``examples/slurm/rollout-ledger.sbatch`` runs under bash with stub ``scontrol``,
``srun`` and ``rollout-ledger`` on PATH that log their arguments: 0 stops
done, 75 requeues the job (``scontrol requeue $SLURM_JOB_ID``), 76 stops and
alerts, anything else stops; ``doctor`` runs before the first round.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "examples" / "slurm" / "rollout-ledger.sbatch"
JOB = "4242"

STUB_LEDGER = """#!/bin/bash
echo "rollout-ledger $*" >> "$STUB_LOG"
case "$1" in
    doctor) exit "${DOCTOR_RC:-0}" ;;
    create) exit "${CREATE_RC:-0}" ;;
    run) exit "${RUN_RC:-0}" ;;
esac
exit 0
"""
STUB_SRUN = """#!/bin/bash
echo "srun $*" >> "$STUB_LOG"
while [ "${1#-}" != "$1" ]; do shift; done
exec "$@"
"""
STUB_SCONTROL = """#!/bin/bash
echo "scontrol $*" >> "$STUB_LOG"
"""
STUB_ALERT = """#!/bin/bash
echo "alert $*" >> "$STUB_LOG"
"""

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _stubs(folder: Path) -> Path:
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    stubs = {
        "rollout-ledger": STUB_LEDGER,
        "srun": STUB_SRUN,
        "scontrol": STUB_SCONTROL,
        "page-someone": STUB_ALERT,
    }
    for name, text in stubs.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(0o755)
    return bin_dir


def _sbatch(
    folder: Path, **env: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    bin_dir = _stubs(folder)
    log = folder / "calls.log"
    environ = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(folder),
        "STUB_LOG": str(log),
        "SLURM_JOB_ID": JOB,
        "OUT": str(folder / "results" / "rollouts.jsonl"),
        "START_SERVERS": "0",
        "ALERT_COMMAND": "page-someone",
        **env,
    }
    (folder / "results").mkdir()
    done = subprocess.run(
        ["bash", str(SCRIPT)],
        env=environ,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    calls = log.read_text().splitlines() if log.exists() else []
    return done, calls


def _commands(calls: list[str]) -> list[str]:
    return [" ".join(call.split()[:2]) for call in calls]


def test_cli1_the_script_asks_slurm_to_requeue_it() -> None:
    """CLI-1: the script requeues itself: --requeue, and a TERM before the end."""
    text = SCRIPT.read_text()
    assert "#SBATCH --requeue" in text
    assert "#SBATCH --signal=TERM@" in text
    assert os.access(SCRIPT, os.X_OK)


def test_cli1_exit_0_stops_done_after_doctor(tmp_path: Path) -> None:
    """CLI-1: complete (0): doctor first, then run, no requeue, exit 0."""
    done, calls = _sbatch(tmp_path, RUN_RC="0")
    assert done.returncode == 0, done.stderr
    assert _commands(calls) == [
        "rollout-ledger doctor",
        "srun --ntasks=1",
        "rollout-ledger run",
    ]
    run = next(call for call in calls if call.startswith("rollout-ledger run"))
    assert " -- ng_collect_rollouts " in run
    assert "+input_jsonl_fpath={plan}" in run
    assert "+output_jsonl_fpath={output}" in run
    assert "complete" in done.stdout


def test_cli1_exit_75_requeues_the_job(tmp_path: Path) -> None:
    """CLI-1: unfinished, retryable (75): scontrol requeue $SLURM_JOB_ID."""
    done, calls = _sbatch(tmp_path, RUN_RC="75", SLURM_RESTART_COUNT="2")
    assert done.returncode == 0, done.stderr
    assert calls[-1] == f"scontrol requeue {JOB}"
    assert not any(call.startswith("alert") for call in calls)


def test_cli1_exit_75_past_the_requeue_cap_stops_and_alerts(tmp_path: Path) -> None:
    """CLI-1: 75 after MAX_REQUEUES requeues: stop (75) and alert, no requeue."""
    env = {"RUN_RC": "75", "SLURM_RESTART_COUNT": "3", "MAX_REQUEUES": "3"}
    done, calls = _sbatch(tmp_path, **env)
    assert done.returncode == 75
    assert not any(call.startswith("scontrol") for call in calls)
    assert any("after 3 requeues" in call for call in calls if call.startswith("alert"))


def test_cli1_exit_76_stops_and_alerts(tmp_path: Path) -> None:
    """CLI-1: unfinished, nothing retryable (76): stop with 76 and alert a person."""
    done, calls = _sbatch(tmp_path, RUN_RC="76")
    assert done.returncode == 76
    assert not any(call.startswith("scontrol") for call in calls)
    assert any(call.startswith("alert ") for call in calls)
    assert "nothing retryable" in done.stderr


@pytest.mark.parametrize("code", ["1", "3", "4", "5"])
def test_cli1_other_exits_stop_without_requeue(tmp_path: Path, code: str) -> None:
    """CLI-1: any other exit of run stops the job with that code, never requeued."""
    done, calls = _sbatch(tmp_path, RUN_RC=code)
    assert done.returncode == int(code)
    assert not any(call.startswith("scontrol") for call in calls)
    assert any(call.startswith("alert ") for call in calls)


def test_cli1_a_failing_doctor_starts_no_round(tmp_path: Path) -> None:
    """CLI-1: doctor's problem (exit 5) stops the job before any round."""
    done, calls = _sbatch(tmp_path, DOCTOR_RC="5")
    assert done.returncode == 5
    assert _commands(calls) == ["rollout-ledger doctor", "alert doctor"]


def test_cli2_the_first_job_creates_the_run_from_the_dataset(tmp_path: Path) -> None:
    """CLI-2: with DATASET and no run yet, create --dataset --num-repeats, then run."""
    done, calls = _sbatch(tmp_path, DATASET="data.jsonl", NUM_REPEATS="4")
    assert done.returncode == 0, done.stderr
    assert _commands(calls)[:2] == ["rollout-ledger doctor", "rollout-ledger create"]
    assert "--dataset data.jsonl --num-repeats 4" in calls[1]
    ledger_db = tmp_path / "results" / "rollouts_ledger" / "ledger.db"
    ledger_db.parent.mkdir()
    ledger_db.write_bytes(b"")
    again = tmp_path / "again"
    again.mkdir()
    env = {"DATASET": "data.jsonl", "OUT": str(tmp_path / "results/rollouts.jsonl")}
    done, calls = _sbatch(again, **env)
    assert done.returncode == 0, done.stderr
    assert not any(call.startswith("rollout-ledger create") for call in calls)
