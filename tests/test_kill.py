"""R-1 / EV-11: SIGKILL a writer at random instants; every returned append survives.

A writer process creates the run (on the first trial) and appends single events
and groups, printing each returned head seq. The harness kills it at a random
instant, then a fresh process checks: the chain verifies, every seq the writer
saw returned is present with the body it appended, and nothing is torn. Set
``ROLLOUT_LEDGER_KILL_TRIALS`` (e.g. 500) for the long mode.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ledger import Ledger
from ledger.events import AttemptReserved

TRIALS = int(os.environ.get("ROLLOUT_LEDGER_KILL_TRIALS", "25"))

WRITER = textwrap.dedent(
    """
    import random, sys
    from ledger import Ledger, RunLock
    from ledger.events import AttemptReserved
    from tests.conftest import MinimalManifest, input_rows

    out, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    lock = RunLock(out).acquire()
    if (lock.paths.db).exists():
        led = Ledger.open(out, lock=lock)
    else:
        rows = input_rows()
        led = Ledger.create(out, MinimalManifest(rows), rows, lock=lock)
    print("open", flush=True)
    while True:
        head = led.head()[0]
        size = rng.choice([1, 1, 2, 50, 300])
        # The body names the seq it will get, so a reader can check each event.
        bodies = [
            AttemptReserved(task=0, rollout=0, attempt=head + 1 + i, run_id="r")
            for i in range(size)
        ]
        led.append_many(bodies, expected_seq=head)
        print(head + size, flush=True)
    """
)


def run_writer_and_kill(out: Path, seed: int, rng: random.Random) -> list[int]:
    """Start a writer, SIGKILL it at a random instant, return the seqs it saw."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(out), str(seed)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=Path(__file__).parents[1],
    )  # fmt: skip
    assert proc.stdout is not None
    if rng.random() < 0.2:
        # Sometimes kill during start-up, which may fall inside run creation.
        time.sleep(rng.uniform(0.05, 0.5))
    else:
        proc.stdout.readline()  # "open": the writer is appending from now on
        time.sleep(rng.uniform(0.0, 0.25))
    proc.send_signal(signal.SIGKILL)
    stdout, stderr = proc.communicate()
    assert proc.returncode == -signal.SIGKILL, stderr.decode()
    return [int(word) for word in stdout.decode().split() if word.isdigit()]


def check_run(out: Path, returned: list[int]) -> int:
    """Verify the chain and every returned append; return the head seq."""
    with Ledger.open(out) as reader:
        assert reader.verify_chain() is None
        events = list(reader.events())
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    for event in events[1:]:
        assert isinstance(event.body, AttemptReserved)
        assert event.body.attempt == event.seq  # no event torn or misplaced
    head = len(events)
    assert all(seq <= head for seq in returned), (returned, head)
    return head


@pytest.mark.slow
def test_r_1_every_returned_append_survives_sigkill_and_the_chain_verifies(
    tmp_path: Path,
) -> None:
    rng = random.Random(20261129)
    out = tmp_path / "r.jsonl"
    heads = []
    for trial in range(TRIALS):
        returned = run_writer_and_kill(out, trial, rng)
        if not (tmp_path / "r_ledger" / "ledger.db").exists():
            # Killed before the database was whole: no run, nothing half-made.
            assert returned == []
            continue
        heads.append(check_run(out, returned))
    assert len(heads) >= TRIALS // 2
    assert heads == sorted(heads)  # nothing that was there was ever lost
    assert heads[-1] > 1
