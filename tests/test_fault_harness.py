"""Issue 18's fault-injection harness: SIGKILL at system calls, disk full, lost locks.

**SIGKILL at every state-changing system call** (R-1, EV-11, EV-12, REC-70,
SC-5). Each of ``create``, ``resume``, ``record``, ``import`` and
``export --files`` runs once under strace from a fixed run; every traced call
that changes the run's files, folders or locks is a kill point
(``tests/fault_support.py``). A trial copies the run back and runs the
command with ``-e inject=NAME:signal=KILL:when=N``, so it dies entering that
call, and then checks what "What survives what" promises:

- the next command (the same command again) recovers, or refuses with exit
  3, 4 or 5 and a message naming the command that recovers, never a
  traceback; the command that continues the run (``resume``, or ``verify`` of
  an export's copy) then succeeds;
- ``verify`` passes;
- every append the killed command saw return is in the log, with its hash
  (``tests/fault_child.py`` reports them);
- the collector's files keep every byte they held (``record`` may only add
  rows after them; a writer's repair of a torn tail saves what it cuts), and
  no attempt is recorded twice.

What CI covers: with ``ROLLOUT_LEDGER_FAULT_ALL=1`` every kill point runs
(some 960 trials: create 224, resume 140, record 142, import 208, export
249, as of issue 18). Without it a deterministic stride runs: the first
call of each kind (system call and class of file: the log, its WAL and
shared memory, the lock, a collector file, a temporary file being
published, a folder; every call on SQLite's shared memory is one kind) and
the last call, plus every k-th point in trace order: about :data:`BUDGET` a
command, some 130 trials in all.

**Disk full** on a real tmpfs mount (needs root and a permitted mount,
skipped with the reason otherwise, failed under ``CI=true``): each command
runs with the filesystem full to several levels; it exits 3 or 5 with a plain
message naming the path, leaves nothing half-made, and once space is freed
the same command succeeds and ``verify`` passes.

**A lost lock**: the run lock file removed under its holder, and the holder's
PostgreSQL lock session terminated. The holder notices before its next
append and stops; a second owner never runs beside it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli import main
from tests.fault_support import (
    Traced,
    chosen,
    kill_points,
    killed_at,
    run_traced,
    strace,
)
from tests.internals import SQLiteStore
from tests.small_disk import small_disk
from tests.test_cli_support import CliRun, failed, graded, read_jsonl, write_jsonl

pytestmark = pytest.mark.slow

#: Kill points a command runs in CI (the stride); all with ROLLOUT_LEDGER_FAULT_ALL=1.
BUDGET = 24
#: Killed commands run side by side (CI has 2 cores).
WORKERS = min(4, os.cpu_count() or 1)
COLLECTOR = ("rollouts.jsonl", "rollouts_failures.jsonl")
MATERIALIZED = "rollouts_materialized_inputs.jsonl"

# -- the runs each command starts from ----------------------------------------------


@dataclass(frozen=True)
class Files:
    """The paths of a run in ``folder`` (built by ``CliRun``)."""

    folder: Path

    @property
    def out(self) -> Path:
        return self.folder / "results" / "rollouts.jsonl"

    @property
    def db(self) -> Path:
        return self.folder / "results" / "rollouts_ledger" / "ledger.db"

    @property
    def copy(self) -> Path:
        return self.folder / "copy"

    def config_args(self) -> list[Path | str]:
        folder = self.folder
        return [
            "--config",
            folder / "collection.yaml",
            "--global-config",
            folder / "servers.yaml",
        ]

    def collector(self) -> dict[str, bytes]:
        """The collector's files (OUT, sidecar, materialized inputs) that exist."""
        results = self.out.parent
        names = (*COLLECTOR, MATERIALIZED)
        return {n: (results / n).read_bytes() for n in names if (results / n).exists()}


def outcome(row: dict[str, Any]) -> dict[str, Any]:
    """Results, and one failure so that ``record`` writes the sidecar too."""
    if (row["_ng_task_index"], row["_ng_rollout_index"]) == (1, 1):
        return {**row, **failed("session_lost")}
    return {**row, **graded()}


def build(folder: Path, stage: str) -> None:
    """A run at ``stage``: inputs only, created, planned, recorded or legacy."""
    run = CliRun(folder)
    if stage == "inputs":
        return
    if stage == "legacy":  # an older collector's files, without a ledger
        legacy(run)
        return
    run.create()
    if stage == "created":
        return
    _, plan = run.resume()
    rows = [outcome(line) for line in plan if "rejudge" not in line]
    write_jsonl(folder / "outcomes.jsonl", rows)
    if stage == "planned":
        return
    run.record(rows)


