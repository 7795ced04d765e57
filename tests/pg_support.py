"""Shared helpers for the Ledger-level PostgreSQL tests (SC-1..SC-5).

The server fixtures (``pg_url``: a database of the test's own; ``pg_admin``)
are in ``tests/conftest.py``. Here: a real run on PostgreSQL in that database,
built from ``nemo_configuration()`` with as many rollouts as a test asks for,
what a log says about releases and reservations, and the collector a worker
*process* runs (``collect``), which reports each call that returned to a file
of its own, one line each, so what it reported survives its SIGKILL.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ledger import ConfigError, Ledger, RunLock, RunManifest
from ledger.events import AttemptReserved, AttemptsReleased, ResumeStarted
from projections import decide_all, replay
from tests.internals import SCHEMA, STORE_ENV, read_materialized, resolve_run
from tests.test_identity import nemo_configuration

__all__ = [
    "LogView",
    "PgRun",
    "WorkerJob",
    "collect",
    "log_facts",
    "new_url",
    "outcome_of",
    "pg_run",
    "read_reports",
    "table_count",
]

Attempt = tuple[int, int, int]
Config = dict[str, Any]
VIEW_KINDS = ("resume_started", "attempts_released", "attempt_reserved")


def new_url(database: str, prefix: str = "lg") -> str:
    """A fresh run URL in ``database`` (never with a password, SC-1)."""
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    return str(resolve_run(name, environ={STORE_ENV: database}))


def configuration(tasks: int, rollouts: int) -> tuple[Config, Config, list[Config]]:
    """``nemo_configuration()`` with ``tasks`` x ``rollouts`` input rows."""
    config, global_config, rows = nemo_configuration()
    template = rows[0]
    made = [
        {
            **template,
            "_ng_task_index": task,
            "_ng_rollout_index": rollout,
            "responses_create_params": {
                "input": [{"role": "user", "content": f"Problem {task}"}]
            },
        }
        for task in range(tasks)
        for rollout in range(rollouts)
    ]
    return config, global_config, made


@dataclass
class PgRun:
    """A run on PostgreSQL with its coordinator's lock held (SC-4)."""

    url: str
    lock: RunLock
    config: Config
    global_config: Config
    rows: list[Config]
    opened: list[Ledger] = field(default_factory=list)

    @classmethod
    def create(cls, database: str, *, tasks: int = 3, rollouts: int = 2) -> PgRun:
        """Create the run in ``database``: ``run_created``, inputs, manifest."""
        config, global_config, rows = configuration(tasks, rollouts)
        url = new_url(database)
        lock = RunLock(url).acquire()
        try:
            manifest = RunManifest.create(None, rows, config, global_config)
            Ledger.create(url, manifest, rows, lock=lock).close()
        except BaseException:
            lock.release()  # the database, and what got in, goes with the test
            raise
        return cls(url, lock, config, global_config, rows)

    def coordinator(self) -> Ledger:
        """The run opened with the lock: it may append anything."""
        return self._keep(Ledger.open(self.url, lock=self.lock))

    def worker(self) -> Ledger:
        """The run opened without the lock: a worker (SC-4)."""
        return self._keep(Ledger.open(self.url))

    def _keep(self, led: Ledger) -> Ledger:
        self.opened.append(led)
        return led

    def close(self) -> None:
        """Close every ledger opened here and release the lock."""
        for led in self.opened:
            led.close()
        self.lock.release()


@pytest.fixture
def pg_run(pg_url: str) -> Iterator[PgRun]:
    """A small run (3 tasks x 2 rollouts) in the test's own database."""
    run = PgRun.create(pg_url)
    try:
        yield run
    finally:
        run.close()


# -- what a log says -------------------------------------------------------------


@dataclass
class LogView:
    """Releases and reservations of a log, followed incrementally (REC-3)."""

    seq: int = 0
    released: set[Attempt] = field(default_factory=set)
    reserved: set[Attempt] = field(default_factory=set)

    def catch_up(self, led: Ledger) -> None:
        """Fold what was appended since the last call."""
        for event in led.events(self.seq + 1, kinds=VIEW_KINDS):
            body = event.body
            if isinstance(body, ResumeStarted):
                self.released.clear()  # a release holds until the next resume
            elif isinstance(body, AttemptsReleased):
                self.released.update((k[0], k[1], k[2]) for k in body.dispatch)
            elif isinstance(body, AttemptReserved):
                self.reserved.add((body.task, body.rollout, body.attempt))
            self.seq = event.seq

    def free(self) -> list[Attempt]:
        """Released attempts nobody reserved yet, in order."""
        return sorted(self.released - self.reserved)


@dataclass
class LogFacts:
    """What a whole log holds: seqs, reservations (with repeats), outcomes."""

    seqs: list[int]
    reserved: list[Attempt]
    outcomes: list[Attempt]
    # Reservations of an attempt no release in force named (REC-3, SC-3).
    unreleased: list[Attempt]


