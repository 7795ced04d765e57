"""R-5: numbers bounded where they enter, and outputs that never overwrite the run.

Issue 18, "Bricked by one value": a huge ``extend-attempts`` total or
``max_free_attempts`` was recorded and every later ``resume`` and ``verify``
died with ``OverflowError``. Each entry point now refuses a number over its
bound (exit 3, the bound in the message) and records nothing; a log that
already holds one is read as the bound.

"Overwriting what it must protect": ``results -o OUT``, ``export -o
<stem>_ledger/ledger.db`` and ``resume --plan-out <stem>_failures.jsonl``
overwrote the run's own files. Every output a user names is checked first
(``ledger.check_outputs``): the run's files stay byte-identical.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ledger import (
    MAX_ATTEMPTS,
    ConfigError,
    Ledger,
    RunLock,
    check_outputs,
    max_rollout_attempts,
)
from ledger.events import AttemptsExtended, PolicyChange, PolicyChanged
from tests.test_cli_support import (
    CliRun,
    Templates,
    graded,
    read_jsonl,
    templates,
    write_jsonl,
)

__all__ = ["templates"]

HUGE = "99999999999999999999"  # over 2**64: what msgspec and SQLite cannot hold
APPROVE_ARGS = ("--task", "0", "--rollout", "0", "--attempt", "0")
ATTEMPT_BOUND = "_ng_attempt_index must be an integer from 0 to 1999999"
TASK_BOUND = "_ng_task_index must be an integer from 0 to 9223372036854775807"
LEDGER_FOLDER = "inside the run's ledger folder"


@pytest.fixture
def run(tmp_path: Path, templates: Templates) -> CliRun:
    """A created run of 3 tasks x 2 rollouts (nothing dispatched yet)."""
    return templates("created", tmp_path, CliRun.create)


def head(run: CliRun) -> tuple[int, bytes]:
    with Ledger.open(run.out) as led:
        return led.head()


def digests(run: CliRun) -> dict[str, object]:
    """Every file of the run folder by its SHA-256, and the log's head.

    The database is compared by its head (seq and hash): SQLite may move
    committed pages between ``ledger.db`` and its WAL when a connection closes.
    """
    folder = run.out.parent
    files: dict[str, object] = {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
        and path.name != "run.lock"
        and not path.name.startswith("ledger.db")
    }
    return files | {"head": head(run)}


def still_works(run: CliRun) -> None:
    """``verify`` and ``resume`` go on after a refusal (or an old huge value)."""
    assert run.invoke("verify", run.out).exit_code == 0
    run.resume()
    assert run.invoke("verify", run.out).exit_code == 0


# -- numbers -----------------------------------------------------------------


def _refused(run: CliRun, args: list[object], bound: str) -> None:
    before = head(run)
    result = run.invoke(*args)
    assert result.exit_code == 3, (result.stdout, result.stderr)
    assert bound in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert head(run) == before  # nothing recorded


@pytest.mark.parametrize(
    ("args", "bound"),
    [
        (
            ["extend-attempts", "{out}", HUGE, "--reason", "typo"],
            f"extend-attempts takes a total from 1 to 1000000; got {HUGE}",
        ),
        (
            ["extend-attempts", "{out}", "1000001", "--reason", "typo"],
            "from 1 to 1000000; got 1000001",
        ),
        (
            ["policy", "{out}", "--set", f"max_free_attempts={HUGE}", "--reason", "x"],
            f"max_free_attempts takes a number of attempts from 1 to 1000000; "
            f"got {HUGE}",
        ),
        (
            ["history", "{out}", "--since", HUGE],
            f"--since takes a seq from 1 to 9223372036854775807; got {HUGE}",
        ),
        (
            ["history", "{out}", "--task", HUGE],
            f"--task takes a task from 0 to 9223372036854775807; got {HUGE}",
        ),
        (
            ["history", "{out}", "--rollout", HUGE],
            "--rollout takes a rollout index from 0 to 9223372036854775807",
        ),
        (
            ["approve", "{out}", *APPROVE_ARGS[:5], HUGE, "--reason", "x"],
            f"--attempt takes an attempt index from 0 to 1999999; got {HUGE}",
        ),
        (
            ["approve", "{out}", "--task", HUGE, *APPROVE_ARGS[2:], "--reason", "x"],
            "--task takes a task from 0 to 9223372036854775807",
        ),
    ],
    ids=[
        "extend-huge",
        "extend-over",
        "policy",
        "since",
        "history-task",
        "history-rollout",
        "approve-attempt",
        "approve-task",
    ],
)
def test_r5_operator_numbers_refused_with_their_bound(
    run: CliRun, args: list[object], bound: str
) -> None:
    """R-5: each number a command takes is refused over its bound; nothing recorded."""
    _refused(run, [run.out if a == "{out}" else a for a in args], bound)
    still_works(run)


def test_r5_resume_extend_attempts_refused_with_its_bound(run: CliRun) -> None:
    """R-5: ``resume --extend-attempts`` over the bound records nothing."""
    args = ["resume", run.out, *run.config_args(), "--extend-attempts", HUGE]
    _refused(
        run, args, f"--extend-attempts takes a total from 0 to 1000000; got {HUGE}"
    )
    still_works(run)


def test_r5_extend_attempts_at_the_bound_is_accepted(run: CliRun) -> None:
    """R-5: the bound itself is a valid total; resume and verify keep working."""
    run.ok("extend-attempts", run.out, str(MAX_ATTEMPTS), "--reason", "max")
    still_works(run)


def test_r5_approvals_file_numbers_over_the_bound_approve_nothing(run: CliRun) -> None:
    """R-5: an approvals line over the bound is reported with it, not recorded."""
    approvals = run.folder / "approvals.txt"
    approvals.write_text(
        f"0 0 {HUGE}\n"
        + json.dumps({"task": 0, "rollout": 0, "attempt": 10**30})
        + "\n"
    )
    result, _ = run.resume("--rerun-masked-without-artifact", approvals)
    assert "line 1 approves nothing: task and rollout must be integers from 0 to" in (
        result.stderr
    )
    assert "and attempt from 0 to 1999999; got 0 0 " in result.stderr
    assert "line 2 approves nothing" in result.stderr
    with Ledger.open(run.out) as led:
        assert "rerun_approved" not in {e.kind for e in led.events()}
    assert run.invoke("verify", run.out).exit_code == 0


def test_r5_create_max_attempts_over_the_bound(tmp_path: Path) -> None:
    """R-5: ``create --max-attempts`` over the bound creates nothing."""
    run = CliRun(tmp_path)
    result = run.invoke(
        "create", run.out, "--inputs", run.inputs, *run.config_args(),
        "--max-attempts", HUGE,
    )  # fmt: skip
    assert result.exit_code == 3
    assert f"takes a number from 1 to 1000000; got {HUGE}" in result.stderr
    assert not (run.ledger_dir / "ledger.db").exists()


def test_r5_environment_cap_over_the_bound_is_the_default() -> None:
    """R-5, REC-10: an unusable NEMO_GYM_MAX_ROLLOUT_ATTEMPTS gives 3."""
    env = "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS"
    assert max_rollout_attempts(environ={env: HUGE * 300}) == 3
    assert max_rollout_attempts(environ={env: "1000001"}) == 3
    assert max_rollout_attempts(environ={env: "1000000"}) == MAX_ATTEMPTS


def test_r5_policy_file_over_the_bound_names_key_and_bound(tmp_path: Path) -> None:
    """R-5: a policy file's max_free_attempts over the bound refuses ``create``."""
    run = CliRun(tmp_path)
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"max_free_attempts": 10**20}))
    result = run.invoke(
        "create", run.out, "--inputs", run.inputs, *run.config_args(),
        "--policy", policy,
    )  # fmt: skip
    assert result.exit_code == 3
    assert "max_free_attempts: must be a whole number from 1 to 1000000" in (
        result.stderr
    )


