"""Issue 27: ``rollout-ledger compare`` and ``compare_runs``: run B against run A.

The difference of means is paired by task where the runs share tasks (the
mean of per-task differences, Student's t over them), else Welch's; the
per-task differences come largest first; rollouts decided differently and
configuration keys that differ are listed, in plain words in the text.
"""

from __future__ import annotations

import copy
import json
import math
import statistics
from pathlib import Path

import pytest

from ledger import open_run
from projections import compare_runs
from tests.test_cli_support import CliRun, by_key, failed, graded

#: Student's t 0.975 quantile for 2 degrees of freedom.
T975_2 = 4.302652729911275


def _run(
    folder: Path, rewards: dict[tuple[int, int], object], **config: object
) -> CliRun:
    folder.mkdir()
    run = CliRun(folder, tasks=3, rollouts=2)
    if config:
        data = copy.deepcopy(run.config_data)
        data["responses_create_params"].update(config)
        run.config = run.write_config("collection.yaml", data)
    run.create()
    run.collect(by_key(rewards))  # type: ignore[arg-type]
    return run


@pytest.fixture
def pair(tmp_path: Path) -> tuple[CliRun, CliRun]:
    a = _run(tmp_path / "a", {})  # every rollout graded 1.0
    b = _run(
        tmp_path / "b",
        {
            (0, 0): graded(0.0),
            (2, 0): graded(0.0),
            (2, 1): failed("model_refused", terminal=True),
        },
        temperature=0.9,
    )
    return a, b


def test_the_difference_is_paired_by_task(pair: tuple[CliRun, CliRun]) -> None:
    a, b = pair
    with open_run(a.out) as one, open_run(b.out) as other:
        found = compare_runs(one, other)
    # Per task, B's mean minus A's: task 0 (0 + 1) / 2 - 1, task 1 0, task 2 0 - 1.
    diffs = [-0.5, 0.0, -1.0]
    error = statistics.stdev(diffs) / math.sqrt(3)
    assert found.difference.method == "paired by task"
    assert found.difference.tasks == 3
    assert found.difference.value == pytest.approx(-0.5)
    assert found.difference.standard_error == pytest.approx(error)
    low, high = found.difference.interval_95 or (0.0, 0.0)
    assert low == pytest.approx(-0.5 - T975_2 * error, rel=1e-3)
    assert high == pytest.approx(-0.5 + T975_2 * error, rel=1e-3)
    assert [t.task for t in found.tasks] == [2, 0, 1]  # largest first
    assert found.tasks[0].n_b == 1  # the terminal rollout has no score
    assert found.a.mean == pytest.approx(1.0)
    assert found.b.mean == pytest.approx(3 / 5)  # 0, 1, 1, 1, 0: one terminal
    assert found.decisions_differ == 1
    (changed,) = found.decisions
    assert (changed.task, changed.rollout, changed.a) == (2, 1, "complete")
    assert changed.b != "complete"
    keys = {k.key: k for k in found.keys}
    temperature = keys["collection.responses_create_params.temperature"]
    assert temperature.key_class == "semantic"
    assert (temperature.a, temperature.b) == ("0.6", "0.9")


def test_without_shared_tasks_the_difference_is_welch_s(tmp_path: Path) -> None:
    gone = failed("model_refused", terminal=True)
    # A scores task 0 only (1.0 and 0.0); B scores tasks 1 and 2 only.
    a = _run(
        tmp_path / "a",
        {(0, 1): graded(0.0)} | dict.fromkeys([(1, 0), (1, 1), (2, 0), (2, 1)], gone),
    )
    b = _run(tmp_path / "b", {(0, 0): gone, (0, 1): gone, (2, 0): graded(0.0)})
    with open_run(a.out) as one, open_run(b.out) as other:
        found = compare_runs(one, other)
    va, vb = statistics.variance([1.0, 0.0]) / 2, statistics.variance([1, 1, 0, 1]) / 4
    assert found.difference.method == "unpaired (Welch)"
    assert found.difference.tasks == 0
    assert found.difference.value == pytest.approx(0.75 - 0.5)
    assert found.difference.standard_error == pytest.approx(math.sqrt(va + vb))


def test_a_run_against_itself_differs_in_nothing(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", {(0, 0): graded(0.0)})
    with open_run(a.out) as one, open_run(a.out) as same:
        found = compare_runs(one, same)
    assert found.difference.value == pytest.approx(0.0)
    assert found.decisions_differ == 0
    assert found.keys == []
    assert found.comparable


def test_the_command_says_it_in_words_and_json(pair: tuple[CliRun, CliRun]) -> None:
    a, b = pair
    text = a.ok("compare", a.out, b.out).stdout
    assert "difference of means (B - A): -0.500" in text
    assert "paired by task, 3 tasks" in text
    assert "task 2 rollout 1: complete in A" in text
    assert "collection.responses_create_params.temperature (changes results)" in text
    assert "REC-" not in text
    assert "semantic" not in text
    document = json.loads(a.ok("compare", a.out, b.out, "--json").stdout)
    assert document["schema_version"] == 1
    with open_run(a.out) as one, open_run(b.out) as other:
        expected = compare_runs(one, other, out_a=str(a.out), out_b=str(b.out))
    assert document["compare"] == json.loads(json.dumps(expected.to_dict()))


def test_compare_of_a_path_that_is_no_run_is_refused(
    pair: tuple[CliRun, CliRun],
) -> None:
    a, _ = pair
    result = a.invoke("compare", a.out, a.folder / "nothing.jsonl")
    assert result.exit_code != 0
    assert "Traceback" not in result.stderr
    assert "nothing.jsonl" in result.stderr
