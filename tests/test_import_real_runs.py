"""Issue 7 / R-8: complete real NeMo Gym run sets import, resume and export.

The claude_code_agent math run and the blackjack run of the fixtures are
imported as an older collector left them; their first resume is refused with a
message that names ``--allow-unsafe`` (REC-57: an imported run keeps no identity
the ledger can compare), passes with it, and ``results`` exports the selected
rows. The collector files are byte-identical throughout (REC-70).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main
from tests.prerequisites import FIXTURES_ENV, nemo_gym_fixtures, unavailable

FIXTURES = nemo_gym_fixtures()
RUNS = {
    "claude_code_math": (
        "responses_api_agents/claude_code_agent/data/example_math_rollouts",
        "math_with_judge_claude_code_agent",
        "claude_code_agent",
    ),
    "blackjack": (
        "resources_servers/blackjack/data/example_rollouts",
        "blackjack_gymnasium_agent",
        "gymnasium_agent",
    ),
}


def copy_run(stem_path: str, folder: Path) -> Path:
    source = FIXTURES / stem_path
    if not source.with_suffix(".jsonl").exists():
        unavailable(f"no {source.name}.jsonl at {FIXTURES}; point {FIXTURES_ENV} at it")
    stem = source.name
    for suffix in (".jsonl", "_materialized_inputs.jsonl", "_failures.jsonl"):
        found = source.parent / f"{stem}{suffix}"
        if found.exists():
            shutil.copyfile(found, folder / found.name)
    return folder / f"{stem}.jsonl"


def write_configs(folder: Path, agent: str, implementation: str) -> list[str]:
    collection = folder / "collection.yaml"
    collection.write_text(f"agent_name: {agent}\nnum_repeats: 1\n")
    servers = folder / "servers.yaml"
    servers.write_text(
        f"{agent}:\n  responses_api_agents:\n    {implementation}:\n"
        "      entrypoint: app.py\n      host: 127.0.0.1\n      port: 40001\n"
    )
    return ["--config", str(collection), "--global-config", str(servers)]


def collector_bytes(out: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes()
        for p in out.parent.iterdir()
        if p.is_file() and p.name.startswith(out.stem) and p.suffix == ".jsonl"
    }


def invoke(*args: str) -> object:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_rec_70_real_runs_import_resume_with_allow_unsafe_and_export(
    tmp_path: Path, name: str
) -> None:
    stem_path, agent, implementation = RUNS[name]
    out = copy_run(stem_path, tmp_path)
    before = collector_bytes(out)
    imported = invoke("import", str(out), "--json")
    assert imported.exit_code == 0, imported.stderr
    report = json.loads(imported.stdout)
    assert report["rows"]["imported"] > 0
    configs = write_configs(tmp_path, agent, implementation)
    refused = invoke("resume", str(out), *configs)
    assert refused.exit_code == 3
    assert "--allow-unsafe" in refused.stderr
    assert "Traceback" not in refused.stderr + refused.stdout
    resumed = invoke(
        "resume", str(out), *configs, "--allow-unsafe", "--reason", "import"
    )
    assert resumed.exit_code == 0, resumed.stderr
    selected = tmp_path / "selected.jsonl"
    exported = invoke("results", str(out), "-o", str(selected))
    assert exported.exit_code == 0, exported.stderr
    rows = [json.loads(line) for line in selected.read_text().splitlines()]
    status = json.loads(invoke("status", str(out), "--json").stdout)
    assert len(rows) == status["coverage"]["decisions"]["complete"] > 0
    assert all("_ng_decision" in row for row in rows)
    assert invoke("verify", str(out)).exit_code == 0
    assert collector_bytes(out) == before  # REC-70: never modified


# The failure-row shapes real collectors wrote (nemo_gym_formats.md, sections 2
# and 3), one rollout each, in a sidecar an older collector left.
ANSWER = {
    "id": "resp_1",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "\\boxed{42}"}],
        }
    ],
}
SIDECAR_SHAPES = [
    # (task, rows of the sidecar, main row?, expected decision, attempt, rule)
    (
        0,
        [{"_ng_failure_class": "transient", "error_stage": "verify"}] * 2,
        True,
        "complete",
        2,
        "REC-20.4e",
    ),
    (
        1,
        [{"_ng_failure_class": "timeout_exceeded", "_ng_failure_terminal": True}],
        False,
        "terminal",
        0,
        "REC-20.5b",
    ),
    (
        2,
        [
            {
                "_ng_failure_class": "skipped",
                "_ng_failure_terminal": True,
                "_ng_failure_message": "sample skipped",
            }
        ],
        False,
        "terminal",
        0,
        "REC-20.5b",
    ),
    (
        3,
        [{"_ng_failure_class": "judge_failed", "response": ANSWER}],
        False,
        "rejudge",
        0,
        "REC-20.5g",
    ),
    (
        4,
        [
            {
                "_ng_failure_class": "agent_request_failed",
                "error": "/run returned HTTP 500: boom",
            }
        ],
        False,
        "retry",
        1,
        "REC-20.5f",
    ),
    (5, [{"_ng_failure_class": "legitimate"}], False, "retry", 1, "REC-20.5i"),
    (6, [{"_ng_failure_class": "incomplete"}] * 3, False, "exhausted", 2, "REC-20.5i"),
]


def test_rec_72_real_failure_shapes_import_with_attempts_and_decisions(
    tmp_path: Path,
) -> None:
    from ledger import Ledger
    from projections import decide, import_run

    inputs, sidecar, main_rows = [], [], []
    for task, rows, has_main, *_ in SIDECAR_SHAPES:
        key = {"_ng_task_index": task, "_ng_rollout_index": 0}
        inputs.append({**key, "agent_ref": {"name": "math_agent"}})
        sidecar += [{**key, "reward": 0.0, **row} for row in rows]
        if has_main:
            main_rows.append({**key, "response": ANSWER, "reward": 1.0})
    out = tmp_path / "rollouts.jsonl"
    write = lambda path, rows: path.write_text(  # noqa: E731
        "".join(json.dumps(r) + "\n" for r in rows)
    )
    write(tmp_path / "rollouts_materialized_inputs.jsonl", inputs)
    write(tmp_path / "rollouts_failures.jsonl", sidecar)
    write(out, main_rows)
    imported = import_run(out)
    for task, _, _, value, attempt, rule in SIDECAR_SHAPES:
        decision = decide(imported.state, task, 0)
        assert (decision.value, decision.attempt, decision.rule) == (
            value,
            attempt,
            rule,
        )
    with Ledger.open(out) as led:
        attempts = [
            (e.body.task, e.body.attempt)
            for e in led.events(kinds=["failure_saved", "result_saved"])
        ]
    # REC-72: a sidecar row counts the earlier sidecar rows of its key; a main
    # row the sidecar rows of its key.
    assert attempts == [
        (0, 0),
        (0, 1),
        (1, 0),
        (2, 0),
        (3, 0),
        (4, 0),
        (5, 0),
        (6, 0),
        (6, 1),
        (6, 2),
        (0, 2),
    ]
