"""``rollout-ledger run`` around a collector that knows nothing of the ledger.

The collector (``COLLECTOR`` below) reads the plan JSONL and writes NeMo Gym
shaped rows: a plan row copied with ``response`` and ``reward`` into
``{output}``, or with ``_ng_failure_class`` into ``{failures}`` (the first
attempt of every third rollout: retried, REC-20). Its ``MODE`` environment
variable makes it misbehave. Rules asserted: CLI-4 (the plan file), CLI-5
(rows reserved and recorded through ``record``'s path, nothing twice),
CLI-7 / REC-40 (``run`` exits as ``check``), REC-86 (rows adopted as they
land, and after a kill).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_support import CliRun, Templates, read_jsonl, templates

__all__ = ["templates"]

SCRIPT = Path(sys.executable).parent / "rollout-ledger"

COLLECTOR = r"""
import json, os, sys, time
plan, output, failures = sys.argv[1:4]
mode = os.environ.get("MODE", "")
if os.environ.get("PIDS"):
    with open(os.environ["PIDS"], "a") as pids:
        pids.write(f"{os.getpid()}\n")
rows = [json.loads(line) for line in open(plan)]
answer = {"id": "r", "object": "response", "status": "completed", "output": []}
with open(output, "a") as out, open(failures, "a") as fail:
    for n, row in enumerate(rows):
        if "rejudge" in row:
            continue
        t, r = row["_ng_task_index"], row["_ng_rollout_index"]
        if mode == "die" and n == 3:
            os.kill(os.getpid(), 9)
        if mode == "bad" and n == 1:
            out.write('{"not json\n')
            bare = {k: v for k, v in row.items() if k != "_ng_rollout_id"}
            out.write(json.dumps({**bare, "_ng_rollout_index": 99, "reward": 1.0,
                                  "response": answer}) + "\n")
        if (t + r) % 3 == 0 and row["_ng_attempt_index"] == 0:
            fail.write(json.dumps({**row, "_ng_failure_class": "session_lost",
                                   "_ng_failure_message": "lost"}) + "\n")
        else:
            out.write(json.dumps({**row, "reward": 1.0, "response": answer}) + "\n")
        out.flush()
        fail.flush()
        time.sleep(float(os.environ.get("PAUSE", "0")))
if mode == "rewrite":
    time.sleep(1.5)  # run has read every line by now (it reads every 0.2 s)
    with open(output, "w") as out:  # truncated, then one row rewritten
        out.write(json.dumps({**rows[1], "reward": 0.0, "response": answer}) + "\n")
if mode == "hang":
    time.sleep(60)
if mode == "fail":
    sys.exit(7)
