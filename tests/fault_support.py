"""The fault harness's machinery: strace's fault injection and its kill points.

A command is run once under ``strace -f -y`` tracing the system calls that can
change state (:data:`TRACED`); every call of those that touches the run's
folder is a *kill point*, named by its system call and its ordinal among that
call's invocations in the process (strace counts injections per system call
and per tracee). A trial runs the command again from the same files, with
``-e inject=NAME:signal=KILL:when=ORDINAL``, so the kernel kills it as it enters
that call, and checks from the trial's own trace that it died there.

strace's ``--seccomp-bpf`` is not used: strace 6.1 does not inject with it.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests.prerequisites import unavailable

ROOT = Path(__file__).resolve().parents[1]
CHILD = ROOT / "tests" / "fault_child.py"
ALL_ENV = "ROLLOUT_LEDGER_FAULT_ALL"
REPORT_ENV = "ROLLOUT_LEDGER_FAULT_REPORT"

#: The system calls that can change a run's state (files, locks, folders).
TRACED = (
    "write",
    "pwrite64",
    "fsync",
    "fdatasync",
    "ftruncate",
    "rename",
    "renameat",
    "renameat2",
    "unlink",
    "unlinkat",
    "mkdir",
    "mkdirat",
    "openat",
    "flock",
    "fcntl",
)
#: System calls of one effect count as one kind for the stride.
_CALL_CLASS = {
    "pwrite64": "write",
    "fdatasync": "fsync",
    "renameat": "rename",
    "renameat2": "rename",
    "unlinkat": "unlink",
    "mkdirat": "mkdir",
    "fcntl": "lock",
    "flock": "lock",
}
_WRITE_FLAGS = ("O_CREAT", "O_WRONLY", "O_RDWR", "O_TRUNC")
_LINE = re.compile(r"^(?P<pid>\d+) +(?P<name>[a-z0-9_]+)\((?P<rest>.*)$")
_RANDOM = re.compile(r"[0-9a-f]{8,}")


@cache
def _strace_works(found: str) -> str:
    probe = subprocess.run(
        [found, "-f", "-qq", "-o", os.devnull, "true"], capture_output=True, text=True
    )
    return "" if probe.returncode == 0 else probe.stderr.strip()


def strace() -> str:
    """The strace binary; skipped without it (failed under ``CI=true``).

    Also when it cannot trace here (a container without ``ptrace``).
    """
    found = shutil.which("strace")
    if found is None:
        unavailable("strace is not installed (apt-get install strace)")
    if problem := _strace_works(found):
        unavailable(f"strace cannot trace processes here: {problem}")
    return found


@dataclass(frozen=True)
class KillPoint:
    """The ``ordinal``-th call of ``name`` in the process, as first traced."""

    name: str
    ordinal: int
    call: str  # the traced line, without pid and result: what the kill hit

    @property
    def kind(self) -> str:
        """The system call and the class of run file it touches."""
        if self.name in _FD_CALLS:
            # Only the descriptor's file: the bytes a write carries are data,
            # and random bytes (a WAL frame's salt) may spell '"/'.
            fd = re.match(r"[a-z0-9_]+\(\d+<([^>]*)>", self.call)
            paths = [fd[1]] if fd is not None else []
        else:
            call = re.sub(r"AT_FDCWD<[^>]*>", "AT_FDCWD", self.call)
            found = re.findall(r"<(/[^>]*)>|\"(/[^\"]*)\"", call)
            paths = [a or b for a, b in found]
        classes = sorted({_file_class(path) for path in paths})
        if classes == ["shm"]:  # SQLite's shared memory, rebuilt from the WAL
            return "any(shm)"
        return f"{_CALL_CLASS.get(self.name, self.name)}({','.join(classes)})"

    def __str__(self) -> str:
        return f"{self.name}#{self.ordinal}: {self.call[:160]}"


def _file_class(path: str) -> str:
    name = Path(path).name
    for suffix in ("-wal", "-shm", "-journal", ".tmp", ".lock", ".jsonl", ".db"):
        if name.endswith(suffix):
            return suffix.strip(".-")
    if name.endswith((".creating", ".partial")) or ".creating" in name:
        return "creating"
    return "dir" if "." not in name else "published"


def _changes_state(name: str, rest: str) -> bool:
    if name == "openat":
        return any(flag in rest for flag in _WRITE_FLAGS)
    if name == "fcntl":  # only locking: taking a write lock or letting it go
        return "F_SETLK" in rest and ("F_WRLCK" in rest or "F_UNLCK" in rest)
    if name == "write":  # stdout and stderr are not the run's state
        return not rest.startswith(("1<", "2<"))
    return True


_FD_CALLS = ("write", "pwrite64", "fsync", "fdatasync", "ftruncate", "flock", "fcntl")


def _under(path: str, where: str) -> bool:
    return path == where or path.startswith(where + "/")


def _touches(name: str, rest: str, where: str) -> bool:
    if name in _FD_CALLS:  # the file its descriptor names, not the bytes written
        fd = re.match(r"\d+<([^>]*)>", rest)
        return fd is not None and _under(fd[1], where)
    rest = re.sub(r"AT_FDCWD<[^>]*>", "AT_FDCWD", rest)
    paths = re.findall(r"<(/[^>]*)>|\"(/[^\"]*)\"", rest)
    return any(_under(a or b, where) for a, b in paths)


def kill_points(trace: str, folder: Path) -> list[KillPoint]:
    """Every traced call of ``trace`` that changes state under ``folder``."""
    where = str(folder)
    counts: Counter[tuple[str, str]] = Counter()
    points = []
    for line in trace.splitlines():
        match = _LINE.match(line)
        if match is None:  # "<... resumed>", exits, signals
            continue
        pid, name, rest = match["pid"], match["name"], match["rest"]
        counts[pid, name] += 1
        if _touches(name, rest, where) and _changes_state(name, rest):
            call = re.sub(r"\) += [^=]*$", ")", f"{name}({rest}")
            points.append(KillPoint(name, counts[pid, name], call))
    return points


def chosen(points: Sequence[KillPoint], budget: int) -> list[KillPoint]:
    """All of ``points`` under ``ROLLOUT_LEDGER_FAULT_ALL=1``, else a stride.

    The stride keeps the first call of each kind (what the call does: open,
    write, sync, truncate, rename, unlink, mkdir, lock; and the class of run
    file: the log, its WAL, the lock file, a collector file, a file being
    published, a folder; any call on SQLite's shared memory, which is rebuilt
    from the WAL, is one kind), the last call, and every k-th point in trace
    order, about ``budget`` in all.
    """
    if os.environ.get(ALL_ENV) == "1" or len(points) <= budget:
        return list(points)
    first: dict[str, int] = {}
    for i, point in enumerate(points):
        first.setdefault(point.kind, i)
    keep = set(first.values()) | {len(points) - 1}
    step = max(1, math.ceil(len(points) / max(1, budget - len(keep))))
    keep |= set(range(0, len(points), step))
    return [points[i] for i in sorted(keep)]


@dataclass
class Traced:
    """One run of a command under strace."""

    returncode: int
    stdout: str
    stderr: str
    trace: str
    appended: list[tuple[str, int, str]]  # (database, seq, hash hex) returned


def run_traced(
    args: Sequence[str | Path],
    work: Path,
    *,
    kill: KillPoint | None = None,
    env: Mapping[str, str] | None = None,
) -> Traced:
    """``rollout-ledger ARGS`` under strace; killed at ``kill`` if given."""
    trace_file = work / "strace.out"
    report = work / "appended.txt"
    for path in (trace_file, report):
        path.unlink(missing_ok=True)
    command = [strace(), "-f", "-qq", "-y", "-o", str(trace_file)]
    command += ["-e", "trace=" + ",".join(TRACED)]
    if kill is not None:
        command += ["-e", f"inject={kill.name}:signal=KILL:when={kill.ordinal}"]
    command += [sys.executable, str(CHILD), *map(str, args)]
    environ = {
        **os.environ,
        "PYTHONDONTWRITEBYTECODE": "1",  # the same system calls every time
        "PYTHONHASHSEED": "0",
        "NO_COLOR": "1",
        REPORT_ENV: str(report),
        **(env or {}),
    }
    proc = subprocess.run(
        command, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120
    )
    appended = []
    if report.exists():
        for line in report.read_text().splitlines():
            db, seq, digest = line.split(" ")
            appended.append((db, int(seq), digest))
    return Traced(
        proc.returncode,
        proc.stdout,
        proc.stderr,
        trace_file.read_text() if trace_file.exists() else "",
        appended,
    )


def killed_at(traced: Traced, point: KillPoint, folder: Path) -> None:
    """Assert the trial died of SIGKILL entering ``point``'s call."""
    assert traced.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), (
        f"not killed at {point} (exit {traced.returncode}): {traced.stderr[-2000:]}"
    )
    calls = kill_points(traced.trace, folder)
    # The kill enters the call: its line is the last state change traced.
    assert calls, (point, "no state change traced")
    assert calls[-1].name == point.name, (point, calls[-1])
    assert calls[-1].ordinal == point.ordinal, (point, calls[-1])
    assert calls[-1].kind == point.kind, (point, calls[-1])
