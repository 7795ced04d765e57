"""Many worker processes on one PostgreSQL run (SC-3, SC-4, SC-5): the acceptance test.

Eight worker processes reserve and record thousands of attempts of one run,
sharing the work through the database alone (each takes its slot's attempts,
then races for the others'), while the coordinator replans as outcomes arrive.
Then the same with workers SIGKILLed at seeded points of the log and new ones
finishing the work. Afterwards: no attempt reserved twice, none reserved
without a release in force, every reservation and record a worker saw return
is in the log, ``seq`` gap-free, the chain and ``verify`` hold, and the run
exported to SQLite verifies with the same head hash.
"""

from __future__ import annotations

import multiprocessing
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ledger import Ledger
from projections import decide_all, replan, replay, resume, verify
from tests.internals import export_files
from tests.pg_support import (
    PgRun,
    WorkerJob,
    collect,
    log_facts,
    read_reports,
    table_count,
)

SLOTS = 8
TASKS, ROLLOUTS = 600, 4  # 2,400 rollouts, ~3,200 attempts, ~6,500 events
SEED = 20260417
DEADLINE_S = 240  # a stuck run fails with what it got, never hangs the suite
FINISH_S = 300  # for every worker to see the stop file and leave
FINAL = frozenset({"complete", "exhausted", "terminal", "held", "omitted"})

Admin = psycopg.Connection[Any]


@dataclass
class Fleet:
    """The worker processes, one per slot, and every report file they wrote."""

    run: PgRun
    folder: Path
    processes: dict[int, Any] = field(default_factory=dict)
    reports: list[Path] = field(default_factory=list)
    killed: int = 0

    @property
    def stop(self) -> Path:
        return self.folder / "stop"

    def start(self, slot: int) -> None:
        report = self.folder / f"worker-{slot}-{len(self.reports)}.log"
        self.reports.append(report)
        job = WorkerJob(self.run.url, slot, SLOTS, str(report), str(self.stop), SEED)
        process = multiprocessing.get_context("spawn").Process(
            target=collect, args=(job,), name=f"worker-{slot}"
        )
        process.start()
        self.processes[slot] = process

    def kill_and_replace(self, slot: int) -> None:
        """SIGKILL the slot's worker wherever it is, then start a new one there."""
        process = self.processes[slot]
        process.kill()
        process.join(timeout=30)
        self.killed += 1
        self.start(slot)

    def finish(self) -> None:
        """Tell the workers to leave once no work is left, and wait for them."""
        self.stop.touch()
        # Generous: a worker started by the last kill may still be importing
        # and folding the log on a loaded machine; liveness, not speed.
        deadline = time.monotonic() + FINISH_S
        for process in self.processes.values():
            process.join(timeout=max(1.0, deadline - time.monotonic()))
        alive = [p.name for p in self.processes.values() if p.is_alive()]
        exits = {p.name: p.exitcode for p in self.processes.values()}
        self.close()
        assert not alive, f"workers still running: {alive}"
        assert set(exits.values()) == {0}, f"a worker failed: {exits}"

    def close(self) -> None:
        for process in self.processes.values():
            if process.is_alive():
                process.kill()
                process.join()


def _open_work(plan: Any) -> int:
    counts: dict[str, int] = plan.counts
    return counts.get("pending", 0) + counts.get("retry", 0) + counts["in_flight"]


def coordinate(
    run: PgRun, fleet: Fleet, *, kill_at: list[int], rng: random.Random
) -> int:
    """Replan while the workers collect; kill at ``kill_at`` heads. Resumes made.

    Once nothing is free, nothing left to release and no worker appended for
    a second, what is in flight is a killed worker's (REC-4): a new resume
    releases it again. Without kills that never happens.
    """
    led = run.coordinator()
    deadline = time.monotonic() + DEADLINE_S
    resumes = 0
    next_replan, quiet_since, seen = 0.0, time.monotonic(), led.head()[0]
    while True:
        assert time.monotonic() < deadline, f"unfinished at seq {led.head()[0]}"
        head = led.head()[0]
        if kill_at and head >= kill_at[0]:
            kill_at.pop(0)
            fleet.kill_and_replace(rng.randrange(SLOTS))
        if head != seen:
            seen, quiet_since = head, time.monotonic()
        if time.monotonic() >= next_replan:
            plan = replan(led)
            if _open_work(plan) == 0:
                return resumes
            quiet = time.monotonic() - quiet_since > 1.0
            if fleet.killed and not kill_at and not plan.dispatch and quiet:
                resume(led, run.config, run.global_config)
                resumes += 1
            seen = led.head()[0]
            next_replan = time.monotonic() + 0.25
        time.sleep(0.02)


