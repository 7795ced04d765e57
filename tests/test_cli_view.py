"""CLI-6..CLI-8, CLI-11..CLI-13: status, check, history, results, export, head,
diff-config. Reading commands never write (EV-12)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ledger import Ledger, RunLock
from ledger.events import chain_hash
from projections import history, replay
from tests.test_cli_support import (
    CliRun,
    Templates,
    by_key,
    cli_run,
    failed,
    graded,
    read_jsonl,
    templates,
)

__all__ = ["cli_run", "templates"]

RUN_ID = "db5b5fab8f4d4e279da1494c73cf256d"
MIXED = {
    (0, 1): failed("session_lost", answer=True),  # REC-20.5h: held, kept_answer
    (1, 0): failed("agent_timeout", answer=True),  # REC-20.5a: settled zero
    (2, 1): failed("session_lost"),  # REC-20.5i: counted, retry
}


def build_mixed(run: CliRun) -> None:
    run.create()
    run.collect(by_key(MIXED))


@pytest.fixture
def mixed(tmp_path: Path, templates: Templates) -> CliRun:
    """3 graded, 1 settled zero, 1 held, 1 retry (15 events)."""
    return templates("mixed", tmp_path, build_mixed)


@contextmanager
def writer(run: CliRun) -> Iterator[Ledger]:
    with RunLock(run.out) as lock, Ledger.open(run.out, lock=lock) as led:
        yield led


def snapshot(run: CliRun) -> dict[str, bytes]:
    return {
        str(p): p.read_bytes()
        for p in sorted(run.out.parent.rglob("*"))
        if p.is_file() and not p.name.startswith("ledger.db")
    }


# -- CLI-6: status -------------------------------------------------------------------


def test_cli_6_status_prints_the_summary_coverage_and_held(mixed: CliRun) -> None:
    before = snapshot(mixed)
    result = mixed.ok("status", mixed.out)
    head = result.stdout.splitlines()[10]
    assert result.stdout == (
        # Issue 16: the completion and the reward figures lead.
        "4 of 6 complete (66.7%)\n"
        "mean reward 0.75 ± 0.25 (95% interval -0.05\u20131.55) over 4 scored "
        "rollouts; wider than the rewards' range (0 to 1)\n"
        "left out of the mean: 2 failed (--count-failure-classes-as-zero counts "
        "them as zero)\n"
        "pass@1 0.83 (3 tasks), pass@2 1.00 (1 of 3 tasks: the 2 others have "
        "fewer than 2 scored rollouts); correct: reward ≥ 1\n"
        "per task: 3 tasks, means from 0.50 (task 1) to 1.00 (task 0)\n"
        f"run {RUN_ID} created 2026-01-01T00:00:00.000000Z\n"
        "  configuration b5a4234d9101, inputs 33ab7aae88fe, source dataset not "
        "recorded\n"
        "  attempts per rollout: up to 3 (3 + 0 extension)\n"
        "  recovery policy: defaults (0 changes)\n"
        "  configuration changes accepted 0, identity overrides 0\n"
        f"{head}\n"
        f"  integrity: not verified yet; `rollout-ledger verify {mixed.out}` checks "
        "every byte once, then reports check only what comes after\n"
        "where the 6 rollouts stand (after event 15; `rollout-ledger explain` says "
        "what each word means):\n"
        "  retry            1  (failed 1)\n"
        "  complete         4  (graded 3, settled as zero 1)\n"
        "  held             1  (answer kept 1)\n"
        "  none pending, rejudge, terminal, exhausted, omitted\n"
        "tasks: 1 with every rollout complete, 2 partly, 0 with none\n"
        "masked results 0, rollouts suspected of looping on free attempts 0\n"
        "failure kinds of unfinished rollouts: session_lost 2\n"
        "held (1), each with the command that runs it again:\n"
        "  task 0 rollout 1 attempt 0: held: the sandbox session was lost "
        "(infrastructure); kept an answer; waits for an operator's approval; "
        "0 of 3 counted failures\n"
        f"    rollout-ledger approve {mixed.out} --task 0 --rollout 1 --attempt 0 "
        '--reason "<why>"\n'
        "1 of them kept an answer, so there are two choices: run again (the "
        "commands above; the saved answer is discarded), or grade the saved answer "
        "with the judge, by failure kind (the dry run names each rollout that moves "
        "from held to re-judged; without --dry-run the next round grades them):\n"
        f"  session_lost (1 rollout): rollout-ledger policy {mixed.out} --add "
        'regrade_kinds=session_lost --reason "<why>" --dry-run\n'
        "every held rollout at once (run again; the dry run lists them, without "
        f"--dry-run it records the approvals): rollout-ledger approve {mixed.out} "
        '--all-held --reason "<why>" --dry-run\n'
    )
    assert head.startswith("  log: 15 events, head ")
    assert snapshot(mixed) == before  # EV-12: a reader never writes


def test_cli_6_status_json_has_run_and_coverage(mixed: CliRun) -> None:
    status = json.loads(mixed.ok("status", mixed.out, "--json").stdout)
    published = json.loads((mixed.ledger_dir / "coverage.json").read_text())
    assert set(status) == {
        "schema_version",  # CLI-16: every --json document carries it
        "run",
        "coverage",
        "held",
        "pending_repairs",
        "waiting",
        "metrics",
        "publish",  # null without --publish
        "held_choices",  # issue 28: each held rollout's commands
        "workers",  # null for a run in files (issue 29)
        "verified",  # issue 30: what came after the last verify, checked
        "integrity",  # the same in words
    }
    assert status["coverage"]["decisions"] == {
        "pending": 0,
        "retry": 1,
        "rejudge": 0,
        "complete": 4,
        "held": 1,
        "terminal": 0,
        "exhausted": 0,
        "omitted": 0,
    }
    assert status["coverage"]["as_of_seq"] == 15
    assert status["coverage"] == published  # record published after its batch
    assert status["run"]["run_id"] == RUN_ID
    assert status["run"]["cap"] == 3
    assert status["held"] == [
        {
            "task": 0,
            "rollout": 1,
            "attempt": 0,
            "reason": "kept_answer",
            "kind": "session_lost",
            "rule": "REC-20.5h",
        }
    ]


def test_cli_6_status_lists_pending_repairs(mixed: CliRun) -> None:
    with mixed.out.open("ab") as handle:
        handle.write(b'{"torn')
    status = json.loads(mixed.ok("status", mixed.out, "--json").stdout)
    assert status["pending_repairs"] == [
        {"file": "rollouts.jsonl", "line": 4, "what": "torn last line"}
    ]


def test_cli_6_status_publish_rewrites_the_published_files(mixed: CliRun) -> None:
    (mixed.ledger_dir / "coverage.json").unlink()
    result = mixed.ok("status", mixed.out, "--publish")
    assert result.stdout.endswith("published files rewritten from the log\n")
    assert (
        json.loads((mixed.ledger_dir / "coverage.json").read_text())["as_of_seq"] == 15
    )
    mixed.ok("verify", mixed.out)


# -- CLI-7: check --------------------------------------------------------------------


def test_cli_7_check_is_0_when_complete(cli_run: CliRun) -> None:
    cli_run.collect(by_key({}))
    result = cli_run.ok("check", cli_run.out)
    assert result.stdout == "complete: all 6 rollouts are complete or omitted\n"


def test_cli_7_check_is_75_while_some_work_is_retryable(mixed: CliRun) -> None:
    result = mixed.invoke("check", mixed.out)
    assert result.exit_code == 75
    assert result.stdout == ""
    assert result.stderr == (
        "rollout-ledger: the saved results are valid, but 2 of 6 rollouts are "
        "unfinished (1 held, 1 retry); next: `rollout-ledger run "
        f"{mixed.out} {_configs(mixed)} -- <your collector command, with {{plan}} "
        "and {output}>` / "
        f"`rollout-ledger status {mixed.out}`\n"
    )


def test_cli_7_check_is_76_when_nothing_is_retryable(cli_run: CliRun) -> None:
    cli_run.collect(by_key({(0, 0): failed("session_lost", terminal=True)}))
    result = cli_run.invoke("check", cli_run.out)
    assert result.exit_code == 76
    assert "1 terminal" in result.stderr
    assert f"`rollout-ledger history {cli_run.out} --task 0 --rollout 0`" in (
        result.stderr
    )


def _configs(run: CliRun) -> str:
    """The configuration options ``create`` noted for the run's hints."""
    noted = json.loads((run.ledger_dir / "commands.json").read_text())
    servers = "".join(f" --global-config {p}" for p in noted["global_configs"])
    return f"--config {noted['config']}{servers}"


