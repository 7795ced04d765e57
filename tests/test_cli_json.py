"""CLI-16: ``--json`` on every command, each document as ``docs/json.md`` lists it.

Every document carries ``"schema_version": 1``; its top-level keys are exactly
the keys ``docs/json.md`` lists under the command, on a run with held, retry
and complete rollouts. A command whose result is a refusal or unfinished work
prints its document and exits as it does without ``--json`` (CLI-1).
"""

from __future__ import annotations

import json
import re
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli import main
from tests.test_cli_support import (
    CliRun,
    Templates,
    by_key,
    failed,
    graded,
    read_jsonl,
    templates,
    write_jsonl,
)

__all__ = ["templates"]

ROOT = Path(__file__).parents[1]
DOC = ROOT / "docs" / "json.md"
MIXED = {
    (0, 1): failed("session_lost", answer=True),  # REC-20.5h: held, kept_answer
    (2, 1): failed("session_lost"),  # REC-20.5i: counted, retry
}


def build_mixed(run: CliRun) -> None:
    run.create()
    run.collect(by_key(MIXED))


@pytest.fixture
def mixed(tmp_path: Path, templates: Templates) -> CliRun:
    """4 complete, 1 held (kept_answer), 1 retry."""
    return templates("json-mixed", tmp_path, build_mixed)


