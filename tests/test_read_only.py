"""A run we cannot write is read by every reader (issue 18; EV-12, CLI-1, R-5).

An archived run sits on a read-only filesystem, or in a folder owned by another
user: reading it never needs write access. Every reader gives the output it
gives on a writable copy of the same run, exit 0 (``check``: its verdict);
nothing is written (the files stay byte-identical, no ``-shm`` or ``-wal``
appears); a command that records is refused in plain words, exit 3, never as
damaged saved work.

The read-only filesystem is a real one: a read-only bind mount, since the suite
runs as root and root ignores permission bits (skipped with the reason when
mounting is not possible). Another user's run is read by a forked child that
drops to uid/gid 65534 over root-owned files of mode 0644 in folders of 0755.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli import main
from tests.test_cli_support import (
    ACTOR,
    CliRun,
    Templates,
    by_key,
    failed,
    templates,
)

__all__ = ["templates"]

NOBODY = 65534
MIXED = {
    (0, 1): failed("session_lost", answer=True),  # held until approved
    (2, 1): failed("session_lost"),  # counted, retried
}


def build(run: CliRun) -> None:
    run.create()
    run.collect(by_key(MIXED))
    run.collect(by_key({}))


def readers(run: CliRun) -> list[tuple[object, ...]]:
    """Every command that reads a run, with the options it needs."""
    config = run.config_args()
    return [
        ("status", run.out),
        ("status", run.out, "--json"),
        ("verify", run.out),
        ("history", run.out),
        ("history", run.out, "--json"),
        ("head", run.out),
        ("export", run.out),
        ("results", run.out),
        ("check", run.out),
        ("diff-config", run.out, *config),
        ("resume", run.out, "--dry-run", *config),
        # CLI-10: an operator action's preview reads only.
        ("approve", run.out, "--all-held", "--reason", "r", "--dry-run"),
        ("reset-budget", run.out, "--reason", "r", "--dry-run", "--json"),
        ("extend-attempts", run.out, 5, "--reason", "r", "--dry-run"),
        ("policy", run.out, "--set", "max_free_attempts=3", "--reason", "r",
         "--dry-run"),
        ("head", run.out, "--json"),
        ("verify", run.out, "--json"),
    ]  # fmt: skip


def writers(run: CliRun) -> list[tuple[object, ...]]:
    """Commands that record: each needs the run lock, in the run's folder."""
    return [
        ("resume", run.out, *run.config_args()),
        ("approve", run.out, "--task", 0, "--rollout", 1, "--attempt", 0,
         "--reason", "checked by hand"),
        ("reset-budget", run.out, "--reason", "new week"),
        ("extend-attempts", run.out, 5, "--reason", "more"),
        ("policy", run.out, "--set", "max_free_attempts=3", "--reason", "more"),
        ("status", run.out, "--publish"),
    ]  # fmt: skip


def invoke(run: CliRun, *args: object) -> Result:
    return CliRunner().invoke(
        main, [str(arg) for arg in args], obj={"clock": run.clock, "actor": ACTOR}
    )


def settle(run: CliRun) -> None:
    """The run as a clean close leaves it: no ``-wal`` or ``-shm`` (checkpointed)."""
    db = run.ledger_dir / "ledger.db"
    sqlite3.connect(db).close()  # the last connection checkpoints and removes them
    assert not Path(f"{db}-wal").exists()
    assert not Path(f"{db}-shm").exists()


def leave_wal_index(run: CliRun) -> None:
    """An empty ``-wal`` and a ``-shm`` beside it, as a last read-only reader leaves."""
    db = run.ledger_dir / "ledger.db"
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    conn.execute("SELECT count(*) FROM events").fetchone()
    conn.close()
    assert Path(f"{db}-shm").exists()


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every file and folder below ``folder``, with its bytes."""
    return {
        str(path.relative_to(folder)): path.read_bytes() if path.is_file() else None
        for path in sorted(folder.rglob("*"))
    }


def normalized(result: Result, folder: Path) -> tuple[int, str]:
    return result.exit_code, unproved(result.output, folder)


def unproved(output: str, folder: Path) -> str:
    """``output`` with the run's folder named alike, and what verify says of
    keeping its proof left out (issue 30: a folder it cannot write keeps none)."""
    lines = output.replace(str(folder), "<run>").splitlines(keepends=True)
    kept = ("kept what was proved", "could not keep what was proved")
    lines = [x for x in lines if not x.startswith(kept)]
    return re.sub(r'"proof": "[^"]*"', '"proof": null', "".join(lines))


def mount_read_only(source: Path, target: Path) -> None:
    """``target``: ``source`` bind-mounted read-only; skips when it cannot be."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a read-only bind mount needs root and mount(8)")
    target.mkdir()
    for command in (
        ["mount", "--bind", str(source), str(target)],
        ["mount", "-o", "remount,bind,ro", str(target)],
    ):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            if command[1] == "-o":
                subprocess.run(["umount", str(target)], check=False)
            pytest.skip(f"cannot mount here ({' '.join(command)}): {done.stderr}")
    try:
        (target / "probe").write_bytes(b"")
    except OSError:
        return
    subprocess.run(["umount", str(target)], check=False)
    raise AssertionError(f"{target} is writable after the read-only remount")