"""


@pytest.fixture
def run(tmp_path: Path, templates: Templates) -> CliRun:
    created = templates("created", tmp_path, CliRun.create)
    (tmp_path / "collect.py").write_text(COLLECTOR, encoding="utf-8")
    return created


def args(run: CliRun, *extra: str) -> list[str]:
    collector = [sys.executable, str(run.folder / "collect.py")]
    command = [*collector, "{plan}", "{output}", "{failures}"]
    return ["run", str(run.out), *map(str, run.config_args()), *extra, "--", *command]


def launch(run: CliRun, *extra: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(SCRIPT), *args(run, *extra)],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(run: CliRun, *extra: str, **env: str) -> tuple[int, str, str]:
    process = launch(run, *extra, **env)
    out, err = process.communicate(timeout=120)
    return process.returncode, out, err


def events(run: CliRun) -> list[dict[str, Any]]:
    run.ok("export", run.out, "-o", run.folder / "events.jsonl")
    return [
        {**e["body"], "kind": e["kind"]}
        for e in read_jsonl(run.folder / "events.jsonl")
    ]


def assert_consistent(
    run: CliRun, *, complete: bool = True, killed: bool = False
) -> None:
    """No attempt reserved or given an outcome twice; verify holds.

    ``killed``: right after a SIGKILL, a row written whose event was not yet
    appended is a pending repair (EV-12, recorded by the next writer's open):
    verify names it, and it is the only finding allowed.
    """
    found = events(run)
    keys = Counter(
        (e["task"], e["rollout"], e["attempt"], e["kind"])
        for e in found
        if e["kind"] in {"attempt_reserved", "result_saved", "failure_saved"}
    )
    assert all(n == 1 for n in keys.values()), keys
    outcomes = Counter(
        (t, r, a) for (t, r, a, kind) in keys if kind != "attempt_reserved"
    )
    assert all(n == 1 for n in outcomes.values())
    verified = run.invoke("verify", run.out, "--json")
    findings = json.loads(verified.stdout)["findings"]
    if killed:
        assert {f["check"] for f in findings} <= {"repair"}, findings
    else:
        assert (verified.exit_code, findings) == (0, [])
    assert (run.invoke("check", run.out).exit_code == 0) is complete
    rows = read_jsonl(run.out) if run.out.exists() else []
    keyed = Counter((r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows)
    assert all(n == 1 for n in keyed.values())


def test_cli_4_cli_5_cli_7_rounds_until_complete(run: CliRun) -> None:
    """Round 1 leaves retries (failures), round 2 completes: exit 0, JSON per round."""
    code, out, err = finish(run, "--json")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [d["round"] for d in lines] == [1, 2]
    assert all(d["schema_version"] == 1 for d in lines)
    assert lines[0]["plan"]["dispatch"] == 6
    assert lines[0]["recorded"]["events"]["failure_saved"] == 2
    assert lines[-1]["stop"] == "complete"
    assert lines[-1]["exit_code"] == 0
    plan = run.ledger_dir / "rounds" / "1" / "plan.jsonl"
    assert len(read_jsonl(plan)) == 6
    assert_consistent(run)


def test_cli_5_collector_killed_mid_round_keeps_its_rows(run: CliRun) -> None:
    """A collector SIGKILLed after 3 rows: they are recorded, the rest re-released."""
    code, _, err = finish(run, "--max-rounds", "1", MODE="die")
    assert code == 75, err
    assert "was killed by SIGKILL" in err
    assert_consistent(run, complete=False)
    code, _, err = finish(run)
    assert code == 0, err
    assert_consistent(run)


def test_cli_5_unreleased_attempt_and_bad_line_are_refused_with_file_and_line(
    run: CliRun,
) -> None:
    """Both refused, naming the round's output and the line; the rest recorded."""
    code, _, err = finish(run, MODE="bad")
    assert code == 0, err
    output = run.ledger_dir / "rounds" / "1" / "output.jsonl"
    # Row 0 is a failure (the sidecar file): the bad lines come first in output.
    assert f"{output} line 1: the line is not JSON; not recorded" in err
    assert (
        f"{output} line 2: names attempt 0 of task 0, rollout 99, which this round "
        "did not release; not recorded"
    ) in err
    assert_consistent(run)
    # Issue 25: every line a collector wrote is in the log, refused ones too.
    refused = [e for e in events(run) if e["kind"] == "row_refused"]
    first = [(e["file"], e["line"], e["round"]) for e in refused if e["round"] == 1]
    assert first == [
        ("rollouts_ledger/rounds/1/output.jsonl", 1, 1),
        ("rollouts_ledger/rounds/1/output.jsonl", 2, 1),
    ]
    for event in refused:
        raw = (
            (run.out.parent / event["file"])
            .read_bytes()
            .splitlines()[event["line"] - 1]
        )
        assert event["row_sha256"] == hashlib.sha256(raw).hexdigest()
        assert event["length"] == len(raw)
    assert "not JSON" in refused[0]["reason"]
    # Read again (a later run adopting the round), nothing is refused twice.
    code, _, err = finish(run)
    assert code == 0, err
    again = [e for e in events(run) if e["kind"] == "row_refused"]
    assert len(again) == len(refused)


def test_cli_5_a_collector_that_rewrites_its_output_harms_nothing(
    run: CliRun,
) -> None:
    """The rewrite is named; the rows read before stay; nothing of it is recorded."""
    code, _, err = finish(run, "--max-rounds", "1", MODE="rewrite")
    assert code == 75, err
    output = run.ledger_dir / "rounds" / "1" / "output.jsonl"
    assert f"{output} shrank from " in err
    assert "truncated or rewritten, so nothing more of it is recorded" in err
    rewards = [row["reward"] for row in read_jsonl(run.out)]
    assert rewards == [1.0] * 4  # the 4 results read first, not the rewrite's 0.0
    assert_consistent(run, complete=False)


def test_cli_7_a_collector_that_fails_twice_stops_run(run: CliRun) -> None:
    """Exit code named; its rows recorded; stopped after 2 idle rounds (exit 3)."""
    (run.folder / "collect.py").write_text("import sys\nsys.exit(7)\n")
    code, out, err = finish(run)
    assert code == 3, (out, err)
    assert "exited with code 7" in err
    assert "the collector wrote no row in the last 2 rounds" in out
    assert_consistent(run, complete=False)


def test_cli_7_round_timeout_stops_a_hanging_collector(run: CliRun) -> None:
    """The rows it wrote before hanging are recorded; the message names the limit."""
    started = time.monotonic()
    code, _, err = finish(run, "--round-timeout", "2", "--max-rounds", "1", MODE="hang")
    assert time.monotonic() - started < 30
    assert code == 75, err
    assert "ran past --round-timeout" in err
    assert_consistent(run, complete=False)
    assert run.invoke("check", run.out).exit_code == 75


def test_cli_7_sigterm_passes_on_records_the_rows_and_exits_75(run: CliRun) -> None:
    """Slurm preemption: the collector stopped, its rows so far recorded, exit 75."""
    process = launch(run, PAUSE="0.5")
    output = run.ledger_dir / "rounds" / "1" / "output.jsonl"
    deadline = time.monotonic() + 30
    while not (output.exists() and output.read_bytes().count(b"\n") >= 2):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 75, (out, err)
    assert "stopped by a signal" in out
    written = len(read_jsonl(output)) + len(
        read_jsonl(run.ledger_dir / "rounds" / "1" / "output_failures.jsonl")
    )
    assert 2 <= written < 6
    saved = [e for e in events(run) if e["kind"] in {"result_saved", "failure_saved"}]
    assert len(saved) == written
    assert_consistent(run, complete=False)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_cli_5_a_collector_does_not_outlive_a_sigkilled_run(run: CliRun) -> None:
    """SIGKILL of ``run`` stops its collector too (SIGTERM from the kernel): left
    running, it would write a round's files after the next ``run`` read them."""
    pids = run.folder / "pids"
    process = launch(run, MODE="hang", PIDS=str(pids))
    deadline = time.monotonic() + 30
    while not (pids.exists() and pids.read_text().strip()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    (collector,) = map(int, pids.read_text().split())
    process.kill()
    process.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while True:
        try:
            os.kill(collector, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "the collector outlived run"
        time.sleep(0.05)


def outcome_keys(run: CliRun) -> Counter[tuple[int, int, int]]:
    return Counter(
        (e["task"], e["rollout"], e["attempt"])
        for e in events(run)
        if e["kind"] in {"result_saved", "failure_saved"}
    )


def written_keys(run: CliRun) -> set[tuple[int, int, int]]:
    """Every attempt a collector wrote a row for, in every round's files."""
    return {
        (row["_ng_task_index"], row["_ng_rollout_index"], row["_ng_attempt_index"])
        for path in (run.ledger_dir / "rounds").glob("*/*.jsonl")
        if path.name != "plan.jsonl"
        for row in read_jsonl(path)
    }


def wait_for_collectors(pids: Path) -> None:
    """The collectors a killed ``run`` left behind have finished their rows."""
    deadline = time.monotonic() + 30
    for pid in map(int, pids.read_text().split() if pids.exists() else []):
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)


@pytest.mark.slow
def test_rec_86_cli_5_run_sigkilled_at_random_points_loses_nothing(
    run: CliRun,
) -> None:
    """SIGKILL of run itself, again and again: no row lost, none recorded twice.

    Each restart first records what the killed run's collector wrote (it ran
    on, orphaned, to its end): every row written is recorded, exactly once,
    and no attempt is reserved twice.
    """
    chance = random.Random(19)
    pids = run.folder / "pids"
    for _ in range(4):
        process = launch(run, PAUSE="0.1", PIDS=str(pids))
        time.sleep(chance.uniform(0.3, 1.5))
        process.kill()
        process.communicate(timeout=30)
        wait_for_collectors(pids)
        done = run.invoke("check", run.out).exit_code == 0
        assert_consistent(run, complete=done, killed=True)
    code, _, err = finish(run, PIDS=str(pids))
    assert code == 0, err
    assert_consistent(run)
    keys = outcome_keys(run)
    assert set(keys) == written_keys(run)  # no row lost
    assert set(keys.values()) == {1}  # none recorded twice