# -- CLI-8: history ------------------------------------------------------------------


_HEADER = (
    "   seq  time                         actor             kind                  "
    "key         summary"
)


def test_cli_8_history_prints_one_line_per_event(mixed: CliRun) -> None:
    lines = mixed.ok("history", mixed.out).stdout.splitlines()
    assert len(lines) == 16  # the header, then one line per event
    assert lines[0] == _HEADER
    assert lines[1] == (
        "     1  2026-01-01T00:00:00.001000Z  create            run_created         "
        f"  -           run {RUN_ID}: 6 rollouts, cap 3, config b5a4234d9101"
    )
    assert lines[11] == (  # record: its reservations, then its rows' events
        "    11  2026-01-01T00:00:00.003000Z  collector         failure_saved       "
        "  t0 r1 a0    failure session_lost (rollouts_failures.jsonl line 1)"
    )


def test_cli_8_one_rollout_ends_with_its_decision_and_rule(mixed: CliRun) -> None:
    result = mixed.ok("history", mixed.out, "--task", 1, "--rollout", 0)
    assert result.stdout == (
        f"{_HEADER}\n"
        "     3  2026-01-01T00:00:00.002000Z  resume            attempts_released   "
        "  -           released t1 r0 a0 for dispatch\n"
        "     6  2026-01-01T00:00:00.003000Z  collector         attempt_reserved    "
        "  t1 r0 a0    reserved\n"
        "    12  2026-01-01T00:00:00.003000Z  collector         failure_saved       "
        "  t1 r0 a0    failure agent_timeout (rollouts_failures.jsonl line 2)\n"
        "decision: complete: the agent ran out of its time limit (model); scored "
        "zero, the model's own result, reward 0\n"
        "rule: The model ran out of its own time limit: complete, scored by its "
        "recorded grade or else zero; it never runs again.\n"
    )


