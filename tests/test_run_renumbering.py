"""Issue 25: a collector that renumbers rollouts, as NeMo Gym 0.7.0 does.

0.7.0's ``_preprocess_raw_rows`` keeps an input row's ``_ng_task_index`` but
numbers ``_ng_rollout_index`` per task from 0 in the file it reads, copies
``_ng_attempt_index`` and ``_ng_rollout_id`` to its result verbatim and drops
``_ng_run_id``. ``COLLECTOR`` below does exactly that. Every rollout's input
carries its own seed, and the collector's answer names the seed it was given,
so a row recorded under another rollout than the one it answers is seen.

With the identity (the plan's ``_ng_rollout_id``, copied back) every row is
recorded as the rollout it answers, whatever number it came back with.
Without it, a row whose number may be a renumbering is refused, kept in the
log as a ``row_refused`` event, and ``run`` stops naming the cause and the fix
instead of sampling the model again and again.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_support import CliRun, read_jsonl, write_jsonl

SCRIPT = Path(sys.executable).parent / "rollout-ledger"

COLLECTOR = r"""
import json, os, sys
plan, output, failures = sys.argv[1:4]
keep_id = os.environ.get("KEEP_ID") == "1"
fail = set(json.loads(os.environ.get("FAIL", "[]")))
rows = [json.loads(line) for line in open(plan)]
numbers = {}
with open(output, "a") as out, open(failures, "a") as side, \
        open(os.environ["CALLS"], "a") as calls:
    for row in rows:
        if "rejudge" in row:
            continue
        task = row["_ng_task_index"]
        seed = row["responses_create_params"]["metadata"]["seed"]
        number = numbers.get(task, 0)  # 0.7.0: per task from 0, in file order
        numbers[task] = number + 1
        calls.write(json.dumps([task, seed]) + "\n")
        result = {
            "_ng_task_index": task,
            "_ng_rollout_index": number,
            "responses_create_params": row["responses_create_params"],
        }
        if "_ng_attempt_index" in row:
            result["_ng_attempt_index"] = row["_ng_attempt_index"]
        if keep_id and "_ng_rollout_id" in row:
            result["_ng_rollout_id"] = row["_ng_rollout_id"]
        if f"{task}-{seed}" in fail and row["_ng_attempt_index"] == 0:
            result["_ng_failure_class"] = "agent_request_failed"
            result["_ng_failure_message"] = "HTTP 500 from the model"
            side.write(json.dumps(result) + "\n")
            continue
        text = f"answer to seed {seed}"
        result["response"] = {
            "id": f"resp-{task}-{seed}", "object": "response", "status": "completed",
            "output": [{"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": text}]}],
        }
        result["reward"] = 1.0
        out.write(json.dumps(result) + "\n")
"""

TASKS, ROLLOUTS = 3, 4
#: First attempts that fail, as "task-seed": round 2 then runs only these
#: rollouts, which the collector numbers 0, 1, ... per task.
FAIL = ["0-2", "1-1", "1-3"]


@pytest.fixture
def seeded(tmp_path: Path) -> CliRun:
    """A created run of 3 tasks x 4 rollouts, each rollout's input seeded."""
    run = CliRun(tmp_path, tasks=TASKS, rollouts=ROLLOUTS)
    rows = read_jsonl(run.inputs)
    for row in rows:
        params = row["responses_create_params"] = copy.deepcopy(
            row.get("responses_create_params") or {}
        )
        params["metadata"] = {"seed": row["_ng_rollout_index"]}
    write_jsonl(run.inputs, rows)
    run.create()
    (tmp_path / "collect.py").write_text(COLLECTOR, encoding="utf-8")
    return run