@pytest.fixture
def copies(
    tmp_path: Path, templates: Templates
) -> Callable[[Path, Callable[[CliRun], None]], CliRun]:
    def make(folder: Path, prepare: Callable[[CliRun], None]) -> CliRun:
        folder.mkdir()
        run = templates("read-only", folder, build)
        prepare(run)
        return run

    return make


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Callable[[CliRun], CliRun]]:
    mounts: list[Path] = []

    def make(run: CliRun) -> CliRun:
        target = tmp_path / f"mount{len(mounts)}"
        mount_read_only(run.folder, target)
        mounts.append(target)
        seen = copy.copy(run)  # the same run, seen through the mount
        seen.folder = target
        seen.config = target / run.config.name
        seen.servers = target / run.servers.name
        seen.inputs = target / run.inputs.name
        seen.out = target / run.out.relative_to(run.folder)
        return seen

    yield make
    for target in reversed(mounts):
        # Lazily: a failed test's traceback may still hold a file open there.
        subprocess.run(["umount", "--lazy", str(target)], check=False)


PREPARED = {"closed cleanly": settle, "with its -shm left": leave_wal_index}


@pytest.mark.parametrize("prepare", PREPARED.values(), ids=PREPARED.keys())
def test_every_reader_reads_a_run_on_a_read_only_filesystem(
    tmp_path: Path,
    copies: Callable[[Path, Callable[[CliRun], None]], CliRun],
    mounted: Callable[[CliRun], CliRun],
    prepare: Callable[[CliRun], None],
) -> None:
    """EV-12: a reader modifies nothing and needs no write access; R-5: no traceback."""
    reference = copies(tmp_path / "ref", prepare)
    source = copies(tmp_path / "src", prepare)
    run = mounted(source)
    before = snapshot(source.folder)
    compared = 0
    for ref_args, args in zip(readers(reference), readers(run), strict=True):
        expected = normalized(invoke(reference, *ref_args), reference.folder)
        got = invoke(run, *args)
        assert "Traceback" not in got.output, (args[0], got.output)
        assert normalized(got, run.folder) == expected, args
        assert got.exit_code == 0 or args[0] == "check", (args, got.output)
        compared += 1
    assert compared == len(readers(run)) > 0
    # Outputs written elsewhere: a copy of the run, the results, the log.
    copy = tmp_path / "copy"
    for args in (
        ("export", run.out, "--files", copy),
        ("results", run.out, "-o", tmp_path / "results.jsonl"),
        ("export", run.out, "-o", tmp_path / "events.jsonl"),
    ):
        written = invoke(run, *args)
        assert written.exit_code == 0, (args, written.output)
    assert invoke(run, "verify", copy / "rollouts.jsonl").exit_code == 0
    assert (tmp_path / "results.jsonl").read_bytes() == invoke(
        reference, "results", reference.out
    ).stdout_bytes
    doctor = invoke(run, "doctor", run.out)
    assert doctor.exit_code == 0, doctor.output
    assert "read-only filesystem" in doctor.output
    assert "journal mode: wal" in doctor.output
    assert snapshot(source.folder) == before  # nothing written, nothing created


def test_a_writer_of_a_read_only_run_is_refused_in_plain_words(
    tmp_path: Path,
    copies: Callable[[Path, Callable[[CliRun], None]], CliRun],
    mounted: Callable[[CliRun], CliRun],
) -> None:
    """A command that records refuses, exit 3, naming why; never 'corrupt' (CLI-1)."""
    source = copies(tmp_path / "src", settle)
    run = mounted(source)
    before = snapshot(source.folder)
    refused = 0
    for args in writers(run):
        result = invoke(run, *args)
        assert result.exit_code == 3, (args, result.output)
        assert "read-only filesystem" in result.stderr, (args, result.stderr)
        assert "copy its folder" in result.stderr
        assert "corrupt" not in result.output.lower()
        assert "Traceback" not in result.output
        refused += 1
    assert refused == len(writers(run)) > 0
    assert snapshot(source.folder) == before


def test_commits_sqlite_cannot_read_without_write_access_are_named(
    tmp_path: Path,
    copies: Callable[[Path, Callable[[CliRun], None]], CliRun],
    mounted: Callable[[CliRun], CliRun],
) -> None:
    """A ``-wal`` with commits but no ``-shm``: refused with what to do, not misread.

    Reading it ``immutable`` would show the run without those commits; SQLite
    can index them only by creating the ``-shm`` beside them.
    """

    def commits_in_wal(run: CliRun) -> None:
        db = run.ledger_dir / "ledger.db"
        held = sqlite3.connect(db)
        try:
            held.execute("SELECT count(*) FROM events").fetchone()
            run.ok("reset-budget", run.out, "--reason", "kept in the wal")
            shutil.copy(f"{db}-wal", tmp_path / "wal")
            shutil.copy(db, tmp_path / "db")
        finally:
            held.close()
        shutil.copy(tmp_path / "db", db)
        shutil.copy(tmp_path / "wal", f"{db}-wal")
        assert Path(f"{db}-wal").stat().st_size > 0

    source = copies(tmp_path / "src", commits_in_wal)
    run = mounted(source)
    before = snapshot(source.folder)
    for command in ("status", "verify", "head"):
        result = invoke(run, command, run.out)
        assert result.exit_code == 5, result.output
        assert "ledger.db-wal" in result.stderr
        assert "copy the run's folder" in result.stderr
        assert "Traceback" not in result.output
    assert snapshot(source.folder) == before


