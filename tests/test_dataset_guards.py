"""Issue 25: ``create --dataset`` refuses what it must never expand.

A ``--num-repeats`` so large the expansion cannot fit is refused with the bound,
before memory is spent (it grew until the OOM killer ended it). A literal
credential in the collection's ``responses_create_params``, or in a dataset
row, is refused by name before anything is written (it was redacted in
``identity.json`` but copied into every materialized row, plan, ``OUT`` and
export), with where to put it instead.
"""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from projections import MAX_EXPANDED_ROLLOUTS
from tests.test_create_dataset import AGENT, _create, _dataset

ROW = {
    "responses_create_params": {"input": [{"role": "user", "content": "2+2?"}]},
    "agent_ref": {"name": AGENT},
}
SECRET = "sk-live-Zq8XbT2kLmN4pR7sVw9yA1cD3eF5gH6j"


def _nothing_written(folder: Path) -> None:
    assert not (folder / "out").exists(), sorted((folder / "out").rglob("*"))


def test_a_num_repeats_past_the_bound_is_refused_before_memory_is_spent(
    tmp_path: Path,
) -> None:
    data = _dataset(tmp_path, [ROW, {**ROW, "x": 1}])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = _create(tmp_path, ["--dataset", str(data), "--num-repeats", "1000000000"])
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert result.exit_code == 3, result.output
    assert "2,000,000,000 rollouts" in result.output
    assert f"at most {MAX_EXPANDED_ROLLOUTS:,}" in result.output
    assert "lower --num-repeats" in result.output
    assert after - before < 200 * 1024  # KiB: nothing was expanded
    _nothing_written(tmp_path)


def test_a_num_repeats_within_the_bound_still_expands(tmp_path: Path) -> None:
    data = _dataset(tmp_path, [ROW])
    result = _create(tmp_path, ["--dataset", str(data), "--num-repeats", "3"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "params",
    [
        {"api_key": SECRET},
        {"extra_headers": {"Authorization": f"Bearer {SECRET}"}},
        {"metadata": {"note": f"Bearer {SECRET}"}},
    ],
)
def test_a_credential_in_the_collection_s_params_is_refused_by_name(
    tmp_path: Path, params: dict[str, object]
) -> None:
    data = _dataset(tmp_path, [ROW])
    import yaml  # omegaconf's own dependency

    config = yaml.safe_dump(
        {"num_samples_in_parallel": 4, "responses_create_params": params}
    )
    result = _create(tmp_path, ["--dataset", str(data)], config=config)
    assert result.exit_code == 3, result.output
    assert "responses_create_params." in result.output
    assert "holds a credential" in result.output
    assert "model server" in result.output
    assert "${oc.env:OPENAI_API_KEY}" in result.output  # the advice, not redacted
    assert SECRET not in result.output
    _nothing_written(tmp_path)


def test_a_credential_in_a_dataset_row_is_refused_with_its_line(tmp_path: Path) -> None:
    leaky = {**ROW, "responses_create_params": {**ROW["responses_create_params"]}}
    leaky["responses_create_params"]["api_key"] = SECRET  # type: ignore[index]
    data = _dataset(tmp_path, [ROW, leaky])
    result = _create(tmp_path, ["--dataset", str(data), "--num-repeats", "2"])
    assert result.exit_code == 3, result.output
    assert f"{data} line 2" in result.output
    assert "responses_create_params.api_key holds a credential" in result.output
    assert SECRET not in result.output
    _nothing_written(tmp_path)


def test_a_prompt_that_talks_of_passwords_is_a_task_not_a_credential(
    tmp_path: Path,
) -> None:
    task = {"role": "user", "content": "The password: hunter22. Bearer abcdefgh1234?"}
    row = {**ROW, "responses_create_params": {"input": [task]}}
    data = _dataset(tmp_path, [row])
    result = _create(tmp_path, ["--dataset", str(data)])
    assert result.exit_code == 0, result.output