def test_cli_8_filters_by_event_kind_and_since(mixed: CliRun) -> None:
    result = mixed.ok("history", mixed.out, "--event", "failure_saved", "--since", 12)
    assert [line.split()[0] for line in result.stdout.splitlines()] == [
        "seq",
        "12",
        "15",
    ]


def test_cli_8_history_json(mixed: CliRun) -> None:
    found = json.loads(
        mixed.ok("history", mixed.out, "--task", 0, "--rollout", 1, "--json").stdout
    )
    assert [e["kind"] for e in found["entries"]] == [
        "attempts_released",
        "attempt_reserved",
        "failure_saved",
    ]
    assert found["decision"]["value"] == "held"
    assert found["why"] == "REC-20.5h kept saved answer"


def test_cli_8_an_unknown_rollout_is_exit_3(mixed: CliRun) -> None:
    result = mixed.invoke("history", mixed.out, "--task", 9, "--rollout", 0)
    assert result.exit_code == 3
    assert "task 9, rollout 0 is not among this run's rollouts" in result.stderr


def test_cli_8_marks_duplicate_superseded_and_abandoned(cli_run: CliRun) -> None:
    _, plan = cli_run.resume()
    rows = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in plan}
    with writer(cli_run) as led:
        led.reserve(dict(rows[0, 0]))  # killed in flight: attempt 0 is unknown
    cli_run.record(
        [
            {**rows[0, 1], **graded()},
            {**rows[1, 0], **failed("judge_failed", answer=True)},
        ]
    )
    with writer(cli_run) as led:
        led.record({**rows[0, 1], **graded(0.0)})  # REC-1: a second outcome
    _, plan = cli_run.resume()  # attempt 1 of (0, 0); a re-judgment of (1, 0)
    with writer(cli_run) as led:
        led.admit_judgment(1, 0, 0, "judge")  # then killed: abandoned (REC-33)
    cli_run.record([{**plan[0], **graded()}])
    with writer(cli_run) as led:
        led.record({**rows[0, 0], **graded()})  # REC-2: attempt 0 arrives late
    cli_run.resume()
    lines = cli_run.ok("history", cli_run.out).stdout.splitlines()
    marked = [
        (line.split()[3], line.split()[4:7], line.split("  ")[-1].split(" [")[-1])
        for line in lines
        if " [" in line
    ]
    assert [(kind, key, mark) for kind, key, mark in marked] == [
        ("result_saved", ["t0", "r1", "a0"], "duplicate]"),
        ("judge_admitted", ["t1", "r0", "a0"], "abandoned]"),
        ("result_saved", ["t0", "r0", "a0"], "superseded]"),
    ]


# -- projections.history as values ---------------------------------------------------


def test_cli_8_history_of_a_state_with_its_events_equals_the_ledger_s(
    mixed: CliRun,
) -> None:
    with Ledger.open(mixed.out) as led:
        stored = list(led.events())
        from_ledger = history(led, task=0, rollout=1)
    state = replay(stored)
    assert history(state, events=stored, task=0, rollout=1) == from_ledger
    assert history(stored, task=0, rollout=1) == from_ledger
    assert from_ledger.why == "REC-20.5h kept saved answer"
    with pytest.raises(TypeError):
        history(state)


# -- CLI-12: results -----------------------------------------------------------------


