"""CLI-12: ``results --format csv|parquet``, the selected results as a table.

On a run made through the command line (3 tasks x 2 rollouts: graded, a
settled zero, a held rollout that kept its answer, a retry), the tables hold
one row per rollout with the same rollouts, decisions and rewards as the
JSONL, the failure kind and side, the agent, and the fields asked for; Parquet
is typed, written to a file only, and without pyarrow says how to install it.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.prerequisites import unavailable
from tests.test_cli_support import (
    CliRun,
    Row,
    Templates,
    by_key,
    failed,
    graded,
    read_jsonl,
    templates,
)

__all__ = ["templates"]

COLUMNS = [
    "task",
    "rollout",
    "attempt",
    "decision",
    "reward",
    "failure_kind",
    "failure_side",
    "agent",
]
TOKENS = "response.usage.total_tokens"


def _graded(reward: float, **extra: Any) -> Row:
    row = graded(reward)
    tokens = extra.pop("tokens", None)
    if tokens is not None:
        row["response"]["usage"] = {"input_tokens": 10, "total_tokens": tokens}
    return row | extra


OUTCOMES = {
    (0, 0): _graded(1.0, tokens=30, note=3, passed=True),
    (0, 1): failed("session_lost", answer=True),  # held: kept its answer
    (1, 0): failed("agent_timeout", answer=True),  # settled zero, the model's
    (1, 1): _graded(0.5, tokens=25, note="half", passed=False),
    (2, 0): _graded(1.0),  # no usage, no note
    (2, 1): failed("session_lost"),  # counted failure: retry
}


def build_table_run(run: CliRun) -> None:
    run.create()
    run.collect(by_key(copy.deepcopy(OUTCOMES)))


@pytest.fixture
def table_run(tmp_path: Path, templates: Templates) -> CliRun:
    """2 graded 1.0, 1 graded 0.5, 1 settled zero, 1 held, 1 retry."""
    return templates("results-tables", tmp_path, build_table_run)


def _parquet() -> ModuleType:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        unavailable("pyarrow is not installed: pip install -e '.[dev]'")
    return pq


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _reward(cell: str) -> float | None:
    return None if cell == "" else float(cell)


def _from_jsonl(run: CliRun, *options: str) -> list[tuple[Any, ...]]:
    """(task, rollout, decision, reward) of each row the JSONL holds."""
    target = run.folder / "selected.jsonl"
    run.ok("results", run.out, "-o", target, *options)
    return [
        (
            r["_ng_task_index"],
            r["_ng_rollout_index"],
            r["_ng_decision"],
            r.get("reward"),
        )
        for r in read_jsonl(target)
    ]


def test_cli_12_csv_has_the_jsonl_rollouts_decisions_and_rewards(
    table_run: CliRun,
) -> None:
    target = table_run.folder / "results.csv"
    done = table_run.ok("results", table_run.out, "--format", "csv", "-o", target)
    assert done.stdout == f"wrote 4 rows to {target}\n"
    text = target.read_text(encoding="utf-8")
    assert text.splitlines()[0] == ",".join(COLUMNS)
    rows = _csv(text)
    table = [
        (int(r["task"]), int(r["rollout"]), r["decision"], _reward(r["reward"]))
        for r in rows
    ]
    assert table == _from_jsonl(table_run)
    assert table == [
        (0, 0, "graded", 1.0),
        (1, 0, "settled_zero", 0.0),
        (1, 1, "graded", 0.5),
        (2, 0, "graded", 1.0),
    ]
    settled = rows[1]
    assert (settled["failure_kind"], settled["failure_side"]) == (
        "agent_timeout",
        "model",
    )
    assert [r["failure_kind"] for r in rows if r["decision"] == "graded"] == [""] * 3
    assert {r["agent"] for r in rows} == {"math_agent"}
    assert {r["attempt"] for r in rows} == {"0"}


def test_cli_12_all_adds_the_unfinished_rollouts_without_a_reward(
    table_run: CliRun,
) -> None:
    found = table_run.ok("results", table_run.out, "--format", "csv", "--all")
    rows = _csv(found.stdout)  # no -o: the table on stdout
    table = [
        (int(r["task"]), int(r["rollout"]), r["decision"], _reward(r["reward"]))
        for r in rows
    ]
    assert table == _from_jsonl(table_run, "--all")
    assert len(table) == 6
    held, retry = rows[1], rows[5]
    assert (held["decision"], held["reward"], held["attempt"]) == ("held", "", "0")
    assert (retry["decision"], retry["reward"], retry["attempt"]) == ("retry", "", "1")
    for row in (held, retry):
        assert (row["failure_kind"], row["failure_side"]) == (
            "session_lost",
            "infrastructure",
        )


def test_cli_12_fields_are_scalar_values_else_empty(table_run: CliRun) -> None:
    fields = ["--field", TOKENS, "--field", "note", "--field", "response"]
    fields += ["--field", "nothing.here", "--field", "response.output.0.type"]
    fields += ["--field", "note"]  # twice: one column
    found = table_run.ok("results", table_run.out, "--format", "csv", *fields)
    rows = _csv(found.stdout)
    assert list(rows[0]) == [
        *COLUMNS,
        TOKENS,
        "note",
        "response",
        "nothing.here",
        "response.output.0.type",
    ]
    assert [r[TOKENS] for r in rows] == ["30", "", "25", ""]
    assert [r["note"] for r in rows] == ["3", "", "half", ""]
    assert {r["response"] for r in rows} == {""}  # an object: empty
    assert {r["nothing.here"] for r in rows} == {""}
    assert [r["response.output.0.type"] for r in rows] == ["message"] * 4


def test_cli_12_parquet_is_typed_and_holds_the_same_table(table_run: CliRun) -> None:
    pq = _parquet()
    target = table_run.folder / "results.parquet"
    fields = ["--field", TOKENS, "--field", "note", "--field", "passed"]
    table_run.ok(
        "results", table_run.out, "--format", "parquet", "-o", target, "--all", *fields
    )
    table = pq.read_table(target)
    types = {field.name: str(field.type) for field in table.schema}
    assert types == {
        "task": "int64",
        "rollout": "int64",
        "attempt": "int64",
        "decision": "string",
        "reward": "double",
        "failure_kind": "string",
        "failure_side": "string",
        "agent": "string",
        TOKENS: "int64",
        "note": "string",  # a number and a string: text
        "passed": "bool",
    }
    rows = table.to_pylist()
    assert [
        (r["task"], r["rollout"], r["decision"], r["reward"]) for r in rows
    ] == _from_jsonl(table_run, "--all")
    assert [r[TOKENS] for r in rows] == [30, None, None, 25, None, None]
    assert [r["note"] for r in rows] == ["3", None, None, "half", None, None]
    assert [r["passed"] for r in rows] == [True, None, None, False, None, None]
    assert rows[2]["failure_side"] == "model"
    assert rows[0]["failure_kind"] is None


def test_cli_12_json_summary_names_the_format_and_columns(table_run: CliRun) -> None:
    target = table_run.folder / "results.csv"
    args = ["--format", "csv", "-o", target, "--field", "note", "--json"]
    document = json.loads(table_run.ok("results", table_run.out, *args).stdout)
    assert document["format"] == "csv"
    assert document["columns"] == [*COLUMNS, "note"]
    assert document["rows"] == 4
    jsonl = table_run.folder / "selected.jsonl"
    plain = table_run.ok("results", table_run.out, "-o", jsonl, "--json").stdout
    assert (json.loads(plain)["format"], json.loads(plain)["columns"]) == (
        "jsonl",
        None,
    )


def test_cli_12_jsonl_stays_the_default_and_dash_is_stdout(table_run: CliRun) -> None:
    target = table_run.folder / "selected.jsonl"
    table_run.ok("results", table_run.out, "-o", target)
    explicit = table_run.ok("results", table_run.out, "--format", "jsonl").stdout
    dash = table_run.ok("results", table_run.out, "-o", "-").stdout
    assert explicit.encode() == dash.encode() == target.read_bytes()
    assert not (table_run.folder / "-").exists()


def test_cli_12_field_with_jsonl_is_a_usage_error(table_run: CliRun) -> None:
    refused = table_run.invoke("results", table_run.out, "--field", "note")
    assert refused.exit_code == 2
    assert "--format csv or --format parquet" in refused.stderr
    assert refused.stdout == ""


def test_cli_12_field_named_like_a_column_is_a_usage_error(table_run: CliRun) -> None:
    refused = table_run.invoke(
        "results", table_run.out, "--format", "csv", "--field", "reward"
    )
    assert refused.exit_code == 2
    assert "already has a reward column" in refused.stderr
    assert refused.stdout == ""


@pytest.mark.parametrize("output", [None, "-"])
def test_cli_12_parquet_is_never_written_to_stdout(
    table_run: CliRun, output: str | None
) -> None:
    where = [] if output is None else ["-o", output]
    refused = table_run.invoke("results", table_run.out, "--format", "parquet", *where)
    assert refused.exit_code == 2
    assert "give -o FILE" in refused.stderr
    assert refused.stdout == ""


def test_cli_12_parquet_without_pyarrow_says_how_to_install_it(
    table_run: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow fails
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    target = table_run.folder / "results.parquet"
    refused = table_run.invoke(
        "results", table_run.out, "--format", "parquet", "-o", target
    )
    assert refused.exit_code == 2
    assert "pip install 'rollout-ledger[parquet]'" in refused.stderr
    assert not target.exists()
    csv_still = table_run.invoke("results", table_run.out, "--format", "csv")
    assert csv_still.exit_code == 0  # csv needs no extra


def test_cli_12_metrics_file_is_written_beside_a_table(table_run: CliRun) -> None:
    figures = table_run.folder / "figures.json"
    target = table_run.folder / "results.csv"
    table_run.ok(
        "results", table_run.out, "--format", "csv", "-o", target, "--metrics", figures
    )
    (entry,) = json.loads(figures.read_text())
    assert entry["agent_metrics"]["mean/reward"] == pytest.approx(2.5 / 4)
    assert len(_csv(target.read_text())) == 4


def test_row64_a_multistage_rollout_is_one_table_row_its_final_stage(
    tmp_path: Path,
) -> None:
    """f04: (0, 0) saved stages 0 and 1; (0, 1) stage 0 of 1 only (pending)."""
    from tests.nemo_gym_070 import cli, copy_fixture

    out = copy_fixture("f04", tmp_path)
    assert cli("import", out).exit_code == 0
    selected = tmp_path / "selected.jsonl"
    assert cli("results", out, "-o", selected).exit_code == 0
    assert len(read_jsonl(selected)) == 2  # the JSONL: each saved stage
    assert cli("results", out, "-o", selected, "--all").exit_code == 0
    unfinished = read_jsonl(selected)[-1]
    found = cli("results", out, "--format", "csv", "--all", "--field", "stage_index")
    rows = _csv(found.stdout)
    assert [
        (r["rollout"], r["decision"], r["reward"], r["stage_index"]) for r in rows
    ] == [("0", "graded", "0.7", "1"), ("1", "pending", "", "")]
    assert "stage_index" not in unfinished  # the same row: its materialized input
