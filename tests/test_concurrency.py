"""R-2 through the console script: one owner at a time, and one valid chain after.

Six processes run ``rollout-ledger resume``, ``approve`` and ``reset-budget``
on one run, released together: each imports everything first, says it is
ready, and waits on its stdin; the test then releases them all at once and
each runs the installed console script (``runpy``, so the start-up cost is
paid before the barrier). Every process proceeds alone or exits 4 naming the
holder's pid and host (CLI-1, EV-40) and writes nothing; afterwards ``verify``
passes, the head hash ``rollout-ledger head`` prints equals an independent
recomputation of the chain (EV-2), and every command's events are contiguous.
``ROLLOUT_LEDGER_RACE_ROUNDS`` sets how many rounds race (2 by default).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from cli import main
from ledger import Ledger, LockLost, RunLock
from projections import resume
from tests.test_cli_support import (
    ACTOR,
    CliRun,
    Templates,
    by_key,
    cli_run,
    failed,
    graded,
    read_jsonl,
    templates,
)

__all__ = ["cli_run", "templates"]

ROUNDS = int(os.environ.get("ROLLOUT_LEDGER_RACE_ROUNDS", "2"))
SCRIPT = Path(sys.executable).parent / "rollout-ledger"
ROOT = Path(__file__).parents[1]
HOLDER = re.compile(r"held by pid (\d+) on host (\S+) since (\S+)")

RACER = textwrap.dedent(
    """
    import importlib, pkgutil, runpy, sys
    import cli, ledger, projections  # what the commands import, and cli's lazy imports
    for found in pkgutil.iter_modules(cli.__path__, "cli."):
        importlib.import_module(found.name)
    print("ready", flush=True)
    sys.stdin.readline()  # the barrier: the test releases every racer at once
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
    """
)

HOLD = textwrap.dedent(
    """
    import sys, time
    from ledger import RunLock
    lock = RunLock(sys.argv[1]).acquire()
    print("held", flush=True)
    time.sleep(60)
    """
)


def build_held(run: CliRun) -> None:
    run.create()
    run.collect(
        by_key(
            {
                (0, 1): failed("session_lost", answer=True),  # held (REC-20.5h)
                (2, 1): failed("session_lost"),  # retried by a resume
            }
        )
    )


@pytest.fixture
def run(tmp_path: Path, templates: Templates) -> CliRun:
    return templates("race-held", tmp_path, build_held)


def commands(run: CliRun, round_: int) -> list[list[str]]:
    """Two of each writing command; each operator action names its racer."""
    out, config = str(run.out), [str(arg) for arg in run.config_args()]
    approve = ["--task", "0", "--rollout", "1", "--attempt", "0"]
    return [
        ["resume", out, *config],
        ["resume", out, *config],
        ["approve", out, *approve, "--reason", f"round {round_} racer 2"],
        ["approve", out, *approve, "--reason", f"round {round_} racer 3"],
        ["reset-budget", out, "--reason", f"round {round_} racer 4"],
        ["reset-budget", out, "--reason", f"round {round_} racer 5"],
    ]


def race(argvs: list[list[str]]) -> list[tuple[int, int, str, str]]:
    """Start a racer per argv, release them together: (pid, code, stdout, stderr)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(SCRIPT), *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "LOGNAME": f"racer{i}"},
        )
        for i, argv in enumerate(argvs)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "ready\n", proc.stderr
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = []
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=120)
            results.append((proc.pid, proc.returncode, stdout, stderr))
    finally:
        for proc in procs:  # a racer left waiting must not run after a failure
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return results


#: One stored row of the events table: seq, kind, at, actor, body, prev_hash, hash.
Stored = tuple[int, str, str, str, bytes, bytes, bytes]


def stored_events(run: CliRun) -> list[Stored]:
    conn = sqlite3.connect(
        f"{(run.ledger_dir / 'ledger.db').as_uri()}?mode=ro", uri=True
    )
    try:
        return conn.execute("SELECT * FROM events ORDER BY seq").fetchall()
    finally:
        conn.close()


def recomputed_head(rows: list[Stored]) -> str:
    """The head hash recomputed as EV-2 defines it, independently of the library.

    ``hash = sha256(prev_hash || JSON [seq, kind, at, actor] + newline || body)``.
    """
    prev = bytes(32)
    for number, kind, at, actor, body, prev_hash, digest in rows:
        assert prev_hash == prev, number
        header = msgspec.json.encode([number, kind, at, actor]) + b"\n"
        prev = hashlib.sha256(prev + header + body).digest()
        assert digest == prev, number
    return prev.hex()


