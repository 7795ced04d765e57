"""Issue 16: the numbers people report, from the selected results (CLI-12).

Checked by hand on real runs (NeMo Gym's example runs and the 0.7.0 fixture
runs), against NeMo Gym's own ``_aggregate_metrics.json`` where a run ships
one, and per counting option (NeMo Gym 0.7.0's ``count_failure_classes_as_zero``
and ``count_missing_rollouts_as_zero``, reference 1.10). Everything goes
through ``projections`` and the command line.
"""

from __future__ import annotations

import itertools
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from ledger import Clock, Ledger
from projections import (
    RewardMetrics,
    import_run,
    metrics_lines,
    replay,
    reward_metrics,
)
from tests.internals import pass_at_k, t_quantile_975
from tests.nemo_gym_070 import SIDECAR, cli, copy_fixture, decision, imported
from tests.prerequisites import nemo_gym_fixtures

FIXTURES = nemo_gym_fixtures()
#: Every NeMo Gym example run that ships NeMo Gym's own aggregate metrics.
SHIPPED = sorted(
    str(p.relative_to(FIXTURES)).removesuffix("_aggregate_metrics.json")
    for p in FIXTURES.glob("**/*_aggregate_metrics.json")
)
_STATS = ("mean/", "max/", "min/", "median/", "std/")


def _copy_example(stem_path: str, folder: Path) -> Path:
    source = FIXTURES / stem_path
    for suffix in (".jsonl", "_materialized_inputs.jsonl", "_failures.jsonl"):
        found = source.parent / f"{source.name}{suffix}"
        if found.exists():
            shutil.copyfile(found, folder / found.name)
    return folder / f"{source.name}.jsonl"


def _metrics(out: Path, **options: bool) -> RewardMetrics:
    with Ledger.open(out) as led:
        return reward_metrics(led, replay(led), **options)


def _figures(found: RewardMetrics) -> tuple[Any, ...]:
    """What a counting option may change: the values and every figure of them."""
    return (
        found.n,
        found.mean,
        found.standard_error,
        found.interval_95,
        found.per_task,
        found.pass_at_k,
    )


def _rewards(path: Path) -> list[float]:
    return [json.loads(line)["reward"] for line in path.read_text().splitlines()]


