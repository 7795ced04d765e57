"""NeMo Gym 0.7.0 shapes under the recovery policy (REC-80, REC-81, REC-82).

Each test imports a fixture run (``nemo-gym-0.7/<run>``), changes the policy
once through the public API (``projections.set_policy``) or the CLI
(``rollout-ledger policy``), and decides task 0's rollout 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger import ConfigError, Ledger
from ledger.events import FailureSaved, PolicyChanged, ResultSaved
from projections import import_run
from tests.nemo_gym_070 import (
    SIDECAR,
    Row,
    change_policy,
    cli,
    copy_fixture,
    decision,
    edit_rollout_0,
    imported,
)

# -- REC-80: a run's own failure classes in side_overrides and regrade_kinds ------

#: Kept-answer rows of unregistered producer classes (held by default).
KEPT = [
    ("a06", "infrastructure_error"),
    ("a21", "legitimate"),
    ("s10", "incomplete"),
]


@pytest.mark.parametrize(("run", "kind"), KEPT)
def test_rec_80_kept_answer_of_a_run_class_is_held_by_default(
    run: str, kind: str, tmp_path: Path
) -> None:
    found = decision(imported(run, tmp_path))
    assert (found.value, found.reason, found.kind) == ("held", "kept_answer", kind)


@pytest.mark.parametrize(("run", "kind"), KEPT)
def test_rec_80_one_change_regrades_a_run_class(
    run: str, kind: str, tmp_path: Path
) -> None:
    out = imported(run, tmp_path)
    change_policy(out, {"regrade_kinds": ["judge_failed", "judge_unparseable", kind]})
    found = decision(out)
    assert (found.value, found.rule, found.attempt) == ("rejudge", "REC-20.5g", 0)


@pytest.mark.parametrize(("run", "kind"), KEPT)
def test_rec_80_one_change_settles_a_run_class_as_the_models_zero(
    run: str, kind: str, tmp_path: Path
) -> None:
    out = imported(run, tmp_path)
    change_policy(out, {f"side_overrides.{kind}": "model"})
    found = decision(out)
    assert (found.value, found.reason, found.score) == ("complete", "settled_zero", 0)


@pytest.mark.parametrize(("run", "kind"), KEPT)
def test_rec_80_cli_policy_takes_a_run_class(
    run: str, kind: str, tmp_path: Path
) -> None:
    out = imported(run, tmp_path)
    result = cli(
        "policy", out, "--set", f"side_overrides.{kind}=model", "--reason", "model's"
    )
    assert result.exit_code == 0, result.stderr
    assert f'policy side_overrides.{kind}: null -> "model"' in result.stdout
    assert decision(out).reason == "settled_zero"
    regraded = imported(run, tmp_path / "again")
    kinds = json.dumps(["judge_failed", "judge_unparseable", kind])
    result = cli("policy", regraded, "--set", f"regrade_kinds={kinds}", "--reason", "x")
    assert result.exit_code == 0, result.stderr
    assert decision(regraded).value == "rejudge"


def test_rec_80_an_unknown_class_is_refused_with_what_the_run_has(
    tmp_path: Path,
) -> None:
    out = imported("a06", tmp_path)
    with pytest.raises(ConfigError) as caught:
        change_policy(out, {"side_overrides.infrastructur_error": "model"})
    message = str(caught.value)
    assert "'infrastructur_error'" in message
    assert "neither a registered failure kind nor a failure class" in message
    assert "session_lost" in message  # a registered kind
    assert "other failure classes in this run: infrastructure_error" in message
    assert decision(out).value == "held"  # nothing recorded


def test_rec_80_cli_refuses_an_unknown_class_in_plain_words(tmp_path: Path) -> None:
    out = imported("a21", tmp_path)
    result = cli("policy", out, "--set", 'regrade_kinds=["legitimat"]', "--reason", "x")
    assert result.exit_code == 3
    assert result.stderr.startswith("rollout-ledger: the policy change is not valid")
    assert "other failure classes in this run: legitimate" in result.stderr
    assert "REC-" not in result.stderr


def test_rec_80_cli_refuses_an_unknown_setting_naming_the_settings(
    tmp_path: Path,
) -> None:
    out = imported("a21", tmp_path)
    result = cli("policy", out, "--set", "retry_invalid_judge=true", "--reason", "x")
    assert result.exit_code == 3
    assert "the policy has no setting 'retry_invalid_judge'" in result.stderr
    assert "retry_invalid_judge_responses" in result.stderr
    assert "REC-" not in result.stderr


def test_rec_80_cli_policy_help_names_the_new_setting() -> None:
    result = cli("policy", "--help")
    assert "retry_invalid_judge_responses" in result.stdout
    assert "failure class the run's rows" in " ".join(result.stdout.split())
    assert "REC-" not in result.stdout


# -- REC-81: what retry_terminal_timeouts reopens -----------------------------------


def test_rec_81_a07_reference_missing_is_terminal_by_default(tmp_path: Path) -> None:
    assert decision(imported("a07", tmp_path)).value == "terminal"


@pytest.mark.parametrize(
    "kind", ["reference_missing", "eval_missing", "transport_ineligible"]
)
def test_rec_81_a07_reopened_fault_is_retried(kind: str, tmp_path: Path) -> None:
    """Reopened by the opt-in, the environment fault is dispatched again (the
    issue's a07, as 0.7.0 does), its answer kept in the sidecar."""

    def classed(row: Row) -> Row:
        return {**row, "_ng_failure_class": kind}

    out = imported("a07", tmp_path, edit=classed)
    change_policy(out, {"retry_terminal_timeouts": True})
    found = decision(out)
    assert (found.value, found.reason, found.attempt) == ("retry", "failed", 1)
    assert found.rule == "REC-81"


def test_rec_81_a07_reopened_fault_without_answer_is_retried(tmp_path: Path) -> None:
    def no_answer(row: Row) -> Row:
        return {k: v for k, v in row.items() if k != "response"}

    out = imported("a07", tmp_path, edit=no_answer)
    assert decision(out).value == "terminal"
    change_policy(out, {"retry_terminal_timeouts": True})
    found = decision(out)
    assert (found.value, found.attempt) == ("retry", 1)


@pytest.mark.parametrize("retry_terminal_timeouts", [False, True])
def test_rec_81_skipped_is_terminal_stamped_or_not(
    retry_terminal_timeouts: bool, tmp_path: Path
) -> None:
    def unstamped(row: Row) -> Row:
        return {k: v for k, v in row.items() if k != "_ng_failure_terminal"}

    out = imported("s03", tmp_path, edit=unstamped)
    change_policy(out, {"retry_terminal_timeouts": retry_terminal_timeouts})
    assert decision(out).value == "terminal"


@pytest.mark.parametrize(
    ("stamp", "value"),
    [(1, "terminal"), ("yes", "terminal"), ([0], "terminal"), (0, "retry"),
     ("", "retry"), (None, "retry"), (False, "retry")],
)  # fmt: skip
def test_rec_81_any_json_true_terminal_stamp_counts(
    stamp: Any, value: str, tmp_path: Path
) -> None:
    def stamped(row: Row) -> Row:
        return {**row, "_ng_failure_terminal": stamp}

    assert decision(imported("c06", tmp_path, edit=stamped)).value == value


# -- REC-82: invalid judge responses ---------------------------------------------------


def test_rec_82_j02_is_complete_by_default(tmp_path: Path) -> None:
    found = decision(imported("j02", tmp_path))
    assert (found.value, found.reason, found.score) == ("complete", "graded", 0)


def test_rec_82_j02_is_rejudged_under_retry_invalid_judge_responses(
    tmp_path: Path,
) -> None:
    out = imported("j02", tmp_path)
    result = cli(
        "policy", out, "--set", "retry_invalid_judge_responses=true", "--reason", "x"
    )
    assert result.exit_code == 0, result.stderr
    assert "policy retry_invalid_judge_responses: false -> true" in result.stdout
    found = decision(out)
    assert (found.value, found.rule, found.attempt) == ("rejudge", "REC-82", 0)
    with Ledger.open(out) as reader:  # recorded like every policy change
        changes = [e.body for e in reader.events() if isinstance(e.body, PolicyChanged)]
    assert [set(c.changes) for c in changes] == [{"retry_invalid_judge_responses"}]
    change_policy(out, {"retry_invalid_judge_responses": False})
    assert decision(out).value == "complete"


def _j04(folder: Path) -> Path:
    """j03's migrated sidecar row with j02's main row still in OUT: a move
    0.7.0 did not finish."""
    out = copy_fixture("j03", folder)
    main = copy_fixture("j02", folder / "j02")
    out.write_bytes(main.read_bytes())
    return out


@pytest.mark.parametrize("retry_invalid_judge_responses", [False, True])
def test_rec_82_j04_migrated_sidecar_row_supersedes_the_main_copy(
    retry_invalid_judge_responses: bool, tmp_path: Path
) -> None:
    out = _j04(tmp_path)
    bodies = [e.body for e in import_run(out).report.events]
    outcomes = [(type(b).__name__, b.rollout, b.attempt) for b in bodies
                if isinstance(b, FailureSaved | ResultSaved)]  # fmt: skip
    # REC-82: the main copy is the moved row's duplicate, never attempt 1.
    assert outcomes == [
        ("FailureSaved", 0, 0), ("ResultSaved", 0, 0), ("ResultSaved", 1, 0)
    ]  # fmt: skip
    change_policy(out, {"retry_invalid_judge_responses": retry_invalid_judge_responses})
    found = decision(out)
    assert (found.value, found.attempt, found.kind) == ("rejudge", 0, "judge_invalid")
    assert decision(out, rollout=1).value == "complete"


def test_rec_82_unmarked_sidecar_row_leaves_the_main_copy_selected(
    tmp_path: Path,
) -> None:
    """Without the marker the sidecar row is an earlier attempt (REC-72)."""
    out = _j04(tmp_path)

    def unmarked(row: Row) -> Row:
        return {
            k: v for k, v in row.items() if k != "_ng_migrated_invalid_judge_response"
        }

    edit_rollout_0(out, SIDECAR, unmarked)
    import_run(out)
    found = decision(out)
    assert (found.value, found.attempt) == ("complete", 1)