def reason_of(body: bytes) -> str | None:
    reason = msgspec.json.decode(body).get("reason")
    return reason if isinstance(reason, str) else None


def check_round(
    before: int,
    rows: list[Stored],
    argvs: list[list[str]],
    results: list[tuple[int, int, str, str]],
    known_pids: set[int],
) -> int:
    """One round's promises; returns how many racers were refused."""
    new = rows[before:]
    reasons = Counter(reason_of(row[4]) for row in new)
    actors = {reason_of(row[4]): row[3] for row in new}
    resumed = 0
    for racer, (argv, (pid, code, stdout, stderr)) in enumerate(
        zip(argvs, results, strict=True)
    ):
        assert "Traceback" not in stdout + stderr
        reason = argv[-1] if argv[0] != "resume" else None
        if code == 3 and argv[0] == "approve":
            # REC-25: once approved (by its twin, or an earlier round), the
            # attempt is no longer held; the approval is refused, unrecorded.
            assert "is not held" in stderr, stderr
            assert reason is not None
            assert reasons[reason] == 0
            continue
        assert code in (0, 4), (argv[0], code, stderr)
        if code == 4:
            assert "the run lock " in stderr, stderr
            assert "run.lock" in stderr, stderr
            holder = HOLDER.search(stderr)
            assert holder is not None, stderr  # EV-40: the holder is named
            assert int(holder.group(1)) in known_pids, (stderr, known_pids)
            assert int(holder.group(1)) != pid
            if reason is not None:
                assert reasons[reason] == 0, (reason, "a refused racer wrote")
        elif reason is not None:
            assert reasons[reason] == 1, (reason, reasons)
            assert actors[reason] == f"operator:racer{racer}"  # its own event
        else:
            resumed += 1
    kinds = [row[1] for row in new]
    assert kinds.count("resume_started") == resumed
    for index, (number, kind, at, actor, *_rest) in enumerate(new):
        if kind == "resume_started":
            # REC-56: a resume's events land in one transaction, uninterrupted.
            following = new[index + 1]
            assert following[1] == "attempts_released", (number, kinds)
            assert following[2:4] == (at, actor) == (at, "resume")
    return sum(code == 4 for _, code, _, _ in results)


@pytest.mark.slow
def test_r_2_racing_writers_each_proceed_alone_or_exit_4_and_the_chain_holds(
    run: CliRun,
) -> None:
    known_pids = {os.getpid()}  # the template was made in this process
    refused = 0
    for round_ in range(ROUNDS):
        before = len(stored_events(run))
        argvs = commands(run, round_)
        results = race(argvs)
        known_pids |= {pid for pid, *_ in results}
        rows = stored_events(run)
        refused += check_round(before, rows, argvs, results, known_pids)
    assert refused >= 1  # the racers really raced for the lock
    runner = CliRunner()
    verified = runner.invoke(main, ["verify", str(run.out)])
    assert verified.exit_code == 0, verified.output
    head = runner.invoke(main, ["head", str(run.out)]).stdout.split()
    rows = stored_events(run)
    assert head == [str(len(rows)), recomputed_head(rows)]
    assert [row[0] for row in rows] == list(range(1, len(rows) + 1))


