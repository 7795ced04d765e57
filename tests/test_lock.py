"""EV-40..EV-42 and R-2: one owner per run, a stable lock file, no nesting."""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ledger import (
    Ledger,
    LedgerError,
    LockHeld,
    LockLost,
    Refused,
    RunLock,
    RunManifest,
    doctor,
)
from ledger.events import FailureBudgetReset
from tests.test_identity import nemo_configuration

HOLD = textwrap.dedent(
    """
    import sys, time
    from ledger import RunLock
    lock = RunLock(sys.argv[1], checkpoint_dir=sys.argv[2] or None).acquire()
    print("held", flush=True)
    time.sleep(float(sys.argv[3]))
    """
)

RACE = textwrap.dedent(
    """
    import sys, time
    from ledger import LockHeld, RunLock
    start = float(sys.argv[2])
    while time.time() < start:
        pass
    try:
        lock = RunLock(sys.argv[1]).acquire()
    except LockHeld as exc:
        print("held-by-other", exc.holder, flush=True)
        sys.exit(4)
    print("owner", flush=True)
    time.sleep(1.0)
    """
)


def start_holder(out: Path, *, checkpoint: Path | None = None, seconds: float = 30):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out), str(checkpoint or ""), str(seconds)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_ev_40_a_second_owner_gets_lock_held_naming_pid_host_and_start(
    tmp_path: Path,
) -> None:
    out = tmp_path / "r.jsonl"
    holder = start_holder(out)
    try:
        with pytest.raises(LockHeld) as caught:
            RunLock(out).acquire()
        assert f"pid {holder.pid}" in str(caught.value)
        assert " on host " in str(caught.value)
        assert " since " in str(caught.value)
        assert caught.value.path == str(tmp_path / "r_ledger" / "run.lock")
    finally:
        holder.kill()
        holder.communicate()


def test_ev_41_a_lock_left_by_a_killed_process_does_not_block(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    holder = start_holder(out)
    os.kill(holder.pid, signal.SIGKILL)
    holder.communicate()
    lock_file = tmp_path / "r_ledger" / "run.lock"
    inode = lock_file.stat().st_ino
    with RunLock(out) as lock:
        assert lock.held
        assert f"pid {os.getpid()}" in lock_file.read_text()
    assert lock_file.stat().st_ino == inode  # never unlinked, never replaced


def test_r_2_two_processes_race_and_exactly_one_owns_the_run(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    RunLock(out).acquire().release()  # the folder exists; both race on flock alone
    start = time.time() + 0.5
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, str(out), str(start)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=30)[0] for proc in procs]
    assert sorted(proc.returncode for proc in procs) == [0, 4], outputs
    assert sum(line.startswith("owner") for line in outputs) == 1


def test_ev_40_checkpoint_folder_is_locked_too(tmp_path: Path) -> None:
    checkpoint = tmp_path / "ckpt"
    holder = start_holder(tmp_path / "a.jsonl", checkpoint=checkpoint)
    try:
        # Another output may not share the checkpoint folder ...
        with pytest.raises(LockHeld, match=r"\.collector\.lock"):
            RunLock(tmp_path / "b.jsonl", checkpoint_dir=checkpoint).acquire()
        # ... and a failed acquisition leaves no lock of its own behind.
        with RunLock(tmp_path / "b.jsonl") as lock:
            assert lock.held
    finally:
        holder.kill()
        holder.communicate()