# -- another user's run -------------------------------------------------------------


Calls = list[tuple[CliRun, tuple[object, ...]]]


def _as_nobody(warm: Calls, calls: Calls) -> list[list[object]]:
    """Each ``(run, args)`` of ``calls`` invoked in a child running as uid 65534.

    The child first runs the ``warm`` calls as root on another copy: this
    test's interpreter lives in a folder only root may enter, so every module
    a command imports is loaded before the child drops its privileges.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(read_end)
            results = []
            for run, args in warm:
                invoke(run, *args)  # imports, as root, on another copy
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            for run, args in calls:
                got = invoke(run, *args)
                results.append([got.exit_code, got.stdout, got.stderr])
            os.write(write_end, json.dumps(results).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return json.loads(data)  # type: ignore[no-any-return]


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder any user may enter (pytest's own is root's alone)."""
    if os.geteuid() != 0:
        pytest.skip("reading as another user needs root to switch users")
    folder = Path(tempfile.mkdtemp(prefix="rollout-ledger-other-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


def test_every_reader_reads_a_run_owned_by_another_user(
    tmp_path: Path,
    open_folder: Path,
    copies: Callable[[Path, Callable[[CliRun], None]], CliRun],
) -> None:
    """Files 0644 and folders 0755 owned by root, read as uid 65534 (EV-12)."""
    reference = copies(tmp_path / "ref", settle)
    warm = copies(tmp_path / "warm", settle)
    run = copies(open_folder / "run", settle)
    for path in [run.folder, *run.folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    before = snapshot(run.folder)
    calls = [(run, args) for args in [*readers(run), *writers(run)]]
    warmed = [(warm, args) for args in [*readers(warm), *writers(warm)]]
    results = _as_nobody(warmed, calls)
    assert len(results) == len(calls) > 0
    count = len(readers(run))
    for (code, stdout, stderr), ref_args, args in zip(
        results[:count], readers(reference), readers(run), strict=True
    ):
        expected = invoke(reference, *ref_args)
        assert "Traceback" not in stdout + stderr, (args, stderr)
        assert code == expected.exit_code, (args, stderr)
        assert code == 0 or args[0] == "check", (args, stderr)
        assert unproved(stdout, run.folder) == unproved(
            expected.stdout, reference.folder
        ), args
    for (code, _, stderr), args in zip(results[count:], writers(run), strict=True):
        assert code == 3, (args, stderr)
        assert "not writable by you" in stderr, (args, stderr)
        assert "corrupt" not in stderr.lower()
    assert snapshot(run.folder) == before  # nothing written, no -shm or -wal


def _hot_journal(run: CliRun) -> None:
    """A writer killed mid-transaction: its pages half in ledger.db, a -journal."""
    db = run.ledger_dir / "ledger.db"
    pid = os.fork()
    if pid == 0:  # never returns into pytest
        try:
            conn = sqlite3.connect(db, isolation_level=None)
            conn.execute("PRAGMA cache_size=1")  # spill pages before the commit
            conn.execute("BEGIN")
            for number in range(300):
                conn.execute(
                    "INSERT INTO meta(key, value) VALUES (?, ?)",
                    (f"x{number}", "y" * 2000),
                )
        finally:
            os._exit(0)  # no commit, no rollback: as SIGKILL leaves it
    os.waitpid(pid, 0)
    assert Path(f"{db}-journal").stat().st_size > 0


def test_a_transaction_left_to_roll_back_is_named_not_called_corrupt(
    tmp_path: Path, templates: Templates, mounted: Callable[[CliRun], CliRun]
) -> None:
    """A rollback-journal run with a hot ``-journal``: refused in plain words, exit 5.

    Only a writer may roll it back; reading without that would show half a
    transaction, so a reader that cannot write says what to do instead.
    """
    folder = tmp_path / "src"
    folder.mkdir()

    def build_delete(run: CliRun) -> None:
        run.create("--journal-mode", "delete")
        run.collect(by_key({}))

    source = templates("read-only-delete", folder, build_delete)
    _hot_journal(source)
    run = mounted(source)
    before = snapshot(source.folder)
    for command in ("status", "verify", "history"):
        result = invoke(run, command, run.out)
        assert result.exit_code == 5, (command, result.output)
        assert "ledger.db-journal" in result.stderr, result.stderr
        assert "roll back" in result.stderr
        assert "corrupt" not in result.stderr.lower()
    assert snapshot(source.folder) == before