def log_facts(led: Ledger) -> LogFacts:
    """Read every event once: what the SC-3 and SC-5 assertions need."""
    seqs: list[int] = []
    reserved: list[Attempt] = []
    outcomes: list[Attempt] = []
    unreleased: list[Attempt] = []
    released: set[Attempt] = set()
    for event in led.events():
        seqs.append(event.seq)
        body = event.body
        if isinstance(body, ResumeStarted):
            released.clear()
        elif isinstance(body, AttemptsReleased):
            released.update((k[0], k[1], k[2]) for k in body.dispatch)
        elif isinstance(body, AttemptReserved):
            key = (body.task, body.rollout, body.attempt)
            reserved.append(key)
            if key not in released:
                unreleased.append(key)
        elif event.kind in ("result_saved", "failure_saved", "omission_saved"):
            b: Any = body
            outcomes.append((b.task, b.rollout, b.attempt))
    return LogFacts(seqs, reserved, outcomes, unreleased)


# -- a collector in a worker process ------------------------------------------


@dataclass(frozen=True)
class WorkerJob:
    """What one worker process does: its slot, where it reports, when it stops."""

    url: str
    slot: int
    slots: int
    report: str  # a file: "R t r a" after a reservation, "O t r a" after a record
    stop: str  # a file: once it exists, the worker leaves when no work is left
    seed: int
    batch: int = 8
    fail_share: float = 0.25


def outcome_of(row: Mapping[str, Any], *, seed: int, fail_share: float) -> Config:
    """The row a collector hands over for a reserved attempt (seeded per attempt)."""
    key = (row["_ng_task_index"], row["_ng_rollout_index"], row["_ng_attempt_index"])
    draw = random.Random(f"{seed}:{key}").random()
    out = dict(row)
    if draw < fail_share:  # a counted failure: replan releases the next attempt
        out.update(_ng_failure_class="agent_run_error", reward=0.0)
        return out
    answer = f"answer {key} {draw:.6f}"
    out.update(
        reward=float(draw > 0.6),
        response={"output": [{"type": "message", "content": answer}]},
    )
    return out


def _inputs(led: Ledger) -> dict[tuple[int, int], Config]:
    state = replay(led)
    keys = [(task, rollout, 0) for task, rollout in decide_all(state)]
    rows = read_materialized(led, state, keys)
    return {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in rows}


def _row(inputs: Mapping[tuple[int, int], Config], key: Attempt) -> Config:
    return {**inputs[key[0], key[1]], "_ng_attempt_index": key[2]}


def _report(handle: Any, tag: str, keys: Sequence[Attempt]) -> None:
    handle.write("".join(f"{tag} {t} {r} {a}\n" for t, r, a in keys))
    handle.flush()  # in the kernel's page cache: it survives the process's SIGKILL


def collect(job: WorkerJob) -> None:
    """A worker process: reserve and record released attempts until told to stop.

    Work is shared through the database alone: a worker takes the free
    attempts of its slot (task + rollout modulo the slots) a batch at a
    time, then tries others' one at a time in a seeded order, treating a
    ``ConfigError`` as "someone else took it" (SC-3).
    """
    rng = random.Random(job.seed * 7919 + job.slot)
    with Ledger.open(job.url) as led, open(job.report, "a") as report:
        inputs = _inputs(led)
        view = LogView()
        while True:
            view.catch_up(led)
            free = view.free()
            mine = [k for k in free if (k[0] + k[1]) % job.slots == job.slot]
            if mine:
                _work(led, job, inputs, mine[: job.batch], report)
            elif free:
                rng.shuffle(free)
                _work(led, job, inputs, free[:1], report)
            elif Path(job.stop).exists():
                return
            else:
                time.sleep(0.05)


def _work(
    led: Ledger,
    job: WorkerJob,
    inputs: Mapping[tuple[int, int], Config],
    keys: Sequence[Attempt],
    report: Any,
) -> None:
    rows = [_row(inputs, key) for key in keys]
    try:
        led.reserve_many(rows)
    except ConfigError:
        report.write(f"X {len(rows)}\n")  # taken meanwhile: the next look skips it
        return
    _report(report, "R", keys)
    led.record_many(
        [outcome_of(r, seed=job.seed, fail_share=job.fail_share) for r in rows]
    )
    _report(report, "O", keys)


def read_reports(paths: Sequence[Path]) -> tuple[set[Attempt], set[Attempt], int]:
    """Reservations and records the workers reported, and refusals counted.

    A line without its newline was cut by a SIGKILL and counts as unreported.
    """
    reserved: set[Attempt] = set()
    recorded: set[Attempt] = set()
    refused = 0
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text().splitlines(keepends=True):
            if not line.endswith("\n"):
                continue
            tag, *rest = line.split()
            if tag == "X":
                refused += 1
                continue
            t, r, a = (int(x) for x in rest)
            (reserved if tag == "R" else recorded).add((t, r, a))
    return reserved, recorded, refused


def table_count(admin: psycopg.Connection[Any], table: str, run: str) -> int:
    """Rows of ``run`` in one of the store's tables."""
    found = admin.execute(
        f"SELECT count(*) FROM {SCHEMA}.{table} WHERE run = %s", (run,)
    ).fetchone()
    assert found is not None
    return int(found[0])
