"""R-1 / EV-12 through the recorder: SIGKILL a collector at random instants.

Writer processes reserve, record result rows and admit judgments through an
``AsyncRecorder`` (group commits), and are killed with SIGKILL at random
instants; some kill themselves between a row's write and its event. After each
kill a fresh writer open repairs, and then: ``verify`` finds nothing, every
reservation and record that returned is in the log, every row in the files is
recorded exactly once, and a new plan dispatches exactly the rollouts that have
no result yet. ``ROLLOUT_LEDGER_KILL_TRIALS`` (e.g. 500) runs the long mode.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ledger import Ledger, RunLock
from ledger.events import AttemptReserved, ResultSaved
from projections import decide_all, publish, replay, resume, verify
from tests.test_identity import nemo_configuration

TRIALS = int(os.environ.get("ROLLOUT_LEDGER_KILL_TRIALS", "25"))


def collection_rows() -> list[dict[str, Any]]:
    """3,000 materialized rows naming the agent of ``nemo_configuration()``."""
    return [
        {
            "_ng_task_index": task,
            "_ng_rollout_index": rollout,
            "agent_ref": {"type": "responses_api_agents", "name": "math_agent"},
        }
        for task in range(20)
        for rollout in range(10)
    ]


COLLECTOR = textwrap.dedent(
    """
    import asyncio, os, random, signal, sys
    from ledger import Ledger, RecoveryPolicy, RunLock, RunManifest
    from tests.internals import FileSink
    from projections import replan, resume
    from tests.test_kill_recorder import collection_rows
    from tests.test_identity import nemo_configuration

    out, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    if rng.random() < 0.3:
        # Die between a row's write and its event, some of the time (EV-12).
        write_rows = FileSink._write_durably
        def dying(self, ops, ends):
            write_rows(self, ops, ends)
            if rng.random() < 0.2:
                os.kill(os.getpid(), signal.SIGKILL)
        FileSink._write_durably = dying

    async def one(rec, row):
        await rec.reserve(row)
        print("R", row["_ng_task_index"], row["_ng_rollout_index"],
              row["_ng_attempt_index"], flush=True)
        await asyncio.sleep(rng.random() / 1000)
        if rng.random() < 0.1:
            return  # the request died with the collector's process: no row
        await rec.record({**row, "reward": 1.0, "padding": "x" * rng.randint(10, 900)})
        print("O", row["_ng_task_index"], row["_ng_rollout_index"],
              row["_ng_attempt_index"], flush=True)

    config, global_config, _ = nemo_configuration()

    async def main(led):
        rec = led.recorder(max_batch=32, max_wait_ms=1)
        plan = resume(led, config, global_config).plan  # a fresh process resumes
        while True:
            await asyncio.gather(*(one(rec, row) for row in plan.dispatch))
            plan = replan(led)  # in-process retries release without a gate
            if not plan.dispatch:
                print("DONE", flush=True)
                return

    lock = RunLock(out).acquire()
    if lock.paths.db.exists():
        led = Ledger.open(out, lock=lock)
    else:
        rows = collection_rows()
        manifest = RunManifest.create(None, rows, config, global_config,
                                      max_rollout_attempts=50)
        # Kills land at random, so a rollout may be caught in flight again and
        # again; lift REC-4's guard so every kill-shaped retry stays planned.
        policy = RecoveryPolicy(max_free_attempts=1000)
        led = Ledger.create(out, manifest, rows, lock=lock, policy=policy)
    print("open", flush=True)
    asyncio.run(main(led))
    """
)


def kill_at_random(out: Path, seed: int, rng: random.Random) -> list[tuple[str, ...]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", COLLECTOR, str(out), str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=Path(__file__).parents[1],
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # "open"
    # The kill lands after a random number of reported steps (and a random
    # instant after that), so it falls mid-run however fast this machine
    # and the recorder are: kills by the clock alone let a fast collector
    # finish its whole plan first.
    seen = [proc.stdout.readline() for _ in range(rng.randint(0, 12))]
    time.sleep(rng.uniform(0.0, 0.005))
    proc.send_signal(signal.SIGKILL)
    stdout, stderr = proc.communicate()
    assert proc.returncode in (-signal.SIGKILL, 0), stderr.decode()
    # Only whole lines count: the kill may cut the last one short.
    complete = (b"".join(seen) + stdout).decode().rpartition("\n")[0]
    return [tuple(line.split()) for line in complete.splitlines() if line.strip()]


def check_after_kill(out: Path, returned: list[tuple[str, ...]]) -> bool:
    with RunLock(out) as lock, Ledger.open(out, lock=lock) as led:  # repairs (EV-12)
        publish(led, replay(led))  # as `status --publish` does; replan never publishes
        assert verify(led) == []
        events = list(led.events())
        reserved = Counter(
            (e.body.task, e.body.rollout, e.body.attempt)
            for e in events
            if isinstance(e.body, AttemptReserved)
        )
        recorded = Counter(
            (e.body.task, e.body.rollout, e.body.attempt)
            for e in events
            if isinstance(e.body, ResultSaved)
        )
        for line in returned:
            if line[0] in ("R", "O"):
                key = (int(line[1]), int(line[2]), int(line[3]))
                assert (reserved if line[0] == "R" else recorded)[key] >= 1, line
        assert set(reserved.values()) <= {1}  # never reserved twice
        # Every row in OUT is recorded exactly once (verify saw no pending repair).
        data = led.paths.out.read_bytes() if led.paths.out.exists() else b""
        assert len(data.splitlines()) == sum(recorded.values())
        state = replay(led)
        unfinished = {
            key
            for key, decision in decide_all(state).items()
            if decision.value != "complete"
        }
        with_result = {(t, r) for t, r, _ in recorded}
        assert unfinished == set(state.ordered_keys()) - with_result
        config, global_config, _ = nemo_configuration()
        plan = resume(led, config, global_config, dry_run=True).plan
        planned = {(r["_ng_task_index"], r["_ng_rollout_index"]) for r in plan.dispatch}
        assert planned == unfinished
        return not unfinished


@pytest.mark.slow
def test_r_1_collectors_killed_at_random_lose_nothing_and_count_nothing_twice(
    tmp_path: Path,
) -> None:
    rng = random.Random(1129)
    runs = 0
    out = tmp_path / "run0" / "rollouts.jsonl"
    out.parent.mkdir()
    checked = mid_run = 0
    for trial in range(TRIALS):
        returned = kill_at_random(out, trial, rng)
        if not (out.parent / "rollouts_ledger" / "ledger.db").exists():
            continue
        checked += 1
        mid_run += ("DONE",) not in returned
        check_after_kill(out, returned)
        if ("DONE",) in returned:  # that run is complete: kill the next one
            runs += 1
            out = tmp_path / f"run{runs}" / "rollouts.jsonl"
            out.parent.mkdir()
    assert checked >= TRIALS // 2
    assert mid_run >= TRIALS // 2  # most kills landed with work in flight
