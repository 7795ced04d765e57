"""Issue 25: ``run`` follows its collector to its end and never loses a row.

Each test fails on the ``run`` before issue 25: a worker writing after its
leader exited, a collector draining after ``run`` was SIGKILLed, a backlog
over one read and a row over 64 MiB, SIGTERM while ``run`` starts up, a run
path holding ``{output}``, a collector forked while ``run`` dies, and NeMo
Gym's collector run without its failure sidecar.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from ledger import FollowedFile
from tests.test_cli_support import CliRun, Templates, read_jsonl, templates

__all__ = ["templates"]

SCRIPT = Path(sys.executable).parent / "rollout-ledger"

#: A collector that writes a result row for every plan row, and logs each
#: row it writes to CALLS (the model calls it made). MODE: ``worker`` (a
#: worker process of its group writes the rows 1 s after the leader exits),
#: ``drain`` (one row, then slowly; on SIGTERM the rest over 2 s, then exit),
#: ``argv`` (its arguments logged to ARGV first), ``slow`` (SLOW seconds first).
COLLECTOR = r"""
import json, os, signal, sys, time
plan, output = sys.argv[1:3]
mode = os.environ.get("MODE", "")
if mode == "argv":
    with open(os.environ["ARGV"], "w") as f:
        json.dump(sys.argv[1:], f)
rows = [json.loads(line) for line in open(plan) if "rejudge" not in line]
answer = {"id": "r", "object": "response", "status": "completed", "output": []}
def write(some):
    with open(output, "a") as out, open(os.environ["CALLS"], "a") as calls:
        for row in some:
            out.write(json.dumps({**row, "reward": 1.0, "response": answer}) + "\n")
            out.flush()
            key = [row["_ng_task_index"], row["_ng_rollout_index"]]
            calls.write(json.dumps(key) + "\n")
if mode == "slow":
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # ended quietly, as by SIGTERM
    time.sleep(float(os.environ.get("SLOW", "5")))
if mode == "worker":
    if os.fork() == 0:  # the worker: same process group, outlives the leader
        time.sleep(1.0)
        write(rows)
        os._exit(0)
    sys.exit(0)
if mode == "drain":
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    write(rows[:1])
    left = rows[1:]
    while left and not stop:
        time.sleep(0.05)
    while left:  # draining: the rest, slowly, after the signal
        time.sleep(2.0 / len(rows))
        write(left[:1])
        left = left[1:]
    sys.exit(0)
write(rows)
"""


@pytest.fixture
def run(tmp_path: Path, templates: Templates) -> CliRun:
    created = templates("created", tmp_path, CliRun.create)
    (tmp_path / "collect.py").write_text(COLLECTOR, encoding="utf-8")
    return created


def launch(
    run: CliRun, *extra: str, piped: bool = True, **env: str
) -> subprocess.Popen[str]:
    command = [sys.executable, str(run.folder / "collect.py"), "{plan}", "{output}"]
    argv = [str(SCRIPT), "run", str(run.out), *map(str, run.config_args()), *extra]
    where = subprocess.PIPE if piped else subprocess.DEVNULL
    return subprocess.Popen(
        [*argv, "--", *command],
        env={**os.environ, "CALLS": str(run.folder / "calls.jsonl"), **env},
        stdout=where,
        stderr=where,
        text=True,
    )


def finish(run: CliRun, *extra: str, **env: str) -> tuple[int, str, str]:
    process = launch(run, *extra, **env)
    out, err = process.communicate(timeout=120)
    return process.returncode, out, err


def calls(run: CliRun) -> Counter[tuple[int, int]]:
    path = run.folder / "calls.jsonl"
    found = read_jsonl(path) if path.exists() else []
    return Counter((t, r) for t, r in found)


def assert_complete_once(run: CliRun) -> None:
    """Complete, every rollout sampled once, nothing recorded twice; verify holds."""
    assert run.invoke("check", run.out).exit_code == 0
    assert run.invoke("verify", run.out).exit_code == 0
    sampled = calls(run)
    assert len(sampled) == 6
    assert set(sampled.values()) == {1}, sampled
    keys = Counter(
        (r["_ng_task_index"], r["_ng_rollout_index"]) for r in read_jsonl(run.out)
    )
    assert set(keys.values()) == {1}


def test_rows_a_worker_writes_after_its_leader_exits_are_recorded(run: CliRun) -> None:
    """Issue 25: the round lasts until the collector's whole group has exited."""
    code, out, err = finish(run, "--json", MODE="worker")
    assert code == 0, err
    rounds = [json.loads(line) for line in out.splitlines()]
    assert [r["round"] for r in rounds] == [1]
    assert rounds[0]["recorded"]["rows"] == 6
    assert_complete_once(run)


def test_rows_a_collector_drains_after_run_is_killed_are_recorded_once(
    run: CliRun,
) -> None:
    """Issue 25: the next run waits for the draining collector, then records it all."""
    first = launch(run, piped=False, MODE="drain")  # its collector outlives it
    output = run.ledger_dir / "rounds" / "1" / "output.jsonl"
    until = time.monotonic() + 60
    while not (output.exists() and output.read_bytes().count(b"\n") >= 1):
        assert time.monotonic() < until, "the collector wrote no row"
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)  # the collector gets SIGTERM: it drains
    first.wait(timeout=60)
    code, _, err = finish(run)  # at once, while the first collector drains
    assert code == 0, err
    assert_complete_once(run)


