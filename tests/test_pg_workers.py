"""Issue 29: ``run URL``, one coordinator and many workers, on the real PostgreSQL.

Each test works in a database of its own (``pg_url``). The coordinator and
the workers are real ``rollout-ledger run`` processes around the simulated
NeMo Gym collector (``cli/examples/simulated_collector.py``); a worker is
killed with SIGKILL mid-batch, or its database session is ended under it
(``pg_terminate_backend``). After each: every attempt reserved once (SC-3),
every attempt's outcome recorded once, nothing reserved that was not
released, ``verify`` passes, and the run ends as ``check`` says.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ledger import Ledger, WorkBoard
from tests.internals import SCHEMA
from tests.pg_support import log_facts
from tests.test_cli_support import CliRun, graded
from tests.view_support import serving

ROOT = Path(__file__).resolve().parents[1]
COLLECTOR = ROOT / "cli" / "examples" / "simulated_collector.py"

pytestmark = pytest.mark.slow


class WorkersRun(CliRun):
    """A run on PostgreSQL, made by ``create``, driven by ``run`` processes."""

    def __init__(self, folder: Path, database: str, tasks: int, rollouts: int) -> None:
        super().__init__(folder, tasks=tasks, rollouts=rollouts)
        self.url = f"{database}?run=w-{uuid.uuid4().hex[:10]}"
        self.out = self.url  # type: ignore[assignment]
        self.logs = folder / "logs"
        self.logs.mkdir()
        self.processes: list[subprocess.Popen[str]] = []

    def start(
        self, name: str, *extra: str, delay: float = 0.0
    ) -> subprocess.Popen[str]:
        """``rollout-ledger run URL ...``: a coordinator, or with --worker a worker."""
        command = [sys.executable, "-m", "cli", "run", self.url, "--json"]
        command += [str(a) for a in self.config_args()]
        command += list(extra)
        if "--worker" in extra:
            command += [
                "--",
                sys.executable,
                str(COLLECTOR),
                "--plan",
                "{plan}",
                "--output",
                "{output}",
                "--failures",
                "{failures}",
                "--seed",
                "3",
                "--row-delay",
                str(delay),
            ]
        with open(self.logs / f"{name}.err", "a") as errors:
            process = subprocess.Popen(
                command, cwd=ROOT, stdout=subprocess.PIPE, stderr=errors, text=True
            )
        self.processes.append(process)
        return process

    def stop_all(self) -> None:
        """Kill whatever a failed test left running."""
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            if process.stdout is not None and not process.stdout.closed:
                process.stdout.close()  # a test may have read it to its end
            process.wait()

    def worker(
        self, name: str, *extra: str, delay: float = 0.0
    ) -> subprocess.Popen[str]:
        workdir = self.folder / "work" / name
        return self.start(
            name,
            "--worker",
            "--batch",
            "4",
            "--wait",
            "5",
            "--workdir",
            str(workdir),
            *extra,
            delay=delay,
        )

    def coordinator(self) -> subprocess.Popen[str]:
        return self.start("coordinator", "--wait", "30")


def _last(process: subprocess.Popen[str]) -> tuple[int, dict[str, Any]]:
    out, _ = process.communicate(timeout=120)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    return process.returncode, json.loads(lines[-1])


def _until(what: Callable[[], bool], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, "the awaited state never came"
        time.sleep(0.1)


def _workers(run: WorkersRun) -> list[Any]:
    with Ledger.open(run.url) as led:
        return WorkBoard.of(led).workers()


def _assert_whole(run: WorkersRun, code: int) -> None:
    """SC-3 and SC-5 after the run: once each, nothing unreleased, verify, check."""
    with Ledger.open(run.url) as led:
        facts = log_facts(led)
    reserved = Counter(facts.reserved)
    outcomes = Counter(facts.outcomes)
    assert [k for k, n in reserved.items() if n > 1] == []  # no attempt twice
    assert [k for k, n in outcomes.items() if n > 1] == []  # no answer twice
    assert facts.unreleased == []
    assert set(outcomes) == set(reserved)  # each reservation came with its row
    assert run.invoke("verify", run.url).exit_code == 0
    assert run.invoke("check", run.url).exit_code == code


@pytest.fixture
def workers_run(tmp_path: Path, pg_url: str) -> Iterator[WorkersRun]:
    run = WorkersRun(tmp_path, pg_url, tasks=8, rollouts=4)
    run.create()
    try:
        yield run
    finally:
        run.stop_all()


def test_issue_29_sc_4_a_coordinator_and_four_workers_complete_a_run(
    workers_run: WorkersRun,
) -> None:
    coordinator = workers_run.coordinator()
    workers = [workers_run.worker(f"w{i}") for i in range(4)]
    code, last = _last(coordinator)
    assert code in (0, 76)
    assert last["role"] == "coordinator"
    assert last["exit_code"] == code
    assert last["released"] >= 32  # every rollout's first attempt at least
    ended = [_last(worker) for worker in workers]
    assert {c for c, _ in ended} <= {0, 75, 76}
    assert sum(doc["total_rows"] for _, doc in ended) >= 32  # they shared the work
    _assert_whole(workers_run, code)
    status = json.loads(workers_run.ok("status", workers_run.url, "--json").stdout)
    assert len(status["workers"]) == 4
    assert {w["state"] for w in status["workers"]} <= {"done", "stopped"}
    assert sum(w["rows_recorded"] for w in status["workers"]) == sum(
        doc["total_rows"] for _, doc in ended
    )
    names = {w["worker"] for w in status["workers"]}
    # Seen: the report and the viewer show each worker as status does.
    page = workers_run.folder / "report.html"
    workers_run.ok("report", workers_run.url, "-o", page)
    section = page.read_text().split('<section id="workers">')[1].split("</section>")[0]
    assert "Workers (4)" in section
    for w in status["workers"]:
        assert (
            f"<td>{w['worker']}</td><td>{w['host']}</td><td>{w['pid']}</td>" in section
        )
        assert w["words"].split(" at ")[0] in section
    with serving([workers_run.url]) as served:
        (card,) = served.get("/api/runs").json()["runs"]
        run_id = card["header"]["run_id"]
        shown = served.get(f"/api/runs/{run_id}").json()["workers"]
        assert {w["worker"] for w in shown} == names
        assert [w["rows_recorded"] for w in shown] == [
            w["rows_recorded"] for w in status["workers"]
        ]
        html = served.get(f"/runs/{run_id}").text
        assert "Workers (4)" in html
        assert all(f"<td>{name}</td>" in html for name in names)


def test_issue_29_a_worker_killed_mid_batch_then_started_again_loses_nothing(
    workers_run: WorkersRun,
) -> None:
    """SIGKILL of a worker mid-batch: its work is offered again, its rows adopted."""
    coordinator = workers_run.coordinator()
    victim = workers_run.worker("victim", delay=0.4)
    other = workers_run.worker("other", delay=0.1)
    output = workers_run.folder / "work" / "victim" / "rounds" / "1" / "output.jsonl"
    failures = output.with_name("output_failures.jsonl")

    def wrote() -> bool:
        return any(p.exists() and p.stat().st_size for p in (output, failures))

    _until(wrote)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    # The coordinator sees its lock gone and offers its claimed work again.
    _until(lambda: any(w.state == "gone" for w in _workers(workers_run)))
    again = workers_run.worker("victim")  # the same work folder: adopts its rows
    code, last = _last(coordinator)
    assert [r["offered_again"] >= 0 for r in last["reaped"]] == [True]
    for worker in (other, again):
        _last(worker)
    _assert_whole(workers_run, code)
    assert code in (0, 76)


def test_issue_29_a_worker_whose_session_ended_stops_and_its_work_goes_on(
    workers_run: WorkersRun, pg_admin: psycopg.Connection[Any]
) -> None:
    """pg_terminate_backend of a live worker's session: it records nothing more."""
    coordinator = workers_run.coordinator()
    worker = workers_run.worker("cut", delay=0.3)
    _until(lambda: any(w.holding for w in _workers(workers_run)))
    found = pg_admin.execute(
        f"SELECT backend_pid FROM {SCHEMA}.workers WHERE state = 'working'"
    ).fetchall()
    assert len(found) == 1
    pg_admin.execute("SELECT pg_terminate_backend(%s)", (found[0][0],))
    code, last = _last(worker)
    assert (code, last["stop"]) == (75, "session_lost")
    assert worker.poll() is not None  # its process stopped, not only its session
    _until(lambda: any(w.state == "gone" for w in _workers(workers_run)))
    rescuer = workers_run.worker("rescuer")
    end, _ = _last(coordinator)
    _last(rescuer)
    _assert_whole(workers_run, end)
    assert end in (0, 76)