def test_cli_12_results_are_the_selected_rows_with_their_decision(
    mixed: CliRun,
) -> None:
    rows = [
        json.loads(line) for line in mixed.ok("results", mixed.out).stdout.splitlines()
    ]
    assert [
        (r["_ng_task_index"], r["_ng_rollout_index"], r["_ng_decision"], r["reward"])
        for r in rows
    ] == [
        (0, 0, "graded", 1.0),
        (1, 0, "settled_zero", 0.0),
        (1, 1, "graded", 1.0),
        (2, 0, "graded", 1.0),
    ]
    assert rows[1]["_ng_settled_zero"] is True


def test_cli_12_results_all_to_a_file(mixed: CliRun) -> None:
    target = mixed.folder / "selected.jsonl"
    result = mixed.ok("results", mixed.out, "--all", "-o", target)
    assert result.stdout == f"wrote 6 rows to {target}\n"
    rows = read_jsonl(target)
    assert [r["_ng_decision"] for r in rows] == [
        "graded",
        "held",
        "settled_zero",
        "graded",
        "graded",
        "retry",
    ]
    assert "reward" not in rows[1]


# -- CLI-13: export and head ---------------------------------------------------------


def test_cli_13_export_holds_every_event_and_its_chain(mixed: CliRun) -> None:
    lines = mixed.ok("export", mixed.out).stdout.splitlines()
    assert len(lines) == 15
    prev = bytes(32)
    for line in lines:
        event = json.loads(line)
        assert list(event) == [
            "seq",
            "kind",
            "at",
            "actor",
            "body",
            "prev_hash",
            "hash",
        ]
        assert event["prev_hash"] == prev.hex()
        # EV-2: the body as stored, so the chain can be checked from the export.
        body = bytes(msgspec.json.decode(line, type=dict[str, msgspec.Raw])["body"])
        digest = chain_hash(
            prev, event["seq"], event["kind"], event["at"], event["actor"], body
        )
        assert digest.hex() == event["hash"]
        prev = digest
    assert mixed.ok("head", mixed.out).stdout == f"15 {prev.hex()}\n"


def test_cli_13_export_to_a_file(mixed: CliRun) -> None:
    target = mixed.folder / "events.jsonl"
    assert mixed.ok("export", mixed.out, "-o", target).stdout == (
        f"wrote 15 events to {target}\n"
    )
    assert target.read_bytes() == mixed.ok("export", mixed.out).stdout_bytes


# -- CLI-11: diff-config -------------------------------------------------------------


def diff(
    run: CliRun,
    config: dict[str, Any] | None = None,
    servers: dict[str, Any] | None = None,
) -> str:
    """diff-config's text; exit 3 exactly when resume would refuse (CLI-1)."""
    args = [
        "--config",
        run.write_config("c.yaml", config or run.config_data),
        "--global-config",
        run.write_config("s.yaml", servers or run.servers_data),
    ]
    result = run.invoke("diff-config", run.out, *args)
    refuses = "resume would refuse" in result.stdout
    assert result.exit_code == (3 if refuses else 0), result.stderr
    return result.stdout


def test_cli_11_the_same_configuration_would_proceed(cli_run: CliRun) -> None:
    assert diff(cli_run) == (
        "saved config b5a4234d9101, current b5a4234d9101\n"
        "no key differs\n"
        "resume would proceed\n"
    )


def test_cli_11_keys_with_saved_and_current_values_credentials_redacted(
    cli_run: CliRun,
) -> None:
    before = snapshot(cli_run)
    servers = json.loads(json.dumps(cli_run.servers_data))
    model = servers["policy_model"]["responses_api_models"]["vllm_model"]
    model["api_token"] = "sk-literal-1234567"
    config = {
        **cli_run.config_data,
        "num_samples_in_parallel": 8,
        "responses_create_params": {
            "temperature": 0.6,
            "top_p": 0.95,
            "max_output_tokens": 8192,
        },
    }
    assert diff(cli_run, config, servers) == (
        "saved config b5a4234d9101, current c1352e8dee43\n"
        "semantic:\n"
        "  collection.responses_create_params.max_output_tokens: saved 4096, now 8192\n"
        "operational:\n"
        "  collection.num_samples_in_parallel: saved 64, now 8\n"
        "  servers.policy_model.responses_api_models.vllm_model.api_token: saved "
        '(absent), now "<redacted>"\n'
        "resume would refuse (collection.responses_create_params.max_output_tokens); "
        "--allow-unsafe would override\n"
    )
    assert snapshot(cli_run) == before


def test_cli_11_operational_drift_only_would_proceed(cli_run: CliRun) -> None:
    out = diff(cli_run, {**cli_run.config_data, "num_samples_in_parallel": 8})
    assert out.endswith(
        "semantic: none\n"
        "operational:\n"
        "  collection.num_samples_in_parallel: saved 64, now 8\n"
        "resume would proceed\n"
    )