def _by_hand(values: list[float]) -> tuple[float, float, float, float]:
    """Mean, standard error and the 95% t interval, written out."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in values) / (n - 1))
    se = sd / math.sqrt(n)
    t = {4: 2.776}[n - 1]  # Student's t, 0.975, from a printed table
    return mean, se, mean - t * se, mean + t * se


def test_t_quantile_and_pass_at_k_match_their_definitions() -> None:
    """pass@k is the chance that k draws without replacement hold a correct one."""
    assert t_quantile_975(1) == 12.706
    assert t_quantile_975(30) == 2.042
    assert t_quantile_975(31) == pytest.approx(2.0395, abs=1e-4)
    assert t_quantile_975(120) == pytest.approx(1.9799, abs=1e-4)
    for n, c in itertools.product(range(1, 7), range(7)):
        if c > n:
            continue
        outcomes = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            draws = list(itertools.combinations(outcomes, k))
            expected = sum(any(d) for d in draws) / len(draws)
            assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_cli_12_blackjack_figures_by_hand(tmp_path: Path) -> None:
    """Five rollouts of one task, rewards -1/1: mean, SE, interval and pass@k."""
    out = _copy_example("resources_servers/blackjack/data/example_rollouts", tmp_path)
    rewards = _rewards(out)
    import_run(out, clock=Clock(seed=1))
    found = _metrics(out)
    mean, se, low, high = _by_hand(rewards)
    assert (found.n, found.scored, found.complete, found.expected) == (5, 5, 5, 5)
    assert found.mean == pytest.approx(mean) == pytest.approx(0.2)
    assert found.standard_error == pytest.approx(se)
    assert found.interval_95 is not None
    assert found.interval_95 == pytest.approx((low, high), abs=2e-3)
    assert (found.minimum, found.maximum, found.median) == (-1.0, 1.0, 1.0)
    # 3 of 5 reach the reward 1: pass@1 = 3/5, pass@2 = 1 - C(2,2)/C(5,2).
    assert [(p.k, p.value, p.tasks) for p in found.pass_at_k] == [
        (1, pytest.approx(0.6), 1),
        (2, pytest.approx(0.9), 1),
        (4, 1.0, 1),
        (5, 1.0, 1),
    ]
    assert [(t.task, t.rollouts, t.mean) for t in found.per_task] == [
        (0, 5, pytest.approx(0.2))
    ]


def test_cli_6_status_leads_with_completion_and_the_mean(tmp_path: Path) -> None:
    """CLI-6: the first lines are the completion and the reward figures."""
    out = _copy_example("resources_servers/blackjack/data/example_rollouts", tmp_path)
    import_run(out, clock=Clock(seed=1))
    lines = cli("status", out).output.splitlines()
    assert lines[0] == "5 of 5 complete (100.0%)"
    assert lines[1] == (
        "mean reward 0.20 ± 0.49 (95% interval -1.16\u20131.56) over 5 scored rollouts"
        "; wider than the rewards' range (-1 to 1)"
    )
    assert lines[2].startswith("pass@1 0.60, pass@2 0.90, pass@4 1.00, pass@5 1.00")
    assert lines[3].startswith("run ")
    document = json.loads(cli("status", out, "--json").output)
    assert document["metrics"]["reward"]["mean"] == pytest.approx(0.2)
    assert document["metrics"]["complete"] == 5
    assert document["metrics"]["reward"]["counting"] == {
        "count_failure_classes_as_zero": False,
        "failure_classes_counted_as_zero": 0,
        "count_missing_rollouts_as_zero": False,
        "missing_counted_as_zero": 0,
    }


def _theirs_and_ours(stem_path: str, folder: Path) -> tuple[list[Any], list[Any]]:
    out = _copy_example(stem_path, folder)
    inputs = out.with_name(f"{out.stem}_materialized_inputs.jsonl")
    if inputs.exists():
        import_run(out, clock=Clock(seed=1))
    else:  # a run shipped without its inputs: its rows are their own inputs
        rows = folder / "inputs" / "rows.jsonl"
        rows.parent.mkdir()
        shutil.copyfile(out, rows)
        import_run(out, clock=Clock(seed=1), inputs=rows)
    written = folder / "figures.json"
    result = cli("results", out, "-o", folder / "selected.jsonl", "--metrics", written)
    assert result.exit_code == 0, result.output
    theirs = json.loads((FIXTURES / f"{stem_path}_aggregate_metrics.json").read_text())
    return theirs, json.loads(written.read_text())


@pytest.mark.parametrize("stem_path", SHIPPED)
def test_cli_12_metrics_file_equals_nemo_gyms_own(
    tmp_path: Path, stem_path: str
) -> None:
    """``results --metrics`` gives NeMo Gym's figures for its own example runs."""
    theirs, ours = _theirs_and_ours(stem_path, tmp_path)
    assert [e["agent_ref"]["name"] for e in ours] == [
        e["agent_ref"]["name"] for e in theirs
    ]
    for mine, shipped in zip(ours, theirs, strict=True):
        figures = mine["agent_metrics"]
        # Every generic figure we write is NeMo Gym's, to the last digit; the
        # ones we lack are a server's own (structeval's per-format scores).
        assert set(figures) <= set(shipped["agent_metrics"])
        assert "mean/reward" in figures
        for key, value in figures.items():
            assert value == pytest.approx(shipped["agent_metrics"][key], rel=1e-9)
        generic = {
            k
            for k in shipped["agent_metrics"]
            if k.startswith(_STATS)
            and "_" not in k.split("/")[1].replace("_tokens", "")
        }
        assert generic - set(figures) <= {
            k for k in generic if not k.endswith(("reward", "tokens"))
        }
        groups = {g["_ng_task_index"]: g for g in mine["group_level_metrics"]}
        for group in shipped["group_level_metrics"]:
            if "mean/reward" in group:
                task = group["_ng_task_index"]
                assert groups[task]["mean/reward"] == pytest.approx(
                    group["mean/reward"]
                )
        assert mine["key_metrics"]["mean/reward"] == pytest.approx(
            shipped["agent_metrics"]["mean/reward"]
        )
        ledger_part = mine["rollout_ledger"]
        assert ledger_part["schema_version"] == 1
        assert (
            ledger_part["coverage"]["decisions"]["complete"]
            == ledger_part["metrics"]["complete"]
        )