def run_collector(run: CliRun, *, keep_id: bool) -> subprocess.CompletedProcess[str]:
    collector = [sys.executable, str(run.folder / "collect.py")]
    command = [*collector, "{plan}", "{output}", "{failures}"]
    env = {
        **os.environ,
        "KEEP_ID": "1" if keep_id else "0",
        "FAIL": json.dumps(FAIL),
        "CALLS": str(run.folder / "calls.jsonl"),
    }
    argv = [str(SCRIPT), "run", str(run.out), *map(str, run.config_args())]
    return subprocess.run(
        [*argv, "--", *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def seed_of(row: dict[str, Any]) -> int:
    text = row["response"]["output"][0]["content"][0]["text"]
    return int(text.rsplit(" ", 1)[1])


def events(run: CliRun, kind: str) -> list[dict[str, Any]]:
    run.ok("export", run.out, "-o", run.folder / "events.jsonl")
    found = read_jsonl(run.folder / "events.jsonl")
    return [e["body"] | {"seq": e["seq"]} for e in found if e["kind"] == kind]


def test_rows_renumbered_with_the_identity_are_recorded_as_the_rollout_they_answer(
    seeded: CliRun,
) -> None:
    """Issue 25: every row recorded as the plan row it answers; none sampled twice."""
    done = run_collector(seeded, keep_id=True)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = read_jsonl(seeded.out)
    assert len(rows) == TASKS * ROLLOUTS
    keys = Counter((r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows)
    assert set(keys) == {(t, r) for t in range(TASKS) for r in range(ROLLOUTS)}
    for row in rows:  # the answer is the recorded rollout's, never a sibling's
        assert seed_of(row) == row["_ng_rollout_index"], row
        assert row["responses_create_params"]["metadata"]["seed"] == seed_of(row)
    renumbered = [r for r in rows if "_ng_collector_indices" in r]
    assert {(r["_ng_task_index"], r["_ng_rollout_index"]) for r in renumbered} == {
        (0, 2),
        (1, 1),
        (1, 3),
    }
    assert {tuple(r["_ng_collector_indices"]) for r in renumbered} == {
        (0, 0),
        (1, 0),
        (1, 1),
    }
    assert all(r["_ng_attempt_index"] == 1 for r in renumbered)
    calls = read_jsonl(seeded.folder / "calls.jsonl")
    assert len(calls) == TASKS * ROLLOUTS + len(FAIL)  # no answer sampled twice
    assert events(seeded, "row_refused") == []
    assert seeded.invoke("verify", seeded.out).exit_code == 0
    selected = seeded.folder / "selected.jsonl"
    seeded.ok("results", seeded.out, "-o", selected)
    for row in read_jsonl(selected):
        assert seed_of(row) == row["_ng_rollout_index"]


def test_rows_renumbered_without_the_identity_are_refused_never_misrecorded(
    seeded: CliRun,
) -> None:
    """Issue 25: no row under a rollout it may not answer; the stop names the fix."""
    done = run_collector(seeded, keep_id=False)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "copy each plan row's _ng_rollout_id" in done.stdout
    assert "--event row_refused" in done.stdout
    rows = read_jsonl(seeded.out)
    assert rows, "round 1 recorded the rollouts it ran in plan order"
    for row in rows:
        assert seed_of(row) == row["_ng_rollout_index"], row
    refused = events(seeded, "row_refused")
    assert len(refused) == 2 * len(FAIL)  # round 2 and round 3, each line once
    assert {e["round"] for e in refused} == {2, 3}
    assert all("carries no _ng_rollout_id" in e["reason"] for e in refused)
    checked = seeded.invoke("check", seeded.out)
    assert checked.exit_code == 75
    assert "refused" in checked.output
    assert "copy each plan row's _ng_rollout_id" in checked.output
    history = seeded.ok("history", seeded.out, "--event", "row_refused")
    assert "not recorded: the row carries no _ng_rollout_id" in history.output
    assert seeded.invoke("verify", seeded.out).exit_code == 0


def test_record_takes_a_row_by_its_id_and_keeps_a_refused_line_in_the_log(
    seeded: CliRun,
) -> None:
    """Issue 25: ``record`` matches by ``_ng_rollout_id``; a refusal leaves an event."""
    _, plan = seeded.resume()
    assert [row["_ng_rollout_id"] for row in plan[:2]] == ["0-0", "0-1"]
    row = dict(plan[1])  # rollout 1 of task 0, written back as rollout 0
    row.update(_ng_rollout_index=0, reward=1.0)
    row["response"] = {"id": "x", "object": "response", "status": "completed"}
    row.pop("_ng_run_id")
    seeded.record([row])
    recorded = read_jsonl(seeded.out)
    assert [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in recorded] == [(0, 1)]
    assert recorded[0]["_ng_collector_indices"] == [0, 0]
    stranger = {**row, "_ng_rollout_id": "9-9"}
    rows_file = write_jsonl(seeded.folder / "bad.jsonl", [stranger])
    refused = seeded.invoke("record", seeded.out, rows_file)
    assert refused.exit_code != 0
    assert "names no rollout of this run" in refused.output
    kept = events(seeded, "row_refused")
    assert [(e["file"], e["line"], e["round"]) for e in kept] == [
        (str(rows_file), 1, None)
    ]
    line = rows_file.read_bytes().splitlines()[0]
    assert kept[0]["row_sha256"] == hashlib.sha256(line).hexdigest()
    seeded.invoke("record", seeded.out, rows_file)  # the same refusal: kept once
    assert len(events(seeded, "row_refused")) == 1


def test_materialized_ids_name_rows_and_an_id_that_could_name_two_is_refused(
    tmp_path: Path,
) -> None:
    """Issue 25 / ROW-24: a row's own id is its identity; two claims refuse the row."""
    run = CliRun(tmp_path, tasks=2, rollouts=2)
    rows = read_jsonl(run.inputs)
    rows[0]["_ng_rollout_id"] = "1-0"  # task 0 rollout 0 spells task 1 rollout 0
    rows[1]["_ng_rollout_id"] = "alpha"
    write_jsonl(run.inputs, rows)
    run.create()
    _, plan = run.resume()
    assert [row["_ng_rollout_id"] for row in plan] == ["1-0", "alpha", "1-0", "1-1"]
    answer = {"reward": 1.0, "response": {"id": "x", "object": "response"}}
    by_id = {**plan[1], **answer, "_ng_rollout_index": 0}  # "alpha", renumbered
    run.record([by_id])
    recorded = read_jsonl(run.out)
    assert (recorded[0]["_ng_task_index"], recorded[0]["_ng_rollout_index"]) == (0, 1)
    twice = {**plan[2], **answer}
    refused = run.invoke(
        "record", run.out, write_jsonl(tmp_path / "twice.jsonl", [twice])
    )
    assert refused.exit_code == 3
    assert "could name two rollouts" in refused.stderr
    other_task = {**plan[3], **answer, "_ng_task_index": 0}
    refused = run.invoke(
        "record", run.out, write_jsonl(tmp_path / "other.jsonl", [other_task])
    )
    assert refused.exit_code == 3
    assert "the row names task 0 but its _ng_rollout_id '1-1'" in refused.stderr
    assert len(read_jsonl(run.out)) == 1