def test_r5_input_row_index_over_the_bound_is_refused(tmp_path: Path) -> None:
    """R-5: a materialized row with an index over 64 bits is refused, with the bound."""
    run = CliRun(tmp_path)
    write_jsonl(run.inputs, [{"_ng_task_index": 2**64, "_ng_rollout_index": 0}])
    result = run.invoke("create", run.out, "--inputs", run.inputs, *run.config_args())
    assert result.exit_code == 3
    assert "_ng_task_index must be from 0 to 9223372036854775807" in result.stderr
    assert not (run.ledger_dir / "ledger.db").exists()


@pytest.mark.parametrize(
    ("key", "value", "bound"),
    [
        ("_ng_attempt_index", 10**20, ATTEMPT_BOUND),
        ("_ng_task_index", 2**64, TASK_BOUND),
    ],
)
def test_r5_recorded_row_index_over_the_bound_is_refused(
    run: CliRun, key: str, value: int, bound: str
) -> None:
    """R-5: ``record`` of a row whose index is over its bound records nothing."""
    _, plan = run.resume()
    row = {**plan[0], **graded(), key: value}
    before = run.out.read_bytes() if run.out.exists() else b""
    seq = head(run)[0]
    result = run.invoke("record", run.out, write_jsonl(run.folder / "o.jsonl", [row]))
    assert result.exit_code == 3, (result.stdout, result.stderr)
    assert bound in result.stderr
    assert (run.out.read_bytes() if run.out.exists() else b"") == before
    # Issue 25: the refused line is kept in the log, and nothing else.
    assert head(run)[0] == seq + 1
    run.ok("export", run.out, "-o", run.folder / "events.jsonl")
    assert read_jsonl(run.folder / "events.jsonl")[-1]["kind"] == "row_refused"
    assert run.invoke("verify", run.out).exit_code == 0