def test_a_backlog_over_one_read_is_read_whole(tmp_path: Path) -> None:
    """Issue 25: 150 MiB appended between two reads: every line, none lost."""
    path = tmp_path / "output.jsonl"
    line = b'{"pad": "' + b"x" * (1024 * 1024 - 12) + b'"}\n'
    with path.open("wb") as out:
        out.write(line * 150)
    followed = FollowedFile(path)
    found = followed.read(final=True)
    assert len(found) == 150
    assert all(f.terminated and f.raw == line[:-1] for f in found)
    assert followed.offset == len(line) * 150


def test_a_row_over_64_mib_is_read_once_its_newline_comes(tmp_path: Path) -> None:
    """Issue 25: a 70 MB row, written in two parts, is one line."""
    path = tmp_path / "output.jsonl"
    half = b"y" * (35 * 1000 * 1000)
    path.write_bytes(b'{"a": 1}\n{"pad": "' + half)
    followed = FollowedFile(path)
    assert [f.raw for f in followed.read()] == [b'{"a": 1}']
    with path.open("ab") as out:
        out.write(half + b'"}\n')
    found = followed.read()
    assert len(found) == 1
    assert len(found[0].raw) == 70 * 1000 * 1000 + 11
    assert found[0].number == 2


@pytest.mark.slow
def test_run_records_a_70_mb_row(tmp_path: Path) -> None:
    """Issue 25: a row of any size ``record`` accepts is recordable by ``run``."""
    run = CliRun(tmp_path, tasks=1, rollouts=1)
    rows = read_jsonl(run.inputs)
    rows[0]["responses_create_params"]["input"] = "z" * (70 * 1000 * 1000)
    run.inputs.write_text(json.dumps(rows[0]) + "\n")
    run.create()
    (tmp_path / "collect.py").write_text(COLLECTOR, encoding="utf-8")
    code, _, err = finish(run)
    assert code == 0, err
    assert run.out.stat().st_size > 70 * 1000 * 1000


def _caught(pid: int, number: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(mask.split()[1], 16) >> (number - 1) & 1)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_run_starts_up_is_exit_75(run: CliRun, number: int) -> None:
    """Issue 25: from the earliest moment run can catch it (about 20 ms): exit 75.

    At 0.15 s ``run`` is still importing (it took the signals over at about
    0.3 s before issue 25, so SIGTERM ended it with 143, SIGINT with 1).
    """
    for moment in ("earliest", 0.15, 0.3):
        process = launch(run, MODE="slow")  # never complete before the signal
        if moment == "earliest":
            until = time.monotonic() + 30
            while not _caught(process.pid, signal.SIGTERM):  # ours: both are
                assert time.monotonic() < until
                assert process.poll() is None
        else:
            time.sleep(float(moment))
        process.send_signal(number)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 75, (moment, err)
        assert "Aborted" not in err
        # run's own code raised nothing; a collector the signal reached while
        # Python itself started up may print its interpreter's fatal error
        assert not re.search(r'File ".*/(cli|ledger|projections)/', err), err


def test_a_run_path_holding_a_placeholder_keeps_the_plan_argument(
    tmp_path: Path, templates: Templates
) -> None:
    """Issue 25: placeholders are replaced once, in the command's arguments only."""
    folder = tmp_path / "a{output}b{failures}"
    folder.mkdir()
    run = templates("created", folder, CliRun.create)
    (tmp_path / "collect.py").write_text(COLLECTOR, encoding="utf-8")
    run.folder = tmp_path  # where the collector is (the run stays in folder)
    code, _, err = finish(run, MODE="argv", ARGV=str(folder / "argv.json"))
    assert code == 0, err
    plan, output = json.loads((folder / "argv.json").read_text())
    rounds = run.ledger_dir / "rounds" / "1"
    assert plan == str(rounds / "plan.jsonl")
    assert output == str(rounds / "output.jsonl")


def test_a_collector_whose_run_died_before_its_death_signal_ends_itself(
    tmp_path: Path,
) -> None:
    """Issue 25: forked, then its run gone before prctl: it never runs on."""
    survived = tmp_path / "survived"
    script = f"""
import os, sys, time
from tests.internals import dies_with_parent
preexec = dies_with_parent()
if os.fork() == 0:
    parent = os.getppid()
    while os.getppid() == parent:  # the run that started it dies first
        time.sleep(0.01)
    preexec()
    open({str(survived)!r}, "w").write("ran as an orphan")
    os._exit(0)
os._exit(0)
"""
    root = Path(__file__).parents[1]
    subprocess.run([sys.executable, "-c", script], check=True, timeout=30, cwd=root)
    time.sleep(1.0)
    assert not survived.exists()


def test_nemo_gym_s_collector_without_its_sidecar_is_warned_about(
    run: CliRun,
) -> None:
    """Issue 25: 0.7.0 ends the collection at the first failed request without it."""
    tool = run.folder / "ng_collect_rollouts"
    tool.write_text(f"#!{sys.executable}\n" + COLLECTOR)
    tool.chmod(0o755)
    argv = [str(SCRIPT), "run", str(run.out), *map(str, run.config_args()), "--"]
    env = {**os.environ, "CALLS": str(run.folder / "calls.jsonl")}
    ran = subprocess.run(
        [*argv, str(tool), "{plan}", "{output}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert "+route_failures_to_sidecar=true" in ran.stderr
    assert "ends the whole collection" in ran.stderr
    quiet = subprocess.run(
        [*argv, str(tool), "{plan}", "{output}", "+route_failures_to_sidecar=true"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "route_failures_to_sidecar" not in quiet.stderr