def legacy(run: CliRun) -> None:
    """The files an older collector saved: OUT, its sidecar, its inputs."""
    rows = read_jsonl(run.inputs)
    results = run.out.parent
    results.mkdir(parents=True)
    shutil.copyfile(run.inputs, results / MATERIALIZED)
    keys = [
        {k: row[k] for k in ("_ng_task_index", "_ng_rollout_index")} for row in rows
    ]
    done = [outcome(key) for key in keys]
    write_jsonl(run.out, [row for row in done if "_ng_failure_class" not in row])
    failures = [{**row, "reward": 0.0} for row in done if "_ng_failure_class" in row]
    write_jsonl(results / COLLECTOR[1], failures)


# -- the command line, in process, as the next command -----------------------------


def invoke(*args: Any) -> Result:
    """``rollout-ledger ARGS`` in this process; a traceback fails the test."""
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def recovers_or_names_the_command(result: Result, what: str) -> bool:
    """Exit 0, or a refusal (3, 4, 5) naming the command that recovers."""
    if result.exit_code == 0:
        return True
    assert result.exit_code in (3, 4, 5), (what, result.exit_code, result.output)
    assert "Traceback" not in result.stderr, (what, result.stderr)
    assert "rollout-ledger " in result.stderr, (
        f"{what}: refused without naming the command that recovers: {result.stderr}"
    )
    return False


def verified(out: Path, what: str) -> None:
    result = invoke("verify", out)
    assert result.exit_code == 0, (what, result.output)


def returned_appends_present(traced: Traced, files: Files, what: str) -> int:
    """Every append to the run's log that returned before the kill is there."""
    mine = [(seq, h) for db, seq, h in traced.appended if Path(db) == files.db]
    if not mine:
        return 0
    store = SQLiteStore.open(files.db, writable=False)
    try:
        for seq, digest in mine:
            assert store.hash_at(seq) == bytes.fromhex(digest), (what, seq)
    finally:
        store.close()
    return len(mine)


def kept_their_bytes(before: dict[str, bytes], after: dict[str, bytes], what: str):
    """Every collector file still starts with every byte it held."""
    for name, data in before.items():
        assert name in after, (what, f"{name} is gone")
        assert after[name][: len(data)] == data, (what, f"{name} lost bytes")


def attempts_recorded_once(files: Files, what: str) -> None:
    keys: Counter[tuple[int, int, int]] = Counter()
    for name in COLLECTOR:
        path = files.out.parent / name
        if path.exists():
            for row in read_jsonl(path):
                keys[
                    row["_ng_task_index"],
                    row["_ng_rollout_index"],
                    row.get("_ng_attempt_index", 0),
                ] += 1
    assert keys, what
    assert max(keys.values()) == 1, (what, keys)


def failure(what: str, exc: Exception) -> str:
    """One broken promise, for the test's report (with where a traceback arose)."""
    where = ""
    if not isinstance(exc, AssertionError):
        frames = traceback.extract_tb(exc.__traceback__)[-3:]
        where = "".join(f"\n      at {f.filename}:{f.lineno} {f.line}" for f in frames)
    return f"{what}:\n    {type(exc).__name__}: {str(exc)[:600]}{where}"


# -- the commands: how each is run, and what must hold after its kill -----------------


@dataclass(frozen=True)
class Command:
    name: str
    stage: str
    args: Callable[[Files], list[Any]]
    after: Callable[[Files, Traced, dict[str, bytes], str], None]
    appends: bool = False  # appends to the run's own log (not a new one)


def _after_create(files: Files, traced: Traced, before: dict, what: str) -> None:
    assert set(files.collector()) <= {MATERIALIZED}, what  # no OUT, no sidecar
    rerun = invoke("create", files.out, *_create_args(files)[2:])
    recovers_or_names_the_command(rerun, what)
    resume = invoke(
        "resume", files.out, *files.config_args(), "--plan-out", files.folder / "p"
    )
    assert resume.exit_code == 0, (what, "resume after create", resume.output)
    verified(files.out, what)
    inputs = read_jsonl(files.folder / "rows.jsonl")
    assert len(read_jsonl(files.out.parent / MATERIALIZED)) == len(inputs), what


def _create_args(files: Files) -> list[Any]:
    inputs = files.folder / "rows.jsonl"
    return ["create", files.out, "--inputs", inputs, *files.config_args()]


def _resume_args(files: Files) -> list[Any]:
    plan = files.folder / "plan.jsonl"
    return ["resume", files.out, *files.config_args(), "--plan-out", plan]