def test_ev_41_locks_do_not_nest_in_one_process(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    with RunLock(out) as lock:
        with pytest.raises(LockHeld, match="do not nest"):
            RunLock(out).acquire()
        with pytest.raises(LockHeld, match="do not nest"):
            lock.acquire()
    with RunLock(out):  # released: it may be taken again
        pass


def test_ev_41_the_lock_file_is_never_opened_through_a_symlink(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    (tmp_path / "r_ledger").mkdir()
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious\n")
    (tmp_path / "r_ledger" / "run.lock").symlink_to(target)
    with pytest.raises(LedgerError, match="symbolic link"):
        RunLock(out).acquire()
    assert target.read_text() == "precious\n"


def test_ev_40_the_lock_creates_the_ledger_folder(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "r.jsonl"
    with RunLock(out):
        assert (tmp_path / "deep" / "r_ledger" / "run.lock").is_file()


# -- a lock file removed or replaced under its holder (issue 18, "two owners") --------


def test_ev_40_a_removed_lock_file_still_refuses_a_second_owner(tmp_path: Path) -> None:
    """EV-40: the holder locks the ledger folder too; a new lock file lets nobody in."""
    out = tmp_path / "r.jsonl"
    lock_file = tmp_path / "r_ledger" / "run.lock"
    holder = start_holder(out)
    try:
        lock_file.unlink()
        for attempt in range(2):  # the first refused owner left a new, empty file
            with pytest.raises(LockHeld) as caught:
                RunLock(out).acquire()
            assert f"pid {holder.pid} on host " in str(caught.value), attempt
            assert "removed or replaced" in str(caught.value)
            assert "that collector stops before it appends again" in str(caught.value)
            assert lock_file.read_bytes() == b""  # a refused owner writes no line
        # doctor names the holder and what happened to its file
        check = {c.name: c for c in doctor(out).checks}["run lock"]
        assert not check.ok
        assert f"held by pid {holder.pid} on this host" in check.detail
        assert "removed or replaced" in check.detail
    finally:
        holder.kill()
        holder.communicate()
    with RunLock(out) as lock:  # its holder gone, the run is free again
        assert lock.held
        assert f"pid {os.getpid()}" in lock_file.read_text()


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_ev_40_a_holder_notices_its_lock_file_went_and_stays_stopped(
    tmp_path: Path, how: str
) -> None:
    """EV-40: ``check`` compares the path with the held file; once lost, lost."""
    out = tmp_path / "r.jsonl"
    lock_file = tmp_path / "r_ledger" / "run.lock"
    with RunLock(out) as lock:
        lock.check()  # held and in place: nothing to say
        if how == "removed":
            lock_file.unlink()
        else:
            other = tmp_path / "r_ledger" / "other"
            other.write_text("pid 1 on host elsewhere since 2026-01-01T00:00:00Z\n")
            os.replace(other, lock_file)
        with pytest.raises(LockLost) as caught:
            lock.check()
        message = str(caught.value)
        assert f"the lock file {lock_file} was {how} while this process held" in (
            message
        )
        assert "appended nothing more" in message
        assert "rollout-ledger resume" in message
        assert caught.value.exit_code == 4
        with pytest.raises(LockHeld, match="do not nest"):  # still its folder's
            RunLock(out).acquire()
        # A file put back in its place is not the file this holder locked.
        if how == "removed":
            lock_file.write_text("")
        with pytest.raises(LockLost):
            lock.check()
    # Released, the lock is taken again, on the file now in place.
    with RunLock(out) as again:
        again.check()
        assert f"pid {os.getpid()}" in lock_file.read_text()


def test_ev_42_where_a_folder_cannot_be_locked_the_file_lock_and_its_check_remain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EV-42: NFS emulates flock with byte-range locks, which a folder cannot take
    (EBADF): the lock is still taken on the file, the holder still stops when the
    file goes, and ``doctor`` says what is missing."""
    real = fcntl.flock
    refused: list[int] = []

    def nfs_like(fd: int, operation: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            refused.append(fd)
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        real(fd, operation)

    monkeypatch.setattr(fcntl, "flock", nfs_like)
    out = tmp_path / "r.jsonl"
    with RunLock(out) as lock:
        assert refused  # the folder was tried, and its refusal tolerated
        (tmp_path / "r_ledger" / "run.lock").unlink()
        with pytest.raises(LockLost, match="was removed"):
            lock.check()
    check = doctor(out).checks[0]
    assert check.ok  # files are locked across processes here ...
    assert "a folder cannot be locked here" in check.detail  # ... folders are not


def test_ev_40_create_under_a_lost_lock_creates_nothing(tmp_path: Path) -> None:
    """EV-40: a holder that lost its lock file before the run exists makes no run."""
    config, global_config, rows = nemo_configuration()
    manifest = RunManifest.create(None, rows, config, global_config)
    out = tmp_path / "r.jsonl"
    with RunLock(out) as lock:
        (tmp_path / "r_ledger" / "run.lock").unlink()
        with pytest.raises(LockLost, match="was removed"):
            Ledger.create(out, manifest, rows, lock=lock)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["r_ledger"]


def test_ev_40_a_writer_whose_lock_was_released_appends_nothing(tmp_path: Path) -> None:
    """EV-40: appends need the lock held; a released one refuses them (exit 3)."""
    config, global_config, rows = nemo_configuration()
    manifest = RunManifest.create(None, rows, config, global_config)
    out = tmp_path / "r.jsonl"
    lock = RunLock(out).acquire()
    with Ledger.create(out, manifest, rows, lock=lock) as led:
        lock.release()
        head = led.head()
        with pytest.raises(Refused, match="was released"):
            led.append(FailureBudgetReset(excluded_lines=0, before_seq=1, reason="x"))
        assert led.head() == head
