"""CLI-2, CLI-4, CLI-5: create, resume and record through the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger import Ledger, RunLock, RunManifest
from tests.internals import record_plan_rows
from tests.test_cli_support import (
    CliRun,
    by_key,
    cli_run,
    failed,
    graded,
    read_jsonl,
    templates,
    write_jsonl,
)
from tests.test_identity import nemo_configuration

__all__ = ["cli_run", "templates"]


def kinds(run: CliRun) -> list[str]:
    with Ledger.open(run.out) as led:
        return [event.kind for event in led.events()]


def files(run: CliRun) -> dict[str, bytes]:
    return {
        str(p.relative_to(run.folder)): p.read_bytes()
        for p in sorted(run.folder.rglob("*"))
        if p.is_file() and p.name != "run.lock" and not p.name.startswith("ledger.db")
    }


# -- CLI-2: create ------------------------------------------------------------------


def test_cli_2_create_writes_the_run_and_prints_it(tmp_path: Path) -> None:
    run = CliRun(tmp_path)
    result = run.create()
    assert result.stdout == (
        "created run db5b5fab8f4d4e279da1494c73cf256d: 6 rollouts of 3 tasks, cap 3, "
        "config b5a4234d9101, journal wal\n"
        f"next: rollout-ledger run {run.out} --config {run.config} "
        f"--global-config {run.servers} -- <your collector command, with {{plan}} "
        "and {output}>\n"
    )
    assert result.stderr == ""
    assert kinds(run) == ["run_created"]
    for name in ("manifest.json", "identity.json", "coverage.json"):
        assert (run.ledger_dir / name).is_file()
    coverage = json.loads((run.ledger_dir / "coverage.json").read_text())
    assert coverage["decisions"]["pending"] == 6


def test_cli_2_the_config_digest_is_the_library_s_for_the_same_files(
    tmp_path: Path,
) -> None:
    # Interpolations stay unresolved (${oc.env:HF_TOKEN} is unset here).
    run = CliRun(tmp_path)
    run.create()
    config, servers, _ = nemo_configuration()
    rows = read_jsonl(run.out.parent / "rollouts_materialized_inputs.jsonl")
    expected = RunManifest.create(None, rows, config, servers).config_digest
    with Ledger.open(run.out) as led:
        assert led.run_created().config_digest == expected


def test_cli_2_a_row_without_agent_ref_takes_the_collection_s_agent_name(
    tmp_path: Path,
) -> None:
    run = CliRun(tmp_path, tasks=1)
    rows = read_jsonl(run.inputs)
    rows[1]["agent_ref"] = {"type": "responses_api_agents", "name": "math_agent"}
    write_jsonl(run.inputs, rows)
    run.create()
    materialized = read_jsonl(run.out.parent / "rollouts_materialized_inputs.jsonl")
    assert [row["agent_ref"] for row in materialized] == [
        {"name": "math_agent"},
        {"type": "responses_api_agents", "name": "math_agent"},
    ]


def test_cli_2_global_configs_merge_in_order_as_hydra_does(tmp_path: Path) -> None:
    run = CliRun(tmp_path)
    first = run.write_config(
        "first.yaml", {**run.servers_data, "policy_model_name": "x"}
    )
    second = run.write_config(
        "second.yaml", {"policy_model_name": "nvidia/nemotron-nano-9b"}
    )
    result = run.invoke(
        "create",
        run.out,
        "--inputs",
        run.inputs,
        "--config",
        run.config,
        "--global-config",
        first,
        "--global-config",
        second,
    )
    assert result.exit_code == 0
    assert "config b5a4234d9101" in result.stdout  # the same digest as one file


def test_cli_2_max_attempts_and_journal_mode(tmp_path: Path) -> None:
    run = CliRun(tmp_path)
    result = run.create("--max-attempts", 5, "--journal-mode", "delete")
    assert "cap 5, config b5a4234d9101, journal delete\n" in result.stdout
    with Ledger.open(run.out) as led:
        assert led.journal_mode == "delete"


def test_cli_2_an_existing_run_is_refused_pointing_to_resume(cli_run: CliRun) -> None:
    result = cli_run.invoke(
        "create", cli_run.out, "--inputs", cli_run.inputs, *cli_run.config_args()
    )
    assert result.exit_code == 3  # CLI-2: a refusal (ConfigError)
    assert result.stdout == ""
    assert "rollout-ledger resume" in result.stderr
    assert "rollout-ledger import" in result.stderr
    assert kinds(cli_run) == ["run_created"]


def test_cli_2_a_lock_file_alone_does_not_count(tmp_path: Path) -> None:
    run = CliRun(tmp_path)
    RunLock(run.out).acquire().release()  # leaves rollouts_ledger/run.lock
    assert run.create().exit_code == 0


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        # Duplicate keys, rows without indices, lines that are not JSON: exit 3.
        ([{"_ng_task_index": 0, "_ng_rollout_index": 0}] * 2, "share the key"),
        ([{"_ng_task_index": 0}], "no integer _ng_rollout_index"),
        (["not json"], "line 1 of"),
    ],
)
def test_cli_2_bad_input_rows_are_refused_with_exit_3(
    tmp_path: Path, rows: list[Any], message: str
) -> None:
    run = CliRun(tmp_path)
    if rows == ["not json"]:
        run.inputs.write_text("{not json\n")
    else:
        write_jsonl(run.inputs, rows)
    result = run.invoke("create", run.out, "--inputs", run.inputs, *run.config_args())
    assert result.exit_code == 3
    assert message in result.stderr
    assert not (run.ledger_dir / "ledger.db").exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [("a: [1\n", "cannot read the configuration"), ("- 1\n- 2\n", "not a mapping")],
)
def test_cli_2_an_unreadable_configuration_is_exit_3(
    tmp_path: Path, text: str, message: str
) -> None:
    run = CliRun(tmp_path)
    run.config.write_text(text)
    result = run.invoke("create", run.out, "--inputs", run.inputs, *run.config_args())
    assert result.exit_code == 3
    assert message in result.stderr


def test_cli_1_a_held_lock_is_exit_4_naming_the_holder(tmp_path: Path) -> None:
    run = CliRun(tmp_path)
    with RunLock(run.out):
        result = run.invoke(
            "create", run.out, "--inputs", run.inputs, *run.config_args()
        )
    assert result.exit_code == 4
    assert result.stderr.startswith("rollout-ledger: the run lock ")
    assert "Traceback" not in result.stderr


# -- REC-61: the policy of a new run --------------------------------------------------


def policy_of(run: CliRun) -> dict[str, Any]:
    status = json.loads(run.ok("status", run.out, "--json").stdout)
    policy: dict[str, Any] = status["run"]["policy"]
    return policy


def test_rec_61_policy_file_is_the_run_s_policy(tmp_path: Path) -> None:
    run = CliRun(tmp_path)
    policy = tmp_path / "policy.json"
    policy.write_text('{"retry_terminal_timeouts": true, "max_free_attempts": 2}')
    run.create("--policy", policy)
    assert policy_of(run)["retry_terminal_timeouts"] is True
    assert policy_of(run)["max_free_attempts"] == 2


@pytest.mark.parametrize(("owner", "expected"), [(["rollouts"], 4), (["other"], 5)])
def test_rec_61_the_owning_launcher_s_policy_for_a_listed_stem(
    tmp_path: Path, owner: list[str], expected: int
) -> None:
    run = CliRun(tmp_path)
    run.out.parent.mkdir()
    (run.out.parent / "recovery_policy.json").write_text(
        json.dumps({"owner": owner, "policy": {"max_free_attempts": 4}})
    )
    run.create()
    assert policy_of(run)["max_free_attempts"] == expected


@pytest.mark.parametrize(
    "text", ['{"max_free_attempts": 0}', '{"typo": 1}', "not json"]
)
def test_rec_61_a_malformed_policy_file_is_exit_3(tmp_path: Path, text: str) -> None:
    run = CliRun(tmp_path)
    policy = tmp_path / "policy.json"
    policy.write_text(text)
    result = run.invoke(
        "create",
        run.out,
        "--inputs",
        run.inputs,
        *run.config_args(),
        "--policy",
        policy,
    )
    assert result.exit_code == 3
    assert "policy" in result.stderr


# -- CLI-4: resume -------------------------------------------------------------------


def test_cli_4_resume_prints_the_verdict_and_the_plan(cli_run: CliRun) -> None:
    result, plan = cli_run.resume()
    assert result.stdout == (
        "gate: passed (configuration unchanged)\n"
        "plan: 6 to dispatch, 0 to re-judge, 0 held\n"
        "  counts: dispatch 6, held_planned 0, in_flight 0, pending 6, "
        "rejudge_planned 0\n"
        f"plan written to {cli_run.folder / 'plan1.jsonl'}\n"
    )
    assert [
        (r["_ng_task_index"], r["_ng_rollout_index"], r["_ng_attempt_index"])
        for r in plan
    ] == [(t, r, 0) for t in range(3) for r in range(2)]
    assert {r["_ng_run_id"] for r in plan} == {"db5b5fab8f4d4e279da1494c73cf256d"}
    assert kinds(cli_run)[-2:] == ["resume_started", "attempts_released"]


def test_cli_4_plan_out_lists_rejudgments_after_the_rows(cli_run: CliRun) -> None:
    cli_run.collect(
        by_key(
            {
                (0, 1): failed("judge_failed", answer=True),
                (1, 0): failed("session_lost"),
            }
        )
    )
    result, plan = cli_run.resume()
    assert "plan: 1 to dispatch, 1 to re-judge, 0 held\n" in result.stdout
    assert plan[0]["_ng_attempt_index"] == 1
    assert (plan[0]["_ng_task_index"], plan[0]["_ng_rollout_index"]) == (1, 0)
    assert plan[1] == {
        "rejudge": {
            "task": 0,
            "rollout": 1,
            "attempt": 0,
            "file": "rollouts_failures.jsonl",
            "offset": 0,
            "length": plan[1]["rejudge"]["length"],
        }
    }


def test_cli_4_dry_run_prints_the_plan_and_writes_nothing(cli_run: CliRun) -> None:
    before = files(cli_run), kinds(cli_run)
    result = cli_run.ok("resume", cli_run.out, *cli_run.config_args(), "--dry-run")
    assert result.stdout.endswith(
        "plan: 6 to dispatch, 0 to re-judge, 0 held\n"
        "  counts: dispatch 6, held_planned 0, in_flight 0, pending 6, "
        "rejudge_planned 0\n"
        "dry run: nothing was written\n"
    )
    assert (files(cli_run), kinds(cli_run)) == before


def test_cli_4_dry_run_with_plan_out_is_a_usage_error(cli_run: CliRun) -> None:
    result = cli_run.invoke(
        "resume",
        cli_run.out,
        *cli_run.config_args(),
        "--dry-run",
        "--plan-out",
        cli_run.folder / "p.jsonl",
    )
    assert result.exit_code == 2
    assert "--dry-run writes nothing" in result.stderr


def drifted(run: CliRun, key: str, value: Any) -> Path:
    return run.write_config("drifted.yaml", {**run.config_data, key: value})


def test_cli_4_a_semantic_change_is_refused_with_saved_and_current_values(
    cli_run: CliRun,
) -> None:
    config = drifted(cli_run, "responses_create_params", {"temperature": 1.0})
    before = kinds(cli_run)
    result = cli_run.invoke(
        "resume", cli_run.out, "--config", config, "--global-config", cli_run.servers
    )
    assert result.exit_code == 3
    assert result.stdout == ""
    assert "collection.responses_create_params.temperature: saved 0.6, now 1.0" in (
        result.stderr
    )
    assert "--allow-unsafe" in result.stderr
    assert kinds(cli_run) == before


def test_cli_4_allow_unsafe_proceeds_and_records_the_override(cli_run: CliRun) -> None:
    config = drifted(cli_run, "responses_create_params", {"temperature": 1.0})
    result = cli_run.invoke(
        "resume",
        cli_run.out,
        "--config",
        config,
        "--global-config",
        cli_run.servers,
        "--allow-unsafe",
        "--reason",
        "new sampling",
    )
    assert result.exit_code == 0
    assert result.stdout.startswith("gate: overridden with --allow-unsafe")
    assert "rollout-ledger: warning: --allow-unsafe proceeded across" in result.stderr
    assert "identity_overridden" in kinds(cli_run)


def test_cli_4_operational_drift_passes_with_a_warning_on_stderr(
    cli_run: CliRun,
) -> None:
    config = drifted(cli_run, "num_samples_in_parallel", 8)
    result = cli_run.invoke(
        "resume", cli_run.out, "--config", config, "--global-config", cli_run.servers
    )
    assert result.exit_code == 0
    assert result.stdout.startswith(
        "gate: passed across operational drift: collection.num_samples_in_parallel\n"
    )
    assert result.stderr == (
        "rollout-ledger: warning: operational drift accepted: "
        "collection.num_samples_in_parallel\n"
    )


def test_cli_4_operator_options_are_recorded(cli_run: CliRun) -> None:
    approvals = cli_run.folder / "approvals.txt"
    approvals.write_text("# reruns\n0 1 0\nnot a line\n")
    result, _ = cli_run.resume(
        "--extend-attempts",
        2,
        "--retry-terminal-timeouts",
        "--rerun-masked-without-artifact",
        approvals,
    )
    assert result.stderr == (
        "rollout-ledger: warning: approvals.txt line 3 approves nothing: expected "
        "three non-negative integers: TASK ROLLOUT ATTEMPT\n"
    )
    assert kinds(cli_run)[1:] == [
        "attempts_extended",
        "policy_changed",
        "rerun_approved",
        "resume_started",
        "attempts_released",
    ]


def test_cli_4_rec_10_a_changed_environment_cap_only_warns(
    cli_run: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", "7")
    result, _ = cli_run.resume()
    assert "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS is '7'" in result.stderr
    assert result.stderr.startswith("rollout-ledger: warning: ")


# -- CLI-5: record -------------------------------------------------------------------


def test_cli_5_record_reserves_and_records_each_row(cli_run: CliRun) -> None:
    _, plan = cli_run.resume()
    rows = [{**plan[0], **graded()}, {**plan[1], **failed("session_lost")}]
    result = cli_run.record(rows)
    assert result.stdout == (
        "recorded 2 rows: 1 result, 1 failure, 0 omissions, 0 re-judgments "
        "(2 attempts reserved)\n"
    )
    # The reservations commit first, the rows and their events after them, so
    # a record killed after its rows leaves rows of reserved attempts (EV-12).
    assert kinds(cli_run)[-4:] == [
        "attempt_reserved",
        "attempt_reserved",
        "result_saved",
        "failure_saved",
    ]
    assert len(read_jsonl(cli_run.out)) == 1


def test_cli_5_a_row_that_fits_nothing_refuses_the_whole_file(cli_run: CliRun) -> None:
    _, plan = cli_run.resume()
    rows = [{**plan[0], **graded()}, {**plan[1], "_ng_attempt_index": 1, **graded()}]
    before = kinds(cli_run)
    result = cli_run.invoke(
        "record", cli_run.out, write_jsonl(cli_run.folder / "o.jsonl", rows)
    )
    assert result.exit_code == 3
    assert result.stderr.startswith(
        f"rollout-ledger: line 2 of {cli_run.folder / 'o.jsonl'}: attempt 1 of task 0, "
        "rollout 1 is not released"
    )
    assert "nothing of the file was recorded" in result.stderr
    assert kinds(cli_run) == [*before, "row_refused"]  # issue 25: the line is kept
    assert not cli_run.out.exists()


def test_cli_5_a_line_that_is_not_json_is_exit_3(cli_run: CliRun) -> None:
    bad = cli_run.folder / "o.jsonl"
    bad.write_text('{"a": 1}\n\n{oops\n')
    before = kinds(cli_run)
    result = cli_run.invoke("record", cli_run.out, bad)
    assert result.exit_code == 3
    assert f"line 3 of {bad} is not JSON" in result.stderr
    assert kinds(cli_run) == before  # not JSON Lines: refused before the lock


def test_cli_5_rejudgments_are_admitted_and_saved_with_the_run_s_digest(
    cli_run: CliRun,
) -> None:
    cli_run.collect(by_key({(0, 1): failed("judge_failed", answer=True)}))
    _, plan = cli_run.resume()
    item = plan[0]["rejudge"]
    key = {k: item[k] for k in ("task", "rollout", "attempt")}
    result = cli_run.record([{"_ng_rejudgment": key, **graded(0.5)}])
    assert result.stdout == (
        "recorded 1 row: 0 results, 0 failures, 0 omissions, 1 re-judgment "
        "(0 attempts reserved)\n"
    )
    with Ledger.open(cli_run.out) as led:
        admitted = [e.body for e in led.events() if e.kind == "judge_admitted"]
        assert [a.judge for a in admitted] == [led.run_created().config_digest]
    cli_run.ok("check", cli_run.out)


def test_cli_5_a_collector_killed_before_recording_leaves_nothing(
    cli_run: CliRun,
) -> None:
    _, first = cli_run.resume()
    _, second = cli_run.resume()  # the first plan was never recorded
    assert second == first
    assert "attempt_reserved" not in kinds(cli_run)


def test_cli_5_record_plan_rows_counts_events_by_kind(cli_run: CliRun) -> None:
    _, plan = cli_run.resume()
    with RunLock(cli_run.out) as lock, Ledger.open(cli_run.out, lock=lock) as led:
        counts = record_plan_rows(led, [{**plan[0], "_ng_no_persist": True}])
    assert counts == {"attempt_reserved": 1}
