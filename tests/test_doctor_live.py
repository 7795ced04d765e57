"""Issue 25: ``doctor`` tells the truth under a live ``run``, and names a folder
it cannot write.

Under a writer appending events, ``doctor`` compared the head seq it read with
the one a second process read a moment later, saw them differ, and reported
"the WAL is not shared" on local ext4 (4 of 4 tries), advising to recreate the
run. It now has its second process read a commit of a scratch database of its
own. On a folder it cannot write (sysfs refuses even root), it printed a
traceback; it now says which folder, and why.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main
from tests.test_cli_support import CliRun, Templates, templates

__all__ = ["templates"]

WRITER = r"""
import sys, time
from ledger import Ledger, RunLock
from ledger.events import AttemptsReleased
out, ready = sys.argv[1:3]
with RunLock(out) as lock, Ledger.open(out, lock=lock) as led:
    open(ready, "w").close()
    until = time.monotonic() + 60
    while time.monotonic() < until:
        led.append(AttemptsReleased(dispatch=()))  # releases nothing: a live head
"""


def test_doctor_under_a_live_writer_finds_the_wal_shared(
    tmp_path: Path, templates: Templates
) -> None:
    run = templates("created", tmp_path, CliRun.create)
    ready = tmp_path / "ready"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(run.out), str(ready)],
        cwd=Path(__file__).parents[1],
    )
    try:
        until = time.monotonic() + 60
        while not ready.exists():
            assert time.monotonic() < until, "the writer did not start"
            assert writer.poll() is None
            time.sleep(0.05)
        for _ in range(4):
            result = CliRunner().invoke(main, ["doctor", str(run.out)])
            assert writer.poll() is None, "the writer stopped: nothing was live"
            assert result.exit_code == 0, result.output
            assert "WAL safety: ok" in result.output, result.output
            assert "held by pid" in result.output  # the live writer, named
    finally:
        writer.kill()
        writer.wait()


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs sysfs")
def test_doctor_on_a_folder_it_cannot_write_names_it() -> None:
    folder = Path("/sys/kernel")
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "rollout-ledger"),
            *("doctor", str(folder / "rollouts.jsonl")),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert "Traceback" not in done.stderr
    assert f"{folder} cannot be written" in done.stdout + done.stderr