def check_the_log(run: PgRun, fleet: Fleet, admin: Admin, folder: Path) -> Any:
    """SC-3, SC-5 and REC-3 on the whole log; returns its facts for more checks."""
    led = run.coordinator()
    facts = log_facts(led)
    name = run.url.rsplit("run=", 1)[1]
    assert facts.seqs == list(range(1, len(facts.seqs) + 1))  # gap-free
    twice = [k for k, n in Counter(facts.reserved).items() if n > 1]
    assert twice == []  # SC-3: no attempt reserved twice
    assert facts.unreleased == []  # SC-3: none without a release in force
    assert len(set(facts.outcomes)) == len(facts.outcomes)
    assert set(facts.outcomes) <= set(facts.reserved)
    reported, recorded, _ = read_reports(fleet.reports)
    assert reported - set(facts.reserved) == set()  # no returned append lost
    assert recorded - set(facts.outcomes) == set()
    assert table_count(admin, "reservations", name) == len(facts.reserved)
    assert table_count(admin, "rows", name) == len(facts.outcomes)  # SC-2
    assert led.verify_chain() is None
    assert verify(led) == []
    decisions = Counter(d.value for d in decide_all(replay(led)).values())
    assert set(decisions) <= FINAL, decisions  # the work is finished
    assert sum(decisions.values()) == TASKS * ROLLOUTS
    paths = export_files(led, folder / "export")  # SC-5
    with Ledger.open(paths.out) as copy:
        assert copy.head() == led.head()
        assert verify(copy) == []
    return facts, reported, recorded


@pytest.fixture
def big_run(pg_url: str) -> Any:
    run = PgRun.create(pg_url, tasks=TASKS, rollouts=ROLLOUTS)
    try:
        yield run
    finally:
        run.close()


@pytest.mark.slow
def test_sc_3_eight_worker_processes_share_one_run_while_the_coordinator_replans(
    big_run: PgRun, pg_admin: Admin, tmp_path: Path
) -> None:
    resume(big_run.coordinator(), big_run.config, big_run.global_config)
    fleet = Fleet(big_run, tmp_path)
    try:
        for slot in range(SLOTS):
            fleet.start(slot)
        resumes = coordinate(big_run, fleet, kill_at=[], rng=random.Random(SEED))
        fleet.finish()
    finally:
        fleet.close()
    assert resumes == 0
    facts, reported, recorded = check_the_log(big_run, fleet, pg_admin, tmp_path)
    # No worker died: every reservation has its outcome, and every one was
    # reported by the worker that made it.
    assert set(facts.reserved) == set(facts.outcomes) == reported == recorded
    assert len(facts.reserved) > TASKS * ROLLOUTS  # replan released the retries


@pytest.mark.slow
def test_sc_5_workers_sigkilled_at_random_instants_and_new_ones_finish(
    big_run: PgRun, pg_admin: Admin, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    resume(big_run.coordinator(), big_run.config, big_run.global_config)
    first = big_run.coordinator().head()[0]
    kill_at = sorted(rng.sample(range(first + 200, first + 4000), 5))
    fleet = Fleet(big_run, tmp_path)
    try:
        for slot in range(SLOTS):
            fleet.start(slot)
        coordinate(big_run, fleet, kill_at=kill_at, rng=rng)
        fleet.finish()
    finally:
        fleet.close()
    assert fleet.killed == 5
    facts, _, recorded = check_the_log(big_run, fleet, pg_admin, tmp_path)
    # A killed worker's reservation may stay without an outcome (REC-4); no
    # more of them than the killed workers could hold, and none was reported
    # recorded.
    orphans = set(facts.reserved) - set(facts.outcomes)
    assert len(orphans) <= fleet.killed * WorkerJob.batch
    assert orphans.isdisjoint(recorded)