def test_rec_21_settled_zero_and_graded_failure_enter_the_mean(tmp_path: Path) -> None:
    """REC-21: a final timeout's recorded grade (0) is the model's result."""
    out = imported("a13", tmp_path)
    found = _metrics(out)
    assert (found.n, found.scored, found.failure_classes) == (2, 2, 0)
    assert found.mean == pytest.approx(0.5)  # (0 + 1) / 2


def test_row_41_masked_result_is_left_out_under_both_options(tmp_path: Path) -> None:
    """ROW-41: a masked result never enters the figures, whatever is counted."""
    out = imported("a20", tmp_path)
    both = {
        "count_failure_classes_as_zero": True,
        "count_missing_rollouts_as_zero": True,
    }
    for options in ({}, both):
        found = _metrics(out, **options)
        assert (found.masked, found.n, found.mean) == (1, 1, 1.0)
    lines = metrics_lines(_metrics(out))
    assert "left out of the mean: 1 masked" in lines


def test_count_failure_classes_as_zero_counts_the_failed_rollout(
    tmp_path: Path,
) -> None:
    """The option enters a rollout whose newest row is a failure as 0; only it."""
    out = imported("f08", tmp_path)
    plain = _metrics(out)
    assert (plain.n, plain.mean, plain.failure_classes) == (1, 1.0, 1)
    assert _figures(_metrics(out, count_missing_rollouts_as_zero=True)) == _figures(
        plain
    )
    counted = _metrics(out, count_failure_classes_as_zero=True)
    assert (counted.n, counted.mean, counted.failure_classes_counted_as_zero) == (
        2,
        0.5,
        1,
    )
    assert counted.to_dict()["reward"]["counting"]["count_failure_classes_as_zero"]
    assert counted.to_dict()["per_task"]["tasks"] == [
        {"task": 0, "rollouts": 2, "mean": 0.5}
    ]
    text = cli("status", out, "--count-failure-classes-as-zero").output.splitlines()
    assert text[1] == (
        "mean reward 0.50 ± 0.50 (95% interval -5.85\u20136.85) over 2 rollouts: "
        "1 scored, 1 failed counted as zero (--count-failure-classes-as-zero)"
        "; wider than the rewards' range (0 to 1)"
    )
    assert text[2] == (
        "pass@1 0.50, pass@2 1.00 (correct: reward ≥ 1; 1 task; "
        "1 rollout counted as zero)"
    )
    hint = cli("status", out).output.splitlines()[2]
    assert hint == (
        "left out of the mean: 1 failed "
        "(--count-failure-classes-as-zero counts them as zero)"
    )