def _after_resume(files: Files, traced: Traced, before: dict, what: str) -> None:
    assert files.collector() == before, what
    rerun = invoke(*_resume_args(files))
    if recovers_or_names_the_command(rerun, what):
        assert read_jsonl(files.folder / "plan.jsonl"), what
    verified(files.out, what)
    assert files.collector() == before, what


def _record_args(files: Files) -> list[Any]:
    return ["record", files.out, files.folder / "outcomes.jsonl"]


def whole_lines(found: dict[str, bytes]) -> dict[str, bytes]:
    """Each file up to its last newline: what a torn-tail repair may not cut."""
    return {name: data[: data.rfind(b"\n") + 1] for name, data in found.items()}


def _after_record(files: Files, traced: Traced, before: dict, what: str) -> None:
    kept_their_bytes(before, files.collector(), what)
    killed = whole_lines(files.collector())  # rows the killed record wrote
    # The next command is resume, as a collector continues; its refusal of
    # rows without events (exit 3) is what a killed record must not leave.
    resume = invoke(*_resume_args(files))
    assert resume.exit_code == 0, (what, "resume after record", resume.output)
    verified(files.out, what)
    # Recording the same file again records nothing twice.
    rerun = invoke(*_record_args(files))
    assert rerun.exit_code in (0, 3), (what, rerun.output)
    resume = invoke(*_resume_args(files))
    assert resume.exit_code == 0, (what, "resume after record", resume.output)
    verified(files.out, what)
    kept_their_bytes(killed, files.collector(), what)
    attempts_recorded_once(files, what)


def _import_args(files: Files) -> list[Any]:
    return ["import", files.out, "--quiet"]


def _after_import(files: Files, traced: Traced, before: dict, what: str) -> None:
    assert files.collector() == before, what
    rerun = invoke(*_import_args(files))
    recovers_or_names_the_command(rerun, what)
    resume = invoke(*_resume_args(files), "--allow-unsafe")
    assert resume.exit_code == 0, (what, "resume after import", resume.output)
    verified(files.out, what)
    assert files.collector() == before, what


def _export_args(files: Files) -> list[Any]:
    return ["export", files.out, "--files", files.copy, "--quiet"]


def _after_export(files: Files, traced: Traced, before: dict, what: str) -> None:
    assert files.collector() == before, what
    head = invoke("head", files.out)
    assert head.exit_code == 0, (what, head.output)
    rerun = invoke(*_export_args(files))
    if rerun.exit_code != 0:
        # A refusal names the folder to remove (exit 3) or the command.
        assert rerun.exit_code in (3, 5), (what, rerun.exit_code, rerun.output)
        assert "Traceback" not in rerun.stderr, (what, rerun.stderr)
        assert str(files.copy) in rerun.stderr, (what, rerun.stderr)
        shutil.rmtree(files.copy)
        again = invoke(*_export_args(files))
        assert again.exit_code == 0, (what, again.output)
    copied = files.copy / "rollouts.jsonl"
    verified(copied, what)
    assert invoke("head", copied).stdout == head.stdout, what
    assert files.collector() == before, what
    verified(files.out, what)


COMMANDS = {
    "create": Command("create", "inputs", _create_args, _after_create),
    "resume": Command("resume", "created", _resume_args, _after_resume, True),
    "record": Command("record", "planned", _record_args, _after_record, True),
    "import": Command("import", "legacy", _import_args, _after_import),
    "export --files": Command("export", "recorded", _export_args, _after_export),
}


