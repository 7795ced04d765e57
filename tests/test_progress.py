"""Progress on a terminal only (cli.md), and history's header, --tail, --limit, pager.

Long steps (verify, status, resume, doctor, history, the demo's rounds) show a
spinner on stderr when stderr is a terminal, and nothing when it is not: a
pseudo-terminal stands in for the terminal. ``history`` (CLI-8) has a header
line, ``--tail N`` and ``--limit N``, and pages through ``$PAGER`` when stdout
is a terminal.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cli_support import CliRun, Templates, by_key, failed, templates

__all__ = ["templates"]

_MAIN = "from cli import main; main()"


def _build(run: CliRun) -> None:
    run.create()
    run.collect(by_key({(0, 1): failed("session_lost", answer=True)}))


@pytest.fixture
def done(tmp_path: Path, templates: Templates) -> CliRun:
    return templates("progress_run", tmp_path, _build)


def _read_all(fd: int) -> bytes:
    """Everything the terminal shows until the child closes it (EIO).

    A busy machine may take seconds to start the child: the 60 seconds are
    a guard against a hang, not a wait the test relies on.
    """
    chunks = []
    while select.select([fd], [], [], 60)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _on_terminal(
    args: list[str], *, stdout_too: bool = False, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[bytes], bytes]:
    """Run the CLI with stderr (and with ``stdout_too`` stdout) on a pty."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-c", _MAIN, *args],
        stdout=slave if stdout_too else subprocess.PIPE,
        stderr=slave,
        stdin=slave if stdout_too else subprocess.DEVNULL,  # a pager wants both
        env={**os.environ, **(env or {})},
    )
    os.close(slave)
    seen = _read_all(master)
    stdout = b""
    if process.stdout is not None:
        with process.stdout:
            stdout = process.stdout.read()
    process.wait(timeout=60)
    os.close(master)
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, b"")
    return done, seen


def test_cli_progress_spinner_shows_on_a_terminal_only(done: CliRun) -> None:
    """cli.md: verify and status spin on a terminal's stderr, then erase it."""
    for command, label in (("verify", b"verifying"), ("status", b"reading the run")):
        finished, terminal = _on_terminal([command, str(done.out)])
        assert finished.returncode == 0
        assert label in terminal
        assert terminal.endswith(b"\r\x1b[K")  # the spinner's line is erased
        assert label not in finished.stdout  # stdout carries the output only
        quiet = done.ok(command, done.out)  # stderr is not a terminal here
        assert quiet.stderr == ""  # off a terminal: nothing at all
        assert quiet.stdout.encode() == finished.stdout


def test_cli8_history_has_a_header_line(done: CliRun) -> None:
    """CLI-8: the first line names the columns."""
    lines = done.ok("history", done.out).stdout.splitlines()
    assert lines[0].split() == ["seq", "time", "actor", "kind", "key", "summary"]
    assert lines[1].split()[:1] == ["1"]


def test_cli8_history_tail_and_limit_show_the_last_or_first_entries(
    done: CliRun,
) -> None:
    """CLI-8: --tail N the last N entries, --limit N the first N, counted."""
    every = done.ok("history", done.out).stdout.splitlines()[1:]
    total = len(every)
    tail = done.ok("history", done.out, "--tail", 2).stdout.splitlines()
    assert tail[1:3] == every[-2:]
    assert tail[3] == f"(2 of {total} entries shown)"
    limit = done.ok("history", done.out, "--limit", 3).stdout.splitlines()
    assert limit[1:4] == every[:3]
    assert limit[4] == f"(3 of {total} entries shown)"
    both = done.invoke("history", done.out, "--tail", 1, "--limit", 1)
    assert both.exit_code == 2


def test_cli8_history_pages_on_a_terminal(done: CliRun) -> None:
    """CLI-8: with stdout on a terminal the trail goes through $PAGER."""
    pager = "sed s/^/paged:/"
    finished, terminal = _on_terminal(
        ["history", str(done.out)], stdout_too=True, env={"PAGER": pager}
    )
    assert finished.returncode == 0
    assert b"paged:   seq  time" in terminal
    piped = done.ok("history", done.out)  # stdout is not a terminal here
    assert piped.stdout.startswith("   seq  time")  # no pager


def _spinning(run: CliRun) -> dict[str, tuple[list[str], bytes]]:
    """Each command that spins: its arguments after OUT and the spinner's label."""
    config = [str(arg) for arg in run.config_args()]
    return {
        "verify": ([], b"verifying"),
        "status": ([], b"reading the run"),
        "check": ([], b"reading the run"),
        "history": ([], b"reading the run"),
        "doctor": ([], b"checking"),
        "resume": (["--dry-run", *config], b"resuming"),
    }


@pytest.mark.parametrize(
    "command", ["verify", "status", "check", "history", "doctor", "resume"]
)
def test_cli_quiet_keeps_the_spinner_off_a_terminal(done: CliRun, command: str) -> None:
    """Issue 28: every command that spins takes -q, and -q spins nothing."""
    args, label = _spinning(done)[command]
    _, spinning = _on_terminal([command, str(done.out), *args])
    assert label in spinning
    finished, terminal = _on_terminal([command, str(done.out), *args, "-q"])
    assert finished.returncode in (0, 76)  # check: a held rollout remains
    assert label not in terminal
    assert b"\x1b[K" not in terminal  # no spinner's line drawn, none erased
