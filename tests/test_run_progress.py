"""Issue 28: ``run`` shows its progress, takes ``resume``'s options and a dry run;
``policy`` adds to and removes from a list; the hints' note keeps no credential.

Progress: on a terminal one line per round redrawn in place (rows recorded of
planned, failures by side, rows per second, time left), erased when the round
ends; off a terminal a plain line every ``--progress-every`` seconds (for a
Slurm log); ``-q`` none; ``--json`` keeps one document per round on stdout.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from projections import RoundProgress
from tests.internals import RoundProgressLine, progress_words
from tests.test_cli_support import CliRun, by_key, failed, graded, templates

__all__ = ["templates"]

COLLECTOR = (
    Path(__file__).resolve().parents[1] / "cli" / "examples" / "simulated_collector.py"
)
PLACES = ["--plan", "{plan}", "--output", "{output}", "--failures", "{failures}"]


def _slow(delay: float) -> list[str]:
    return [sys.executable, str(COLLECTOR), *PLACES, "--row-delay", str(delay)]


def _created(tmp_path: Path, *, tasks: int = 6, rollouts: int = 4) -> CliRun:
    run = CliRun(tmp_path, tasks=tasks, rollouts=rollouts)
    run.create()
    return run


def _run_args(run: CliRun, *extra: str) -> list[str]:
    return ["run", str(run.out), *map(str, run.config_args()), *extra]


def _cli(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        **kwargs,  # type: ignore[arg-type]
    )


# -- the line itself ------------------------------------------------------------


def test_issue_28_progress_words_say_recorded_planned_failures_rate_time_left() -> None:
    progress = RoundProgress(
        2, 10_000, 1_204, 0, {"infrastructure": 1, "model": 3}, 30.0
    )
    assert progress_words(progress) == (
        "round 2: 1,204 of 10,000 rows recorded (12%); failures 4 (infrastructure 1, "
        "model 3); 40.1 rows/s; about 3 min 39 s left; 30 s so far"
    )
    early = RoundProgress(1, 10, 0, 0, {}, 0.4)
    assert progress_words(early) == (
        "round 1: 0 of 10 rows recorded (0%); no failures; rows/s not known yet; "
        "0 s so far"
    )


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_issue_28_off_a_terminal_a_plain_line_every_n_seconds_of_a_round() -> None:
    stream = io.StringIO()
    line = RoundProgressLine(every=10, stream=stream)
    seconds = [0.2 * n for n in range(1, 131)]  # 26 s of reads, 0.2 s apart
    for at in seconds:
        line(RoundProgress(1, 100, int(at), 0, {}, at))
    line(RoundProgress(1, 100, 100, 0, {}, 26.1, ended=True))
    written = stream.getvalue().splitlines()
    assert len(written) == 2  # at 10 s and at 20 s; the end adds none
    assert [w.split(";")[0] for w in written] == [
        "round 1: 10 of 100 rows recorded (10%)",
        "round 1: 20 of 100 rows recorded (20%)",
    ]
    assert "\r" not in stream.getvalue()


def test_issue_28_on_a_terminal_the_line_is_redrawn_in_place_then_erased() -> None:
    stream = _Terminal()
    line = RoundProgressLine(stream=stream)
    for n in range(1, 11):
        line(RoundProgress(1, 10, n, 0, {}, n * 0.6))
    line(RoundProgress(1, 10, 10, 0, {}, 6.1, ended=True))
    drawn = stream.getvalue()
    assert line.lines == 10
    assert drawn.count("\r\x1b[K") == 11
    assert "\n" not in drawn
    assert drawn.endswith("\r\x1b[K")  # erased: the round's summary line follows


def test_issue_28_a_terminal_s_last_row_is_kept_for_the_line_then_given_back() -> None:
    """On a terminal with room, the line lives on the last row (apt's way): the
    rows above scroll, so the collector's output never runs through it."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    with os.fdopen(slave, "w") as stream:
        line = RoundProgressLine(stream=stream)
        for n in range(1, 4):
            line(RoundProgress(1, 10, n, 0, {"model": 1}, n * 0.6))
        line(RoundProgress(1, 10, 10, 0, {}, 3.0, ended=True))
        drawn = b""
        while select.select([master], [], [], 0.5)[0]:
            drawn += os.read(master, 65536)
    os.close(master)
    text = drawn.decode()
    assert text.count("\x1b[1;23r") == 1  # rows 1-23 scroll, row 24 is the line's
    assert text.count("\x1b7\x1b[24;1H\x1b[K") == 3  # drawn there, cursor kept
    assert "round 1: 3 of 10 rows recorded (30%); failures 1 (model 1)" in text
    assert text.endswith("\x1b7\x1b[r\x1b[24;1H\x1b[K\x1b8")  # given back, cleared
    assert line.lines == 3


def test_issue_28_the_line_fits_the_width_dropping_the_least_first() -> None:
    progress = RoundProgress(
        3, 100_000, 5_000, 0, {"infrastructure": 10, "model": 20}, 100.0
    )
    whole = progress_words(progress)
    assert whole.endswith("; 1 min 40 s so far")
    fitted = progress_words(progress, width=len(whole) - 1)
    assert "so far" not in fitted
    assert "(infrastructure 10, model 20)" in fitted
    narrow = progress_words(progress, width=90)
    assert "failures 30;" in narrow
    assert len(progress_words(progress, width=40)) == 40


def test_issue_28_quiet_shows_nothing() -> None:
    for stream in (io.StringIO(), _Terminal()):
        line = RoundProgressLine(every=0.1, quiet=True, stream=stream)
        line(RoundProgress(1, 10, 5, 0, {}, 100.0))
        assert stream.getvalue() == ""


# -- run ------------------------------------------------------------------------


def test_issue_28_run_off_a_terminal_writes_progress_lines_json_unchanged(
    tmp_path: Path,
) -> None:
    run = _created(tmp_path)
    done = _cli(
        _run_args(run, "--progress-every", "0.3", "--json", "--", *_slow(0.1)),
    )
    assert done.returncode in (0, 75, 76), done.stderr
    progress = [
        line for line in done.stderr.splitlines() if line.startswith("round 1: ")
    ]
    assert len(progress) >= 2, done.stderr
    assert all(" of 24 rows recorded" in line for line in progress)
    documents = [json.loads(line) for line in done.stdout.splitlines()]
    assert documents
    assert all("round" in document for document in documents)
    (tmp_path / "quiet").mkdir()
    quiet = _created(tmp_path / "quiet")
    hushed = _cli(_run_args(quiet, "-q", "--progress-every", "0.3", "--", *_slow(0.03)))
    assert hushed.returncode in (0, 75, 76)
    assert " rows recorded" not in hushed.stderr
    assert "rows recorded" not in hushed.stdout.replace("recorded 24 rows", "")


def test_issue_28_run_on_a_terminal_redraws_one_line_per_round(tmp_path: Path) -> None:
    run = _created(tmp_path)
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "cli", *_run_args(run, "--", *_slow(0.1))],
        stdout=subprocess.PIPE,
        stderr=slave,
        stdin=subprocess.DEVNULL,
    )
    os.close(slave)
    seen = []
    while select.select([master], [], [], 10)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen.append(chunk)
    assert process.stdout is not None
    with process.stdout:
        stdout = process.stdout.read().decode()
    process.wait(timeout=60)
    os.close(master)
    terminal = b"".join(seen).decode()
    draws = terminal.split("\r\x1b[K")
    lines = [d for d in draws if d.startswith("round 1: ")]
    assert len(lines) >= 2, terminal
    assert "\n" not in "".join(lines)  # one line, redrawn in place
    assert "round 1: 24 to dispatch" in stdout  # the round's summary on stdout