def sections() -> dict[str, str]:
    """Each ``### `command` `` section of docs/json.md, by command."""
    parts = re.split(r"^### `([a-z-]+)`$", DOC.read_text(encoding="utf-8"), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def documented(name: str) -> set[str]:
    """The top-level keys a section lists: its bullets' leading `key`s."""
    keys: set[str] = set()
    for line in sections()[name].splitlines():
        if line.startswith("- `"):
            keys |= set(re.findall(r"`([a-z_]+)`", line.partition(":")[0]))
    return keys


def documented_instead(name: str) -> set[str]:
    """The keys of a section's other shape: "the document is instead `{...}`"."""
    found = re.search(r"instead `\{([^}]*)\}`", sections()[name].replace("\n", " "))
    assert found is not None, name
    return {key.strip() for key in found.group(1).split(",")}


def document(run: CliRun, *args: Any, exit_code: int = 0) -> dict[str, Any]:
    result = run.invoke(*args, "--json")
    assert result.exit_code == exit_code, (result.stdout, result.stderr)
    value = json.loads(result.stdout)
    assert isinstance(value, dict)
    assert value["schema_version"] == 1
    assert type(value["schema_version"]) is int
    return value


Args = Callable[[CliRun], tuple[list[Any], int]]

#: Each command's invocation on the mixed run, and its exit code.
ON_MIXED: dict[str, Args] = {
    "approve": lambda r: (
        ["approve", r.out, "--all-held", "--reason", "r", "--dry-run"],
        0,
    ),
    "check": lambda r: (["check", r.out], 75),
    "diff-config": lambda r: (["diff-config", r.out, *r.config_args()], 0),
    "doctor": lambda r: (["doctor", r.out], 0),
    "export": lambda r: (["export", r.out, "-o", r.folder / "events.jsonl"], 0),
    "extend-attempts": lambda r: (
        ["extend-attempts", r.out, "1", "--reason", "r", "--dry-run"],
        0,
    ),
    "head": lambda r: (["head", r.out], 0),
    "history": lambda r: (["history", r.out, "--task", "0", "--rollout", "1"], 0),
    "import": lambda r: (["import", r.out], 0),
    "policy": lambda r: (
        ["policy", r.out, "--set", "fault_share=0.25", "--reason", "r", "--dry-run"],
        0,
    ),
    "reset-budget": lambda r: (
        ["reset-budget", r.out, "--reason", "r", "--dry-run"],
        0,
    ),
    "results": lambda r: (["results", r.out, "-o", r.folder / "selected.jsonl"], 0),
    "resume": lambda r: (["resume", r.out, *r.config_args(), "--dry-run"], 0),
    "status": lambda r: (["status", r.out], 0),
    "verify": lambda r: (["verify", r.out], 0),
}


def test_cli_16_every_command_has_json_and_a_section_in_docs_json_md() -> None:
    """CLI-16: a command added without --json or without its section fails here."""
    assert set(sections()) == set(main.commands)
    for name, command in main.commands.items():
        options = {opt for param in command.params for opt in param.opts}
        assert "--json" in options, name
        assert "schema_version" in documented(name), name


@pytest.mark.parametrize("name", sorted(ON_MIXED))
def test_cli_16_json_keys_are_the_documented_keys(mixed: CliRun, name: str) -> None:
    args, exit_code = ON_MIXED[name](mixed)
    assert set(document(mixed, *args, exit_code=exit_code)) == documented(name)


def test_cli_2_cli_4_cli_5_create_resume_record_json(tmp_path: Path) -> None:
    run = CliRun(tmp_path)
    args = ["create", run.out, "--inputs", run.inputs, *run.config_args()]
    created = document(run, *args)
    assert set(created) == documented("create")
    assert (created["rollouts"], created["tasks"], created["cap"]) == (6, 3, 3)
    plan = tmp_path / "plan.jsonl"
    resumed = document(run, "resume", run.out, *run.config_args(), "-o", plan)
    assert set(resumed) == documented("resume")
    assert resumed["plan"]["dispatch"] == 6
    assert resumed["output"] == str(plan)
    rows = [{**line, **graded()} for line in read_jsonl(plan)]
    recorded = document(run, "record", run.out, write_jsonl(tmp_path / "o.jsonl", rows))
    assert set(recorded) == documented("record")
    assert recorded["rows"] == {"read": 6, "recorded": 6, "skipped": 0}
    assert recorded["events"] == {"attempt_reserved": 6, "result_saved": 6}


def test_cli_7_check_json_prints_the_document_and_exits_75(mixed: CliRun) -> None:
    found = document(mixed, "check", mixed.out, exit_code=75)
    assert found["complete"] is False
    assert (found["exit_code"], found["retryable"]) == (75, True)
    assert found["unfinished"] == {"held": 1, "retry": 1}


def test_cli_9_verify_json_on_a_changed_row_prints_findings_and_exits_5(
    mixed: CliRun,
) -> None:
    rows = read_jsonl(mixed.out)
    rows[0]["reward"] = 0.5  # an edited reward: a changed row
    write_jsonl(mixed.out, rows)
    found = document(mixed, "verify", mixed.out, exit_code=5)
    assert found["verified"] is False
    assert found["findings"]
    assert set(found["findings"][0]) == {"check", "message", "seq", "file", "line"}


def test_cli_13_export_files_json_is_the_other_documented_shape(
    mixed: CliRun,
) -> None:
    found = document(mixed, "export", mixed.out, "--files", mixed.folder / "copy")
    assert set(found) == documented_instead("export")
    assert found["seq"] == document(mixed, "head", mixed.out)["seq"]


@pytest.mark.parametrize("name", ["results", "export"])
def test_cli_12_cli_13_json_without_o_is_a_usage_error(
    mixed: CliRun, name: str
) -> None:
    """The rows would share stdout with the document."""
    result = mixed.invoke(name, mixed.out, "--json")
    assert result.exit_code == 2
    assert "-o FILE" in result.stderr
    assert result.stdout == ""


def test_cli_6_existing_json_keeps_its_keys(mixed: CliRun) -> None:
    """status, history and import had --json before schema_version: same keys."""
    status = document(mixed, "status", mixed.out)
    assert {"run", "coverage", "held", "pending_repairs", "waiting"} <= set(status)
    history = document(mixed, "history", mixed.out)
    assert set(history) == {"schema_version", "entries", "decision", "why"}
    imported = document(mixed, "import", mixed.out)
    assert {"out", "ledger", "rows", "coverage", "adopted"} <= set(imported)


def test_cli_15_demo_json_is_one_document_once_done(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["demo", str(tmp_path / "d"), "--rollouts", "8", "--json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["schema_version"] == 1
    assert set(found) == documented("demo")
    assert found["coverage"]["expected"] == 8
    assert found["verify"] == []
    assert found["rounds"][0]["round"] == 1
    assert any(line.startswith("round 1: ") for line in found["rounds"][0]["lines"])
    assert found["jobs"][0]["exit_code"] == 75  # --max-rounds 1
    assert found["jobs"][1]["command"].startswith("rollout-ledger run rollouts.jsonl")
    assert Path(found["collector"]).is_file()


def test_cli_3_sc_5_import_from_json_is_the_other_documented_shape(
    mixed: CliRun, pg_url: str
) -> None:
    """SC-5: a file-based run loaded into PostgreSQL, previewed, then loaded."""
    url = f"{pg_url}?run=json-{uuid.uuid4().hex[:10]}"
    preview = document(mixed, "import", url, "--from", mixed.out, "--dry-run")
    assert set(preview) == documented_instead("import")
    assert preview["dry_run"] is True
    loaded = document(mixed, "import", url, "--from", mixed.out)
    assert set(loaded) == documented_instead("import")
    head = document(mixed, "head", mixed.out)
    assert (loaded["seq"], loaded["head"]) == (head["seq"], head["head"])
    assert loaded["imported"] is None  # the run had its ledger already


def test_cli_16_run_json_is_one_documented_line_per_round(mixed: CliRun) -> None:
    """``run --json``: JSON lines, each with the documented keys; exits as check."""
    collector = mixed.folder / "collect.py"
    collector.write_text(
        "import json, sys\n"
        "rows = [json.loads(line) for line in open(sys.argv[1])]\n"
        "with open(sys.argv[2], 'a') as out:\n"
        "    for row in rows:\n"
        "        if 'rejudge' not in row:\n"
        "            row.update(reward=1.0, response={'id': 'r', 'object': 'response',"
        " 'status': 'completed', 'output': []})\n"
        "            out.write(json.dumps(row) + '\\n')\n",
        encoding="utf-8",
    )
    args = ["run", mixed.out, *mixed.config_args(), "--json", "--"]
    result = mixed.invoke(*args, sys.executable, collector, "{plan}", "{output}")
    assert result.exit_code == 76, (result.stdout, result.stderr)
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["round"] for line in lines] == [1]
    assert all(set(line) == documented("run") for line in lines)
    assert lines[-1]["recorded"]["rows"] == 1  # the retry; the held one stays held
    assert (lines[-1]["stop"], lines[-1]["exit_code"]) == ("nothing_retryable", 76)