def test_check_counts_as_status_does_and_keeps_its_verdict(tmp_path: Path) -> None:
    """Issue 28: check takes status's counting options. They change the figures
    it then prints first, as status's first lines, never its verdict: a
    rollout counted as zero is still unfinished (docs/json.md, `check`)."""
    out = imported("f08", tmp_path)
    option = "--count-failure-classes-as-zero"
    plain = cli("check", out)
    counted = cli("check", out, option)
    assert plain.exit_code == counted.exit_code != 0
    assert plain.stdout == ""  # no figures unless asked
    figures = cli("status", out, option).stdout.splitlines()[:3]
    assert counted.stdout.splitlines() == figures
    assert "1 failed counted as zero (--count-failure-classes-as-zero)" in figures[1]
    assert counted.stderr == plain.stderr  # the same refusal
    document = json.loads(cli("check", out, option, "--json").stdout)
    status = json.loads(cli("status", out, option, "--json").stdout)
    assert document["metrics"] == status["metrics"]
    assert document["exit_code"] == plain.exit_code
    assert json.loads(cli("check", out, "--json").stdout)["metrics"] is None


def test_count_missing_rollouts_as_zero_counts_the_rollout_without_rows(
    tmp_path: Path,
) -> None:
    """The option enters a materialized rollout with no row anywhere as 0."""
    out = imported("f06", tmp_path)
    plain = _metrics(out)
    assert (plain.n, plain.missing, plain.mean) == (1, 1, 1.0)
    assert _figures(_metrics(out, count_failure_classes_as_zero=True)) == _figures(
        plain
    )
    counted = _metrics(out, count_missing_rollouts_as_zero=True)
    assert (counted.n, counted.mean, counted.missing_counted_as_zero) == (2, 0.5, 1)
    figures = tmp_path / "figures.json"
    result = cli(
        "results", out, "-o", tmp_path / "rows.jsonl", "--metrics", figures,
        "--count-missing-rollouts-as-zero",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(figures.read_text())
    assert entry["agent_metrics"]["mean/reward"] == 0.5
    counting = entry["rollout_ledger"]["metrics"]["reward"]["counting"]
    assert counting["count_missing_rollouts_as_zero"] is True
    assert counting["missing_counted_as_zero"] == 1
    assert len((tmp_path / "rows.jsonl").read_text().splitlines()) == 1


def test_cli_12_metrics_with_rows_on_stdout_keep_stdout_jsonl(tmp_path: Path) -> None:
    """With rows on stdout, the note on the metrics file goes to stderr."""
    out = imported("c10", tmp_path)
    figures = tmp_path / "figures.json"
    result = cli("results", out, "--metrics", figures)
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["_ng_rollout_index"], r["reward"]) for r in rows] == [(0, 0.0), (1, 1.0)]
    assert "reward figures" in result.stderr
    assert json.loads(figures.read_text())[0]["agent_metrics"]["mean/reward"] == 0.5


def test_one_rollout_has_no_standard_error(tmp_path: Path) -> None:
    """c09: one scored value (the other is unscored): a mean, no SE, no interval."""
    out = imported("c09", tmp_path)
    found = _metrics(out)
    assert (found.n, found.unscored, found.mean) == (1, 1, 1.0)
    assert (found.std, found.standard_error, found.interval_95) == (None, None, None)
    assert found.pass_at_k == ()  # no task has two values
    lines = metrics_lines(found)
    assert lines[1] == (
        "mean reward 1.00 over 1 scored rollout; one value, so no standard error"
    )
    assert "left out of the mean: 1 unscored" in lines


def _edit_main_rows(out: Path, reward: object) -> None:
    rows = [json.loads(line) for line in out.read_text().splitlines() if line]
    for row in rows:
        row["reward"] = reward
    out.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_non_numeric_rewards_leave_no_mean_and_no_division(tmp_path: Path) -> None:
    """A reward that is not a number is unscored; with none scored, no mean."""
    out = copy_fixture("c10", tmp_path)
    _edit_main_rows(out, "1.0")
    import_run(out, clock=Clock(seed=1))
    found = _metrics(out)
    assert (found.complete, found.unscored, found.n, found.mean) == (2, 2, 0, None)
    assert found.to_dict()["reward"]["mean"] is None
    assert found.per_task == ()
    assert found.pass_at_k == ()
    status = cli("status", out)
    assert status.exit_code == 0
    assert status.output.splitlines()[:2] == [
        "2 of 2 complete (100.0%)",
        "no mean reward: none of the 2 complete rollouts has a numeric reward",
    ]
    figures = tmp_path / "figures.json"
    assert (
        cli("results", out, "-o", tmp_path / "r", "--metrics", figures).exit_code == 0
    )
    (entry,) = json.loads(figures.read_text())
    assert "mean/reward" not in entry["agent_metrics"]