def test_issue_28_run_dry_run_says_what_the_next_round_would_do(tmp_path: Path) -> None:
    run = _created(tmp_path)
    before = run.ok("head", run.out).stdout
    shown = run.ok(*_run_args(run, "--dry-run", "--", *_slow(0)))
    lines = shown.stdout.splitlines()
    assert "round 1 would release 24 to dispatch, 0 to re-judge, 0 held" in lines
    assert any(
        line.startswith("and run: ") and "rounds/1/plan.jsonl" in line for line in lines
    )
    assert lines[-1] == "dry run: nothing was written and no collector was started"
    assert run.ok("head", run.out).stdout == before  # no event
    assert not (run.ledger_dir / "rounds").exists()  # no round begun
    document = json.loads(
        run.ok(*_run_args(run, "--dry-run", "--json", "--", "x")).stdout
    )
    assert document["round"] == 1
    assert document["plan"]["dispatch"] == 24
    assert document["command"] == ["x"]


def test_issue_28_run_takes_resume_s_options(tmp_path: Path) -> None:
    run = _created(tmp_path, tasks=2, rollouts=2)
    shown = run.invoke(
        *_run_args(
            run,
            "--longest-first",
            "--retry-terminal-timeouts",
            "--reason",
            "timeouts were ours",
            "--",
            *_slow(0),
        )
    )
    assert shown.exit_code in (0, 75, 76), shown.stdout
    history = run.ok("history", run.out, "--json").stdout
    assert history.count('"policy_changed"') == 1  # recorded once, not each round