@pytest.mark.slow
def test_r_2_a_killed_holder_never_blocks_the_console_script(run: CliRun) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run.out)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    assert holder.stdout is not None
    assert holder.stdout.readline() == "held\n"
    config = [str(arg) for arg in run.config_args()]
    try:
        blocked = subprocess.run(
            [str(SCRIPT), "resume", str(run.out), *config],
            capture_output=True, text=True, cwd=ROOT, timeout=120,
        )  # fmt: skip
        assert blocked.returncode == 4
        assert f"held by pid {holder.pid} on host " in blocked.stderr
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()
    # EV-41: the kernel released the dead holder's flock; its line stays behind.
    doctor = CliRunner().invoke(main, ["doctor", str(run.out)])
    assert doctor.exit_code == 0, doctor.output
    assert f"run lock: ok: free (last holder: pid {holder.pid} on host " in (
        doctor.stdout
    )
    resumed = subprocess.run(
        [str(SCRIPT), "resume", str(run.out), *config],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.startswith("gate: passed")


def test_ev_40_lock_held_names_the_holder_while_it_writes_its_line(
    run: CliRun,
) -> None:
    """A second owner that reads while the holder is still writing waits for it."""
    import threading

    lock_file = run.ledger_dir / "run.lock"
    fd = os.open(lock_file, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(fd, 0)  # a holder that has the lock but no line yet
        line = b"pid 4242 on host elsewhere since 2026-01-01T00:00:00Z\n"
        writer = threading.Timer(0.03, os.pwrite, (fd, line, 0))
        writer.start()
        result = CliRunner().invoke(
            main,
            ["reset-budget", str(run.out), "--reason", "x"],
            obj={"clock": run.clock, "actor": ACTOR},
        )
        writer.join()
    finally:
        os.close(fd)
    assert result.exit_code == 4
    assert "pid 4242 on host elsewhere" in result.stderr, result.stderr


def reserved_keys(rows: list[Stored]) -> Counter[tuple[int, int, int]]:
    """How often each (task, rollout, attempt) was reserved."""
    found: Counter[tuple[int, int, int]] = Counter()
    for row in rows:
        if row[1] == "attempt_reserved":
            body = msgspec.json.decode(row[4])
            found[(body["task"], body["rollout"], body["attempt"])] += 1
    return found


def test_ev_40_a_removed_lock_file_lets_no_second_collector_in_and_stops_the_first(
    cli_run: CliRun,
) -> None:
    """EV-40, R-2 (issue 18, "two owners"): with ``run.lock`` removed under a
    collector, a second collector (the console script, another process) exits 4
    naming it, the first stops before it appends anything more (exit 4 in the
    CLI), and the run resumes cleanly afterwards: no attempt reserved twice, no
    saved answer sampled again, ``verify`` passes."""
    run = cli_run
    lock = RunLock(run.out).acquire()
    led = Ledger.open(run.out, lock=lock)
    try:
        plan = resume(led, run.config_data, run.servers_data).plan.dispatch
        assert len(plan) >= 2
        led.reserve_many(plan[:2])  # two attempts in flight
        led.record({**plan[0], **graded()})  # one answer saved
        saved = (plan[0]["_ng_task_index"], plan[0]["_ng_rollout_index"])
        head, size = led.head(), run.out.stat().st_size
        before = stored_events(run)

        (run.ledger_dir / "run.lock").unlink()  # a cleanup script, an operator ...
        config = [str(arg) for arg in run.config_args()]
        second = subprocess.run(
            [str(SCRIPT), "resume", str(run.out), *config,
             "--plan-out", str(run.folder / "second.jsonl")],
            capture_output=True, text=True, cwd=ROOT, timeout=120,
        )  # fmt: skip
        assert second.returncode == 4, second.stderr
        assert f"held by pid {os.getpid()} on host " in second.stderr
        assert "removed or replaced" in second.stderr
        assert "Traceback" not in second.stderr
        assert not (run.folder / "second.jsonl").exists()
        assert stored_events(run) == before  # the refused collector wrote nothing

        # The first collector notices before it writes its next row.
        for _ in range(2):  # and stays stopped
            with pytest.raises(LockLost, match=r"run\.lock was (removed|replaced)"):
                led.record({**plan[1], **graded()})
        with pytest.raises(LockLost):
            led.reserve_many(plan[2:3])
        assert led.head() == head
        assert run.out.stat().st_size == size  # no row written either
        assert stored_events(run) == before
    finally:
        led.close()
        lock.release()

    verified = subprocess.run(
        [str(SCRIPT), "verify", str(run.out)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stderr
    resumed = subprocess.run(
        [str(SCRIPT), "resume", str(run.out), *config,
         "--plan-out", str(run.folder / "after.jsonl")],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    after = read_jsonl(run.folder / "after.jsonl")
    assert after  # the attempts that never ran are dispatched again ...
    keys = {(row["_ng_task_index"], row["_ng_rollout_index"]) for row in after}
    assert saved not in keys  # ... the saved answer is not sampled again
    rows = stored_events(run)
    reserved = reserved_keys(rows)
    assert sum(reserved.values()) == 2
    assert max(reserved.values()) == 1  # no attempt reserved twice
    assert [row[1] for row in rows].count("result_saved") == 1