def test_r5_a_log_already_holding_huge_values_still_replays(run: CliRun) -> None:
    """R-5: a total or max_free_attempts in the log over the bound reads as it."""
    with RunLock(run.out) as lock, Ledger.open(run.out, lock=lock) as led:
        led.append(AttemptsExtended(total=10**20), actor="operator:old")
        change = PolicyChange(old=5, new=10**20)
        led.append(PolicyChanged(changes={"max_free_attempts": change}))
    status = run.ok("status", run.out, "--json")
    assert "Traceback" not in status.stderr
    still_works(run)
    assert json.loads(run.ok("status", run.out, "--json").stdout)["run"]["cap"] == (
        3 + MAX_ATTEMPTS
    )


# -- outputs -----------------------------------------------------------------


def _outputs(run: CliRun) -> list[tuple[list[object], str]]:
    own, led = run.out.parent, run.ledger_dir
    sidecar = own / "rollouts_failures.jsonl"
    inputs = own / ".." / own.name / "rollouts_materialized_inputs.jsonl"
    resume = ["resume", run.out, *run.config_args(), "--plan-out"]
    return [
        (["results", run.out, "-o", run.out], "is the run's results file (OUT)"),
        (["results", run.out, "-o", sidecar], "failures sidecar"),
        (["results", run.out, "-o", inputs], "materialized inputs"),
        (["export", run.out, "-o", led / "ledger.db"], LEDGER_FOLDER),
        (["export", run.out, "-o", led / "events.jsonl"], LEDGER_FOLDER),
        ([*resume, sidecar], "failures sidecar"),
        ([*resume, led / "coverage.json"], LEDGER_FOLDER),
        (["export", run.out, "--files", led], LEDGER_FOLDER),
        (["export", run.out, "--files", own / "."], "is the run's own folder"),
    ]


@pytest.mark.parametrize("case", range(9))
def test_r5_outputs_never_overwrite_the_run(run: CliRun, case: int) -> None:
    """R-5, CLI-4, CLI-12, CLI-13: an output naming the run's own files is refused.

    Exit 3 naming the path and why; every file of the run byte-identical after.
    """
    run.collect(lambda row: graded())  # OUT and the sidecar hold rows
    args, why = _outputs(run)[case]
    before = digests(run)
    result = run.invoke(*args)
    assert result.exit_code == 3, (result.stdout, result.stderr)
    assert why in result.stderr
    assert str(args[-1]) in result.stderr
    assert digests(run) == before
    assert run.invoke("verify", run.out).exit_code == 0


def test_r5_an_output_through_a_symlink_is_refused(run: CliRun) -> None:
    """R-5: a symlink to ``OUT`` is ``OUT``; a hard link to the sidecar too."""
    run.collect(lambda row: graded())
    link = run.folder / "selected.jsonl"
    link.symlink_to(run.out)
    before = digests(run)
    result = run.invoke("results", run.out, "-o", link)
    assert result.exit_code == 3
    assert "is the run's results file (OUT)" in result.stderr
    assert digests(run) == before


def test_r5_output_in_a_missing_folder_is_a_clear_refusal(run: CliRun) -> None:
    """R-5: ``-o nosuchdir/x`` names the folder to create, no traceback."""
    for command in ("results", "export"):
        result = run.invoke(command, run.out, "-o", run.folder / "nosuchdir" / "x")
        assert result.exit_code == 3
        assert "the folder" in result.stderr
        assert "does not exist" in result.stderr
        assert "mkdir -p" in result.stderr
    assert not (run.folder / "nosuchdir").exists()


def test_r5_two_outputs_naming_one_file_are_refused(tmp_path: Path) -> None:
    """R-5: outputs of one command are compared with each other too."""
    target = tmp_path / "a.jsonl"
    with pytest.raises(ConfigError, match="both name"):
        check_outputs(None, {"-o": target, "--plan-out": tmp_path / "." / "a.jsonl"})


def test_r5_outputs_elsewhere_are_written(run: CliRun) -> None:
    """R-5: an output beside the run (not one of its files) is written as before."""
    selected = run.out.parent / "selected.jsonl"
    run.ok("results", run.out, "-o", selected)
    run.ok("export", run.out, "-o", run.folder / "events.jsonl")
    assert selected.exists()
    assert (run.folder / "events.jsonl").exists()