@pytest.fixture(scope="module")
def stages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each starting run, built once through the command line."""
    made: dict[str, Path] = {}
    for stage in ("inputs", "created", "planned", "recorded", "legacy"):
        made[stage] = tmp_path_factory.mktemp(f"stage-{stage}")
        build(made[stage], stage)
    return made


def fresh(stage: Path, folder: Path) -> Files:
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(stage, folder)
    return Files(folder)


@pytest.mark.parametrize("command", COMMANDS)
def test_r_1_ev_12_sigkill_at_each_system_call_then_the_next_command_recovers(
    command: str, stages: dict[str, Path], tmp_path: Path
) -> None:
    """R-1, EV-11, EV-12, REC-70, SC-5: SIGKILL at each state-changing call."""
    strace()
    spec = COMMANDS[command]
    folder = tmp_path / "run"
    files = fresh(stages[spec.stage], folder)
    before = files.collector()
    whole = run_traced(spec.args(files), tmp_path)
    assert whole.returncode == 0, (command, whole.stderr)
    points = kill_points(whole.trace, folder)
    assert len(points) > 0, f"{command}: no state-changing system call traced"
    synced = [p for p in points if p.name in ("fsync", "fdatasync")]
    assert synced, f"{command}: traced no sync, so the trace missed its writes"
    trials = chosen(points, BUDGET)

    def kill(index: int) -> tuple[Files, Traced]:
        trial = fresh(stages[spec.stage], tmp_path / f"t{index:04d}")
        work = tmp_path / f"w{index:04d}"
        work.mkdir()
        return trial, run_traced(spec.args(trial), work, kill=trials[index])

    # The killed commands run side by side; what follows each, one at a time.
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        killed = list(pool.map(kill, range(len(trials))))
    failures: list[str] = []
    returned = 0
    for point, (files, traced) in zip(trials, killed, strict=True):
        what = f"{command} killed at {point}"
        killed_at(traced, point, files.folder)
        try:
            returned += returned_appends_present(traced, files, what)
            spec.after(files, traced, before, what)
            returned_appends_present(traced, files, f"{what}, after the next command")
        except Exception as exc:  # an assertion, or a traceback of the command
            failures.append(failure(what, exc))
        shutil.rmtree(files.folder)
    print(
        f"{command}: {len(points)} kill points, {len(trials)} run, {returned} appends"
    )
    if spec.appends:  # some kills came after an append had returned
        assert returned > 0, command
    assert len(trials) > 0
    assert not failures, (
        f"{len(failures)} of {len(trials)} kill points of {command} "
        f"({len(points)} traced) broke a promise:\n" + "\n".join(failures)
    )


# -- disk full, on a real small filesystem --------------------------------------------


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs mounted for the test (root only), unmounted after."""
    with small_disk(tmp_path, 16 * 1024) as mount:
        yield mount


PAGE = 4096  # tmpfs allocates whole pages
MAX_FILL_LEVELS = 256


