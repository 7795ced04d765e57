"""Every row of every real NeMo Gym result file goes through row_facts (rows.md, R-8).

The fixtures (`../shared/fixtures/nemo-gym/`, or the folder named by
``ROLLOUT_LEDGER_NEMO_GYM_FIXTURES``) were written by real collectors and agents.
The pinned summary makes any change in a row rule show up as a diff here.
Non-JSON lines (`<PLACEHOLDER ROW>`) are the importer's business and are only
counted.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger import RowFacts, facts_rules, row_facts
from tests.prerequisites import FIXTURES_ENV, nemo_gym_fixtures, require_folder

FIXTURES = nemo_gym_fixtures()
require_folder(FIXTURES, "*.jsonl", FIXTURES_ENV)


def result_files() -> list[Path]:
    """The result files: every rollouts JSONL but materialized inputs and profiles."""
    return sorted(
        path
        for path in FIXTURES.rglob("*.jsonl")
        if "_materialized_inputs" not in path.name
        and "reward_profiling" not in path.name
    )


def fixture_rows() -> Iterator[tuple[str, Any]]:
    """``(relative file, row)`` for every line; the row is ``None`` when not JSON."""
    for path in result_files():
        name = str(path.relative_to(FIXTURES))
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                yield name, json.loads(line)
            except ValueError:
                yield name, None


@pytest.fixture(scope="module")
def facts() -> list[tuple[str, RowFacts]]:
    """The facts of every JSON row of the fixtures, with its file."""
    return [(name, row_facts(row)) for name, row in fixture_rows() if row is not None]


def test_r_8_every_fixture_row_has_facts(facts: list[tuple[str, RowFacts]]) -> None:
    assert len(result_files()) == 146
    assert sum(1 for _, row in fixture_rows() if row is None) == 20
    assert len(facts) == 710


def _summary(facts: list[tuple[str, RowFacts]]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for _, fact in facts:
        counts[f"row_kind:{fact.row_kind}"] += 1
        for flag in (
            "has_saved_generation",
            "legacy_placeholder",
            "keeps_response",
            "has_native_partial",
            "keeps_saved_answer",
            "masked",
            "terminal",
            "omitted",
        ):
            counts[flag] += getattr(fact, flag)
        counts["names_a_kind"] += fact.selected_kind is not None
        counts["names_a_stage"] += fact.stage is not None
        counts["reward"] += fact.reward is not None
        counts["grade_record"] += fact.grade_record is not None
        counts["wallclock"] += fact.wallclock is not None
        counts["captured_calls"] += fact.calls.count
        counts["has_recorded_grade"] += facts_rules.has_recorded_grade(fact)
        counts["final_agent_timeout"] += facts_rules.is_final_agent_timeout(fact)
        counts["infra_agent_timeout"] += facts_rules.is_infrastructure_agent_timeout(
            fact
        )
        counts["masked_candidate"] += (
            facts_rules.masked_candidate_kind(fact) is not None
        )
        counts["masked_regrade"] += facts_rules.masked_regrade_kind(fact) is not None
        counts["route_failure"] += facts_rules.route_failure(fact) is not None
    return dict(sorted(counts.items()))


def test_r_8_summary_of_fixture_facts(facts: list[tuple[str, RowFacts]]) -> None:
    # ROW-2 .. ROW-4: 15 rows keep a response that is no generation (ROW-3:
    # `output: []` without status), and 15 keep none at all.
    assert _summary(facts) == {
        "captured_calls": 0,
        "final_agent_timeout": 0,
        "grade_record": 0,
        "has_native_partial": 0,
        "has_recorded_grade": 700,
        "has_saved_generation": 680,
        "infra_agent_timeout": 0,
        "keeps_response": 695,
        "keeps_saved_answer": 680,
        "legacy_placeholder": 0,
        "masked": 2,
        "masked_candidate": 0,
        "masked_regrade": 0,
        "names_a_kind": 0,
        "names_a_stage": 0,
        "omitted": 0,
        "reward": 700,
        "route_failure": 0,
        "row_kind:result": 710,
        "terminal": 0,
        "wallclock": 0,
    }


def _files_where(facts: list[tuple[str, RowFacts]], test: Any) -> dict[str, int]:
    return dict(sorted(Counter(name for name, fact in facts if test(fact)).items()))


def test_row_3_fixture_placeholders(facts: list[tuple[str, RowFacts]]) -> None:
    # toolsandbox and swebench keep `output: []` with no status (swebench's
    # answer lives in `model_patch`, which ROW-4 does not read).
    placeholders = _files_where(
        facts, lambda f: f.keeps_response and not f.has_saved_generation
    )
    assert placeholders == {
        "resources_servers/gymnasium/data/example_rollouts.jsonl": 5,
        "resources_servers/swebench/data/example_rollouts.jsonl": 5,
        "resources_servers/toolsandbox/data/example_rollouts.jsonl": 5,
    }
    assert _files_where(facts, lambda f: not f.keeps_response) == {
        "resources_servers/bbq/data/example_rollouts.jsonl": 5,
        "resources_servers/genrm_compare/data/example_rollouts.jsonl": 5,
        "resources_servers/multichallenge/data/example_rollouts.jsonl": 5,
    }


def test_row_40_fixture_masks(facts: list[tuple[str, RowFacts]]) -> None:
    # The nested legacy form `instance_config.mask_sample` counts; no masked
    # fixture row names a kind, so every one stays the result (ROW-44).
    masked = _files_where(facts, lambda f: f.masked)
    simulation = "resources_servers/conversational_tool_use_simulation"
    assert masked == {f"{simulation}/data/example_rollouts.jsonl": 2}
    assert {f.mask_owner for _, f in facts if f.masked} == {"environment"}
    assert all(facts_rules.masked_without_artifact_kind(f) is None for _, f in facts)


def test_row_20_harbor_flags_are_all_clear(facts: list[tuple[str, RowFacts]]) -> None:
    # legal_agent_bench carries Harbor's integer `agent_timeout_error`, always 0
    # in the fixtures: no row names agent_timeout.
    harbor = [
        row
        for name, row in fixture_rows()
        if row is not None and "agent_timeout_error" in row
    ]
    assert len(harbor) == 10
    assert all(row_facts(row).selected_kind is None for row in harbor)
    # Set, each would be a final agent timeout: `output: []` with a status is a
    # kept (empty) answer and no call shows a server fault (ROW-36).
    flagged = [row_facts({**row, "agent_timeout_error": 1}) for row in harbor]
    assert all(f.selected_kind == "agent_timeout" for f in flagged)
    assert all(facts_rules.is_final_agent_timeout(f) for f in flagged)