def _head(run: WorkersRun, target: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(run.ok("head", target, "--json").stdout)
    return found


def _coordinator_after_kill(run: WorkersRun) -> subprocess.Popen[str]:
    """A requeued coordinator: until the killed one's session is gone, the run
    lock is held and it exits 4 (contention), as a batch system's requeue sees."""
    deadline = time.monotonic() + 60
    while True:
        coordinator = run.coordinator()
        try:
            code = coordinator.wait(timeout=3)
        except subprocess.TimeoutExpired:
            return coordinator  # it holds the lock and coordinates
        if code in (0, 76):
            return coordinator  # it took the lock: the workers had finished
        coordinator.communicate()
        assert code == 4, code
        assert time.monotonic() < deadline, "the killed coordinator's lock stayed held"
        time.sleep(0.5)


def test_issue_29_the_coordinator_killed_then_both_killed_then_restarted(
    workers_run: WorkersRun,
) -> None:
    """SIGKILL of the coordinator mid-round, then of a coordinator and a worker
    together; restarted, the run ends with every rollout once, nothing lost,
    and exported to files it verifies with the same head hash."""
    run = workers_run
    coordinator = run.coordinator()
    first = run.worker("first", delay=0.2)
    second = run.worker("second", delay=0.2)
    _until(lambda: sum(w.rows_recorded for w in _workers(run)) >= 4)
    os.kill(coordinator.pid, signal.SIGKILL)  # mid-round: workers hold claims
    coordinator.wait()
    again = _coordinator_after_kill(run)  # requeued, it takes the lock and goes on
    _until(lambda: sum(w.rows_recorded for w in _workers(run)) >= 12)
    for process in (again, first):
        if process.poll() is None:  # a fast run may have ended already
            os.kill(process.pid, signal.SIGKILL)
        process.wait()
    last = _coordinator_after_kill(run)
    restarted = run.worker("first")  # its own work folder: adopts its rows
    code, document = _last(last)
    assert document["role"] == "coordinator"
    for worker in (second, restarted):
        _last(worker)
    _assert_whole(run, code)
    assert code in (0, 76)
    copy = run.folder / "copy"
    exported = run.invoke("export", run.url, "--files", copy)
    assert exported.exit_code == 0, exported.stderr
    files = copy  # a folder holding one run names it
    assert run.invoke("verify", files).exit_code == 0
    assert _head(run, str(files)) == _head(run, run.url)


def test_issue_29_sc_3_an_attempt_two_workers_answered_is_recorded_once(
    workers_run: WorkersRun,
) -> None:
    """Two workers hold rows for the same attempt (a dead worker's rows adopted
    after its work was offered again): the first recorded wins, the second is
    never recorded (refused by line when the store caught the race, else
    counted as recorded already), and the worker goes on with its other rows."""
    import projections

    run = workers_run
    plan = run.folder / "plan.jsonl"
    run.ok("resume", run.url, *run.config_args(), "-o", plan)
    rows = [json.loads(line) for line in plan.read_text().splitlines()]
    assert len(rows) == 32
    files = {}
    for name, reward, mine in (("a", 1.0, rows[:1]), ("b", 0.0, rows[:2])):
        folder = run.folder / name
        folder.mkdir()
        files[name] = projections.RoundFiles(
            number=1,
            plan=str(plan),
            output=str(folder / "output.jsonl"),
            failures=str(folder / "output_failures.jsonl"),
        )
        answers = [{**row, **graded(reward)} for row in mine]
        Path(files[name].output).write_text(
            "".join(json.dumps(a) + "\n" for a in answers)
        )
        Path(files[name].failures).write_text("")
    # Workers record without the run lock (SC-4), each through its own session.
    with Ledger.open(run.url) as first, Ledger.open(run.url) as second:
        late = projections.RoundRecorder(second, files["b"])
        done = projections.RoundRecorder(first, files["a"]).record(final=True)
        assert (done.rows, done.refused) == (1, [])
        found = late.record(final=True)
    assert found.rows == 1  # its other row went on
    assert found.skipped + len(found.refused) == 1
    for refusal in found.refused:
        assert (refusal.file, refusal.line) == (files["b"].output, 1)
    with Ledger.open(run.url) as led:
        facts = log_facts(led)
    key = (rows[0]["_ng_task_index"], rows[0]["_ng_rollout_index"], 0)
    assert Counter(facts.outcomes)[key] == 1
    assert len(facts.outcomes) == 2
    table = [json.loads(x) for x in run.ok("results", run.url).stdout.splitlines()]
    (kept,) = [
        r for r in table if (r["_ng_task_index"], r["_ng_rollout_index"]) == key[:2]
    ]
    assert kept["reward"] == 1.0  # the first answer recorded, not the second