def free_bytes(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def fill(mount: Path, leave: int) -> Path:
    """Fill ``mount`` up to ``leave`` free bytes with one file; returns it."""
    filler = mount / "filler"
    with filler.open("wb") as handle:
        chunk = b"\0" * (1 << 20)
        while (room := free_bytes(mount) - leave) > 0:
            try:
                handle.write(chunk[: min(len(chunk), room)])
                handle.flush()
            except OSError:
                break
    assert free_bytes(mount) <= max(leave, 0) + 4096
    return filler


@pytest.mark.parametrize("command", COMMANDS)
def test_ev_11_disk_full_exits_plainly_and_the_next_command_recovers(
    command: str, stages: dict[str, Path], small_fs: Path
) -> None:
    """EV-11, REC-70, SC-5 (issue 18): ENOSPC at several fill levels of a tmpfs.

    The levels: no space free, then one more page at a time until the
    command succeeds. Each level: the command exits 0 or refuses (3 or 5)
    with a plain message naming a path of the run, no traceback; what exited
    0 verifies; with the space freed, the same command (or, after a refusal
    naming the folder, the command again on a clean folder) succeeds and
    ``verify`` passes; the collector's files keep every byte.
    """
    spec = COMMANDS[command]
    folder = small_fs / "run"
    before = fresh(stages[spec.stage], folder).collector()
    full = 0
    failures: list[str] = []
    for leave in range(0, MAX_FILL_LEVELS * PAGE, PAGE):
        files = fresh(stages[spec.stage], folder)
        filler = fill(small_fs, leave)
        what = f"{command} with {leave} bytes free"
        try:
            result = invoke(*spec.args(files))
            if result.exit_code != 0:
                full += 1
                assert result.exit_code in (3, 5), (
                    what,
                    result.exit_code,
                    result.output,
                )
                assert "Traceback" not in result.output, (what, result.output)
                assert str(small_fs) in result.stderr, (what, result.stderr)
            filler.unlink()
            if result.exit_code == 0:  # what it made is whole
                made = (
                    files.copy / "rollouts.jsonl"
                    if command == "export --files"
                    else files.out
                )
                verified(made, what)
            spec.after(files, Traced(0, "", "", "", []), before, what)
        except Exception as exc:  # an assertion, or a traceback of the command
            failures.append(failure(what, exc))
        finally:
            filler.unlink(missing_ok=True)
        if result.exit_code == 0:
            break
    else:
        pytest.fail(f"{command} did not succeed with {MAX_FILL_LEVELS} pages free")
    assert full > 0, f"{command}: no fill level made the command fail"
    assert not failures, (
        f"{len(failures)} of {leave // PAGE + 1} fill levels of {command} broke a "
        "promise:\n" + "\n".join(failures)
    )


# -- a lost lock: the lock file removed, the PostgreSQL lock session ended ------------

HOLDER = """
import json, sys
from ledger import Ledger, LedgerError, RunLock

out, plan = sys.argv[1], [json.loads(line) for line in open(sys.argv[2])]
lock = RunLock(out).acquire()
led = Ledger.open(out, lock=lock)
print("ready", flush=True)
for line in sys.stdin:
    try:
        led.reserve(plan[int(line)])
    except LedgerError as exc:
        print("refused", type(exc).__name__, str(exc).replace("\\n", " "), flush=True)
    else:
        print("reserved", led.head()[0], flush=True)
"""


class Holder:
    """A collector in another process holding the run lock, reserving on request."""

    def __init__(self, out: str, plan: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, out, str(plan)],
            cwd=Path(__file__).resolve().parents[1],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.answer() == "ready"

    def answer(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line:
            assert self.proc.stderr is not None
            self.proc.kill()
            pytest.fail(f"the holder died: {self.proc.stderr.read()[-2000:]}")
        return line

    def reserve(self, index: int) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{index}\n")
        self.proc.stdin.flush()
        return self.answer()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


def head_of(out: str | Path) -> int:
    result = invoke("head", out)
    assert result.exit_code == 0, result.output
    return int(result.stdout.split()[0])


def actors_after(out: str | Path, seq: int) -> list[tuple[int, str, str]]:
    result = invoke("export", out)
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines()]
    return [(e["seq"], e["kind"], e["actor"]) for e in events if e["seq"] > seq]


def one_owner_at_a_time(
    holder: Holder, out: str | Path, resume_args: list[Any]
) -> None:
    """Once its lock is gone the holder appends nothing; a second owner is alone.

    ``resume_args`` is the second owner's command: it proceeds (exit 0) or
    finds the lock held (exit 4); either way the holder, asked to reserve
    after it, refuses, and the log holds no reservation of the holder after
    the lock was lost.
    """
    lost_at = head_of(out)
    answer = holder.reserve(1)
    assert answer.startswith("refused"), (
        f"the holder appended after losing its lock: {answer}"
    )
    assert "lock" in answer, answer
    assert head_of(out) == lost_at
    second = invoke(*resume_args)
    assert second.exit_code in (0, 4), second.output
    answer = holder.reserve(2)
    assert answer.startswith("refused"), f"two owners at once: {answer}"
    assert [e for e in actors_after(out, lost_at) if e[1] == "attempt_reserved"] == []
    verified(out, "after a lost lock")


def test_lock_1_a_removed_lock_file_stops_its_holder_before_it_appends(
    stages: dict[str, Path], tmp_path: Path
) -> None:
    """Issue 18: the lock file removed while a collector holds it.

    The holder notices before its next append and stops (refuses, naming the
    lock); a second collector never runs beside it.
    """
    files = fresh(stages["planned"], tmp_path / "run")
    holder = Holder(str(files.out), files.folder / "plan1.jsonl")
    try:
        assert holder.reserve(0).startswith("reserved")
        (files.out.parent / "rollouts_ledger" / "run.lock").unlink()
        one_owner_at_a_time(holder, files.out, _resume_args(files))
    finally:
        holder.stop()


def test_sc_4_a_terminated_lock_session_stops_the_coordinator_before_it_appends(
    stages: dict[str, Path], tmp_path: Path, pg_url: str, pg_admin: Any
) -> None:
    """SC-4, issue 18: the coordinator's PostgreSQL lock session is terminated.

    The server lets the advisory lock go with the session; the coordinator
    notices before its next append and stops, and a second coordinator
    never runs beside it.
    """
    files = fresh(stages["inputs"], tmp_path / "run")
    url = f"{pg_url}?run=fault-harness"
    inputs = files.folder / "rows.jsonl"
    created = invoke("create", url, "--inputs", inputs, *files.config_args())
    assert created.exit_code == 0, created.output
    plan = files.folder / "plan1.jsonl"
    resumed = invoke("resume", url, *files.config_args(), "--plan-out", plan)
    assert resumed.exit_code == 0, resumed.output
    holder = Holder(url, plan)
    try:
        assert holder.reserve(0).startswith("reserved")
        sessions = pg_admin.execute(
            "SELECT pid FROM pg_locks JOIN pg_database d ON d.oid = database"
            " WHERE locktype = 'advisory' AND granted"
            " AND d.datname = current_database()"
        ).fetchall()
        assert len(sessions) == 1, sessions
        pg_admin.execute("SELECT pg_terminate_backend(%s)", (sessions[0][0],))
        resume_args = ["resume", url, *files.config_args(), "--plan-out", plan]
        one_owner_at_a_time(holder, url, resume_args)
    finally:
        holder.stop()
