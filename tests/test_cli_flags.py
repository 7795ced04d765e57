"""CLI-10, CLI-11, CLI-16: previews, one spelling per flag, exit codes to branch on.

Each operator action's ``--dry-run`` prints what it would record and the plan
it would make, and records nothing (the head seq and every file unchanged);
the plan it previews is the plan the action then makes. ``diff-config`` exits
3 when resume would refuse (CLI-1). Options share one spelling across commands;
older spellings still work, unlisted.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli import main
from ledger import Ledger
from tests.test_cli_operator import build_capped, build_held
from tests.test_cli_support import (
    CliRun,
    Templates,
    cli_run,
    graded,
    read_jsonl,
    templates,
    write_jsonl,
)

__all__ = ["cli_run", "templates"]

#: The commands that record something, each of which takes --dry-run.
RECORDING = {
    "approve",
    "create",
    "extend-attempts",
    "import",
    "policy",
    "record",
    "reset-budget",
    "resume",
    "status",  # --publish rewrites the published files
}


def head_seq(run: CliRun) -> int:
    with Ledger.open(run.out) as led:
        return led.head()[0]


def files(run: CliRun) -> dict[str, bytes]:
    """Every file of the run but the database (a reader may touch its WAL) and
    the lock file (a dry run that takes the lock writes its holder line, with
    the time to the second: two runs a second apart differ there)."""
    return {
        str(p): p.read_bytes()
        for p in sorted(run.out.parent.rglob("*"))
        if p.is_file() and not p.name.startswith("ledger.db") and p.name != "run.lock"
    }


@pytest.fixture
def held(tmp_path: Path, templates: Templates) -> CliRun:
    """Two held rollouts, one retry, three complete."""
    return templates("held", tmp_path, build_held)


@pytest.fixture
def capped(tmp_path: Path, templates: Templates) -> CliRun:
    """One rollout, one attempt per rollout: it exhausted its cap."""
    return templates("capped", tmp_path, build_capped, tasks=1, rollouts=1)


ACTIONS: dict[str, tuple[str, list[Any]]] = {
    # REC-60: a kind's side changes a held rollout's decision.
    "policy": ("held", ["--set", "side_overrides.session_lost=model"]),
    "approve": ("held", ["--all-held"]),  # REC-25
    "reset-budget": ("capped", []),  # REC-16: the exhausted rollout retries
    "extend-attempts": ("capped", ["1"]),  # REC-11: so does a raised cap
}


def invoke_json(run: CliRun, *args: Any) -> dict[str, Any]:
    result = run.invoke(*args, "--json")
    assert result.exit_code == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    return found


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_cli_10_dry_run_records_nothing_and_previews_the_plan(
    request: pytest.FixtureRequest, name: str
) -> None:
    """REC-11, REC-16, REC-25, REC-60 previewed: the preview is what happens."""
    fixture, extra = ACTIONS[name]
    run: CliRun = request.getfixturevalue(fixture)
    args = [name, run.out, *extra, "--reason", "why"]
    seq, before = head_seq(run), files(run)
    preview = invoke_json(run, *args, "--dry-run")
    assert head_seq(run) == seq
    assert files(run) == before
    assert (preview["dry_run"], preview["recorded"]) == (True, False)
    assert preview["plan_change"]["rollouts"], preview
    done = invoke_json(run, *args)
    assert (done["dry_run"], done["recorded"]) == (False, True)
    assert head_seq(run) > seq
    assert done["plan_change"] == preview["plan_change"]
    same = set(done) - {"dry_run", "recorded"}  # cap, changes, approvals, ...
    assert {k: done[k] for k in same} == {k: preview[k] for k in same}


@pytest.mark.parametrize("name", ["policy", "reset-budget", "extend-attempts"])
def test_cli_10_dry_run_text_says_would_and_nothing_recorded(
    request: pytest.FixtureRequest, name: str
) -> None:
    fixture, extra = ACTIONS[name]
    run: CliRun = request.getfixturevalue(fixture)
    seq = head_seq(run)
    result = run.ok(name, run.out, *extra, "--reason", "why", "--dry-run")
    assert result.stdout.splitlines()[0].startswith("would ")
    assert "would make plan changes (1 rollout):" in result.stdout
    assert result.stdout.endswith("dry run: nothing was recorded\n")
    assert head_seq(run) == seq


def test_cli_10_policy_dry_run_refuses_a_bad_value_as_the_change_does(
    held: CliRun,
) -> None:
    """REC-60: a preview validates as the change would, and records nothing."""
    seq = head_seq(held)
    args = ["policy", held.out, "--set", "fault_share=abc", "--reason", "why"]
    assert held.invoke(*args, "--dry-run").exit_code == 3
    assert head_seq(held) == seq


def test_cli_5_record_dry_run_checks_every_row_and_records_nothing(
    cli_run: CliRun,
) -> None:
    """CLI-5: the preview counts what recording appends; a bad row refuses it."""
    _, plan = cli_run.resume()
    rows = write_jsonl(
        cli_run.folder / "outcomes.jsonl", [{**line, **graded()} for line in plan]
    )
    seq, before = head_seq(cli_run), files(cli_run)
    preview = invoke_json(cli_run, "record", cli_run.out, rows, "--dry-run")
    assert head_seq(cli_run) == seq
    assert files(cli_run) == before  # no row written to OUT either
    assert preview["dry_run"] is True
    text = cli_run.ok("record", cli_run.out, rows, "--dry-run").stdout
    assert text.startswith("would record 6 rows: 6 results")
    assert text.endswith("dry run: nothing was recorded\n")
    done = invoke_json(cli_run, "record", cli_run.out, rows)
    assert done["dry_run"] is False
    assert (done["rows"], done["events"]) == (preview["rows"], preview["events"])
    assert head_seq(cli_run) == seq + 12
    stranger = [{**plan[0], **graded(), "_ng_task_index": 99}]
    bad = write_jsonl(cli_run.folder / "bad.jsonl", stranger)
    refused = cli_run.invoke("record", cli_run.out, bad, "--dry-run")
    assert refused.exit_code == 3, refused.stderr
    assert "line 1" in refused.stderr


def test_cli_2_create_dry_run_checks_and_writes_nothing(tmp_path: Path) -> None:
    """CLI-2: the preview is the run create makes, and no file or folder appears."""
    run = CliRun(tmp_path)
    args = ["create", run.out, "--inputs", run.inputs, *run.config_args()]
    preview = invoke_json(run, *args, "--dry-run")
    assert not run.out.parent.exists()
    assert preview["dry_run"] is True
    text = run.ok(*args, "--dry-run").stdout
    assert text.startswith("would create a run of 6 rollouts of 3 tasks, cap 3")
    assert text.endswith("dry run: nothing was written\n")
    assert not run.out.parent.exists()
    created = invoke_json(run, *args)
    same = ("rollouts", "tasks", "cap", "config_digest", "journal_mode")
    assert {k: created[k] for k in same} == {k: preview[k] for k in same}
    refused = run.invoke(*args, "--dry-run")  # CLI-2: the run exists now
    assert refused.exit_code == 3
    assert "started already" in refused.stderr


def test_cli_2_create_dry_run_refuses_rows_create_refuses(tmp_path: Path) -> None:
    """CLI-2: duplicate keys are refused by the preview too (exit 3)."""
    run = CliRun(tmp_path)
    rows = read_jsonl(run.inputs)
    write_jsonl(run.inputs, [*rows, rows[0]])
    args = ["create", run.out, "--inputs", run.inputs, *run.config_args()]
    result = run.invoke(*args, "--dry-run")
    assert result.exit_code == 3, result.stderr
    assert result.stderr == run.invoke(*args).stderr  # the same refusal


def test_cli_6_status_publish_dry_run_names_the_stale_files_and_writes_nothing(
    held: CliRun,
) -> None:
    """CLI-6: --publish --dry-run names what --publish would rewrite (events.md)."""
    coverage = held.ledger_dir / "coverage.json"
    coverage.write_text("{}", encoding="utf-8")  # stale: not the log's rendering
    before = files(held)
    preview = invoke_json(held, "status", held.out, "--publish", "--dry-run")
    assert preview["publish"] == {"dry_run": True, "files": ["coverage.json"]}
    text = held.ok("status", held.out, "--publish", "--dry-run").stdout
    assert text.endswith(
        "would rewrite from the log: coverage.json; dry run: nothing was written\n"
    )
    assert files(held) == before
    done = invoke_json(held, "status", held.out, "--publish")
    assert done["publish"] == {"dry_run": False, "files": ["coverage.json"]}
    assert coverage.read_text(encoding="utf-8") != "{}"
    again = held.ok("status", held.out, "--publish", "--dry-run").stdout
    assert again.endswith("the published files match the log; nothing to rewrite\n")
    assert invoke_json(held, "status", held.out)["publish"] is None
    assert held.invoke("status", held.out, "--dry-run").exit_code == 2


# -- CLI-11: diff-config exit codes --------------------------------------------------


def diff_args(run: CliRun, config: dict[str, Any]) -> list[Any]:
    return [
        "diff-config",
        run.out,
        "--config",
        run.write_config("c.yaml", config),
        "--global-config",
        run.servers,
    ]


def test_cli_11_diff_config_exits_3_when_resume_would_refuse(held: CliRun) -> None:
    """CLI-1, REC-53: a semantic key changed; the same verdict resume reaches."""
    params = {"temperature": 0.6, "top_p": 0.95, "max_output_tokens": 8192}
    args = diff_args(held, {**held.config_data, "responses_create_params": params})
    result = held.invoke(*args)
    assert result.exit_code == 3
    assert "resume would refuse" in result.stdout.splitlines()[-1]
    found = held.invoke(*args, "--json")
    assert found.exit_code == 3
    document = json.loads(found.stdout)
    assert document["resume"] == "refuse"
    key = "collection.responses_create_params.max_output_tokens"
    assert document["refused_keys"] == [key]
    resumed = held.invoke("resume", held.out, *args[2:], "--dry-run")
    assert resumed.exit_code == 3  # what diff-config foretold


def test_cli_11_diff_config_exits_0_when_resume_would_proceed(held: CliRun) -> None:
    """Operational drift only (REC-54): resume proceeds, so exit 0."""
    args = diff_args(held, {**held.config_data, "num_samples_in_parallel": 8})
    result = held.invoke(*args)
    assert result.exit_code == 0
    assert result.stdout.endswith("resume would proceed\n")
    assert json.loads(held.invoke(*args, "--json").stdout)["resume"] == "proceed"


# -- CLI-16: one spelling per flag ---------------------------------------------------


def options(name: str) -> list[list[str]]:
    command = main.commands[name]
    return [list(p.opts) for p in command.params if p.opts[0].startswith("-")]


def help_text(name: str) -> str:
    result = CliRunner().invoke(main, [name, "--help"], catch_exceptions=False)
    assert result.exit_code == 0
    return result.stdout


@pytest.mark.parametrize("name", sorted(main.commands))
def test_cli_16_one_spelling_per_flag(name: str) -> None:
    """-o/--output, -q/--quiet, --json, --dry-run: the same names everywhere."""
    for opts in options(name):
        if "--output" in opts:
            assert "-o" in opts, (name, opts)
        if "--quiet" in opts:
            assert "-q" in opts, (name, opts)
        if "-o" in opts:
            assert "--output" in opts, (name, opts)
    flat = {opt for opts in options(name) for opt in opts}
    assert "--json" in flat
    if name in RECORDING:
        assert "--dry-run" in flat
    assert "--plan-out" not in help_text(name)


def test_cli_4_resume_plan_out_still_works_as_a_hidden_spelling_of_o(
    held: CliRun,
) -> None:
    """CLI-4: scripts written with --plan-out keep working; help shows -o."""
    assert "-o, --output" in help_text("resume")
    plan = held.folder / "old.jsonl"
    held.ok("resume", held.out, *held.config_args(), "--plan-out", plan)
    assert read_jsonl(plan)
    plan2 = held.folder / "new.jsonl"
    held.ok("resume", held.out, *held.config_args(), "--output", plan2)
    assert read_jsonl(plan2)


@pytest.mark.parametrize("name", sorted(main.commands))
def test_cli_16_a_command_that_shows_progress_takes_quiet(name: str) -> None:
    """Issue 28: a spinner or a progress bar, so -q/--quiet (run is its own)."""
    source = inspect.getsource(main.commands[name].callback)  # type: ignore[arg-type]
    shows = re.search(r"\b(working|progress|build_page)\(", source)
    flat = {opt for opts in options(name) for opt in opts}
    assert shows is None or {"-q", "--quiet"} <= flat, name


def test_cli_16_old_spellings_still_work_unlisted(held: CliRun) -> None:
    """approve --reason-held and --kind became --held-because and
    --failure-kind, history --kind became --event (issue 28: no two options
    read alike); scripts with the old spellings keep working."""
    new = ["--held-because", "kept_answer", "--failure-kind", "tool_error"]
    old = ["--reason-held", "kept_answer", "--kind", "tool_error"]
    approve = ["approve", held.out, "--all-held", "--reason", "ok", "--dry-run"]
    assert held.ok(*approve, *old).stdout == held.ok(*approve, *new).stdout
    assert "task 1 rollout 0" in held.ok(*approve, *new).stdout
    event = ["history", held.out, "--event", "failure_saved"]
    kind = ["history", held.out, "--kind", "failure_saved"]
    assert held.ok(*kind).stdout == held.ok(*event).stdout
    assert "failure_saved" in held.ok(*event).stdout
    for command, hidden in (("approve", "--reason-held"), ("approve", "--kind")):
        assert hidden not in help_text(command)
    assert "--kind" not in help_text("history")