# -- policy lists -------------------------------------------------------------------


def _held_by_kind(run: CliRun) -> None:
    run.collect(
        by_key(
            {
                (0, 0): failed("judge_failed", answer=True),
                (0, 1): failed("session_lost", answer=True),
                (1, 0): graded(),
            }
        )
    )


@pytest.fixture
def judged(tmp_path: Path) -> CliRun:
    run = CliRun(tmp_path, tasks=2, rollouts=2)
    run.create()
    _held_by_kind(run)
    return run


def test_issue_28_policy_add_keeps_the_defaults_and_remove_takes_one_out(
    judged: CliRun,
) -> None:
    policy = json.loads(judged.ok("status", judged.out, "--json").stdout)
    assert policy  # status answers
    added = judged.ok(
        "policy", judged.out, "--add", "regrade_kinds=session_lost",
        "--reason", "r", "--json",
    )  # fmt: skip
    change = json.loads(added.stdout)["changes"]["regrade_kinds"]
    assert change["new"] == [*change["old"], "session_lost"]
    assert "judge_failed" in change["new"]
    removed = judged.ok(
        "policy", judged.out, "--remove", "regrade_kinds=session_lost",
        "--reason", "r", "--json",
    )  # fmt: skip
    back = json.loads(removed.stdout)["changes"]["regrade_kinds"]
    assert back == {"old": change["new"], "new": change["old"]}


def test_issue_28_policy_set_says_which_defaults_it_drops_and_what_moves(
    judged: CliRun,
) -> None:
    shown = judged.ok(
        "policy", judged.out, "--set", 'regrade_kinds=["session_lost"]',
        "--reason", "r", "--dry-run",
    )  # fmt: skip
    note = [line for line in shown.stdout.splitlines() if line.startswith("note: ")]
    assert len(note) == 1
    assert "drops judge_failed, judge_unparseable" in note[0]
    assert "--add regrade_kinds=session_lost" in note[0]
    assert "task 0 rollout 1: held" in shown.stdout  # the dry run names what moves
    document = json.loads(
        judged.ok(
            "policy",
            judged.out,
            "--set",
            'regrade_kinds=["session_lost"]',
            "--reason",
            "r",
            "--dry-run",
            "--json",
        ).stdout
    )
    assert document["dropped"] == {
        "regrade_kinds": ["judge_failed", "judge_unparseable"]
    }


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("--remove", "regrade_kinds=nothing_such", "does not hold nothing_such"),
        ("--add", "fault_share=0.5", "fault_share is not a list setting"),
    ],
)
def test_issue_28_policy_list_changes_refuse_what_does_not_fit(
    judged: CliRun, option: str, value: str, words: str
) -> None:
    refused = judged.invoke("policy", judged.out, option, value, "--reason", "r")
    assert refused.exit_code == 3
    assert words in refused.stderr


# -- the note the hints read ------------------------------------------------------


def test_issue_28_a_credential_shaped_collector_command_is_never_noted(
    tmp_path: Path,
) -> None:
    run = _created(tmp_path, tasks=1, rollouts=1)
    secret = "sk-abcdefghijklmnopqrstuvwxyz0123456789"
    collector = [*_slow(0), f"+policy_api_key={secret}"]
    _cli(_run_args(run, "--", *collector))  # it refuses the argument: no matter
    for path in run.ledger_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    noted = json.loads((run.ledger_dir / "commands.json").read_text())
    assert "collector" not in noted
    assert noted["config"] == str(run.config.absolute())
    (tmp_path / "plain").mkdir()
    plain = _created(tmp_path / "plain", tasks=1, rollouts=1)
    _cli(_run_args(plain, "--", *_slow(0)))
    noted = json.loads((plain.ledger_dir / "commands.json").read_text())
    assert noted["collector"] == _slow(0)