def test_no_complete_rollout_and_both_options(tmp_path: Path) -> None:
    """a01 without its success: one failed, one missing; each option adds a zero."""
    out = copy_fixture("a01", tmp_path)
    out.write_text("")  # the successful rollout 1 leaves no row anywhere
    import_run(out, clock=Clock(seed=1))
    found = _metrics(out)
    assert (found.complete, found.failure_classes, found.missing) == (0, 1, 1)
    assert found.mean is None
    assert metrics_lines(found)[:2] == [
        "0 of 2 complete (0.0%)",
        "no mean reward: no rollout has a score yet",
    ]
    both = _metrics(
        out, count_failure_classes_as_zero=True, count_missing_rollouts_as_zero=True
    )
    assert (both.n, both.mean, both.standard_error) == (2, 0.0, 0.0)
    assert both.interval_95 == (0.0, 0.0)
    (entry,) = _aggregate(out, tmp_path)
    assert entry["agent_metrics"]["mean/reward"] == 0.0


def _aggregate(out: Path, folder: Path) -> list[dict[str, Any]]:
    figures = folder / "both.json"
    result = cli(
        "results", out, "-o", folder / "rows.jsonl", "--metrics", figures,
        "--count-failure-classes-as-zero", "--count-missing-rollouts-as-zero",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    document: list[dict[str, Any]] = json.loads(figures.read_text())
    return document


def test_rec_41_counts_add_up_to_expected_on_every_fixture_run(tmp_path: Path) -> None:
    """REC-41: scored, unscored, omitted, masked, failed, missing, other = expected."""
    for prefix in ("a01", "a13", "a20", "c09", "f06", "f08", "j01", "s03"):
        out = imported(prefix, tmp_path / prefix)
        found = _metrics(out)
        counts = found.to_dict()["counts"]
        assert sum(counts.values()) == found.expected == 2, prefix
        assert found.complete == found.scored + found.unscored


def test_rec_35_an_omission_is_never_scored_even_when_held(tmp_path: Path) -> None:
    """REC-35: no score is invented for an omission, accepted or held."""
    out = copy_fixture("s03", tmp_path)
    out.write_text("")  # no complete rollout beside it: the omission is held
    rows = [
        json.loads(line) for line in out.with_name(SIDECAR).read_text().splitlines()
    ]
    out.with_name(SIDECAR).write_text(
        "".join(json.dumps({**row, "_ng_omitted": True}) + "\n" for row in rows)
    )
    import_run(out, clock=Clock(seed=1))
    assert decision(out).reason == "unaccepted_omission"
    found = _metrics(
        out, count_failure_classes_as_zero=True, count_missing_rollouts_as_zero=True
    )
    assert (found.omitted, found.failure_classes, found.missing) == (1, 0, 1)
    assert (found.n, found.mean) == (1, 0.0)  # only the missing rollout 1 counted


def test_cli_12_metrics_never_overwrite_nemo_gyms_own_file(tmp_path: Path) -> None:
    """f05 ships NeMo Gym's ``rollouts_aggregate_metrics.json``: it stays as is."""
    out = imported("f05", tmp_path)
    own = out.with_name("rollouts_aggregate_metrics.json")
    before = own.read_bytes()
    refused = cli("results", out, "-o", tmp_path / "rows.jsonl", "--metrics", own)
    assert refused.exit_code != 0
    assert "NeMo Gym wrote for this run" in refused.stderr
    assert own.read_bytes() == before
