"""The fault harness's choice of kill points (``tests/fault_support.py``), on a trace.

R-1's harness (``tests/test_fault_harness.py``) kills a command at each system
call that changes its run's state; these tests pin which traced calls count,
how each is numbered for strace's ``when=``, and what the CI stride keeps.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fault_support import ALL_ENV, chosen, kill_points

RUN = Path("/r")
TRACE = """\
7 openat(AT_FDCWD</w>, "/usr/os.py", O_RDONLY|O_CLOEXEC) = 3</usr/os.py>
7 openat(AT_FDCWD</r>, "/r/run.lock", O_RDWR|O_CREAT, 0666) = 3</r/run.lock>
7 flock(3</r/run.lock>, LOCK_EX|LOCK_NB) = 0
7 write(1<pipe:[9]>, "/r said", 7) = 7
7 write(4</report.txt>, "/r/ledger.db 3 ab", 17) = 17
7 openat(AT_FDCWD</w>, "/r/o.jsonl", O_RDONLY|O_CLOEXEC) = 5</r/o.jsonl>
7 write(5</r/o.jsonl>, "{}\\n", 3) = 3
7 fcntl(6</r/ledger.db>, F_SETLK, {l_type=F_RDLCK}) = 0
7 fcntl(6</r/ledger.db>, F_SETLK, {l_type=F_WRLCK}) = 0
7 pwrite64(7</r/ledger.db-wal>, "x", 1, 0) = 1
7 fdatasync(7</r/ledger.db-wal>) = 0
7 rename("/r/.coverage.json.0a1b2c3d4e5f.tmp", "/r/coverage.json") = 0
8 write(5</r/o.jsonl>, "{}\\n", 3 <unfinished ...>
7 +++ killed by SIGKILL +++
"""


def test_r_1_kill_points_are_the_state_changes_of_the_run_numbered_per_call() -> None:
    points = kill_points(TRACE, RUN)
    assert [(p.name, p.ordinal) for p in points] == [
        ("openat", 2),  # the lock file, opened to write (Python's imports are not)
        ("flock", 1),
        ("write", 3),  # stdout and the harness's own report are not the run's
        ("fcntl", 2),  # taking a write lock; a read lock changes nothing
        ("pwrite64", 1),
        ("fdatasync", 1),
        ("rename", 1),
        ("write", 1),  # another thread counts its own calls
    ]
    assert [p.kind for p in points] == [
        "openat(lock)",
        "lock(lock)",
        "write(jsonl)",
        "lock(db)",
        "write(wal)",
        "fsync(wal)",
        "rename(published,tmp)",
        "write(jsonl)",
    ]


def test_r_1_the_stride_keeps_every_kind_and_the_last_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ALL_ENV, raising=False)
    points = kill_points(TRACE * 10, RUN)  # 80 points of 7 kinds
    assert len(points) == 80
    kept = chosen(points, 12)
    assert {p.kind for p in kept} == {p.kind for p in points}
    assert kept[-1] == points[-1]
    assert (kept[0].name, kept[0].ordinal) == ("openat", 2)
    assert len(kept) <= 14
    monkeypatch.setenv(ALL_ENV, "1")
    assert chosen(points, 12) == points


def test_r_1_a_write_is_of_its_descriptors_file_whatever_bytes_it_carries() -> None:
    # A WAL frame's random salt once spelled '"/' in the bytes strace printed,
    # and the kill point counted a path that was only data: the killed trial,
    # with other salt, then looked like another kind of call.
    wal = "7 pwrite64(7</r/ledger.db-wal>, "
    trace = (
        f'{wal}"\\0\\0\\10jc\\373\\"/\\225\\232", 24, 53592) = 24\n'
        f'{wal}"\\0\\0\\10x\\330?\\335_u\\324f", 24, 53592) = 24\n'
    )
    first, second = kill_points(trace, RUN)
    assert first.kind == second.kind == "write(wal)"
