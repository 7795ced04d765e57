"""CLI-2: ``create --dataset D --num-repeats K`` expands a dataset as NeMo Gym does.

NeMo Gym's repository ships no dataset beside its materialized inputs, so the
byte-for-byte check rebuilds each fixture's dataset from its materialized rows
(one line per task, in file order, the two indices removed) and expands it
again: the file ``create`` writes must be the fixture's, byte for byte. That
checks the key order, the indices, the repeats (aabbcc) and the encoding NeMo
Gym's writer (``orjson.dumps``) uses. Two fixtures (proof_judge, longmt_eval)
were written with ``", "`` separators by another writer and are left out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner, Result

from cli import main
from projections import expand_dataset
from tests.prerequisites import (
    FIXTURES_ENV,
    nemo_gym_configs,
    nemo_gym_fixtures,
    require_folder,
)

FIXTURES = nemo_gym_fixtures()
require_folder(FIXTURES, "*_materialized_inputs.jsonl", FIXTURES_ENV)
BLACKJACK = FIXTURES / "resources_servers/blackjack/data"
SERVERS = nemo_gym_configs() / "resources_servers/blackjack/configs/blackjack.yaml"
POLICY = """\
policy_model:
  responses_api_models:
    openai_model:
      openai_model: gpt-4o
"""
AGENT = "blackjack_gymnasium_agent"
_ENCODER = msgspec.json.Encoder()


def _written_by_orjson(path: Path) -> bool:
    lines = path.read_bytes().splitlines()
    return all(_ENCODER.encode(msgspec.json.decode(line)) == line for line in lines)


MATERIALIZED = sorted(
    path
    for path in FIXTURES.rglob("*_materialized_inputs.jsonl")
    if _written_by_orjson(path)
)


def _dataset_of(materialized: Path) -> tuple[bytes, int]:
    """The dataset a materialized file was expanded from, and its repeats."""
    tasks: dict[int, bytes] = {}
    repeats: dict[int, int] = {}
    for line in materialized.read_bytes().splitlines():
        row = msgspec.json.decode(line)
        task = row.pop("_ng_task_index")
        del row["_ng_rollout_index"]
        tasks.setdefault(task, _ENCODER.encode(row) + b"\n")
        repeats[task] = repeats.get(task, 0) + 1
    assert list(tasks) == list(range(len(tasks))), "tasks numbered in file order"
    assert len(set(repeats.values())) == 1, "one num_repeats for every row"
    return b"".join(tasks.values()), next(iter(repeats.values()))


def _config(folder: Path, text: str = "num_samples_in_parallel: 4\n") -> Path:
    path = folder / "collection.yaml"
    path.write_text(text)
    return path


def _create(folder: Path, args: Sequence[str], config: str | None = None) -> Result:
    policy = folder / "policy.yaml"
    policy.write_text(POLICY)
    collection = _config(folder, config) if config else _config(folder)
    return CliRunner().invoke(
        main,
        [
            "create",
            str(folder / "out" / "rollouts.jsonl"),
            *args,
            "--config",
            str(collection),
            "--global-config",
            str(SERVERS),
            "--global-config",
            str(policy),
        ],
    )


def _dataset(folder: Path, rows: Sequence[dict[str, Any]] | bytes) -> Path:
    path = folder / "data.jsonl"
    data = (
        rows
        if isinstance(rows, bytes)
        else b"".join(_ENCODER.encode(row) + b"\n" for row in rows)
    )
    path.write_bytes(data)
    return path


def _row(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": text}]},
        **extra,
    }


def test_fixtures_cover_repeats_and_tasks() -> None:
    """CLI-2: the fixtures checked hold many tasks, and one task repeated."""
    shapes = {_dataset_of(path)[1] for path in MATERIALIZED}
    assert len(MATERIALIZED) >= 15
    assert {1, 5} <= shapes


@pytest.mark.parametrize(
    "materialized", MATERIALIZED, ids=lambda path: path.parent.parent.name
)
def test_cli2_dataset_expands_to_nemo_gyms_materialized_bytes(
    materialized: Path, tmp_path: Path
) -> None:
    """CLI-2: the expansion of every fixture's dataset is its materialized file."""
    data, repeats = _dataset_of(materialized)
    dataset = _dataset(tmp_path, data)
    expanded = expand_dataset(dataset, {}, num_repeats=repeats)
    assert expanded.data == materialized.read_bytes()


def test_cli2_create_dataset_writes_nemo_gyms_materialized_inputs(
    tmp_path: Path,
) -> None:
    """CLI-2: ``create --dataset --num-repeats 5`` writes blackjack's file exactly.

    The dataset is the source: its digest is the manifest's, and it is not touched.
    """
    fixture = BLACKJACK / "example_rollouts_materialized_inputs.jsonl"
    data, _ = _dataset_of(fixture)
    dataset = _dataset(tmp_path, data)
    result = _create(tmp_path, ["--dataset", str(dataset), "--num-repeats", "5"])
    assert result.exit_code == 0, result.output
    assert "5 rollouts of 1 task" in result.output
    out = tmp_path / "out"
    assert (out / "rollouts_materialized_inputs.jsonl").read_bytes() == (
        fixture.read_bytes()
    )
    assert dataset.read_bytes() == data
    manifest = json.loads((out / "rollouts_ledger/manifest.json").read_text())
    assert manifest["source_digest"] == hashlib.sha256(data).hexdigest()


def test_cli2_source_still_names_the_dataset_the_rows_came_from(
    tmp_path: Path,
) -> None:
    """CLI-2: --source, when given with --dataset, is the source recorded."""
    dataset = _dataset(tmp_path, [_row("q", agent_ref={"name": AGENT})])
    original = tmp_path / "original.jsonl"
    original.write_bytes(b'{"question": "q"}\n')
    result = _create(tmp_path, ["--dataset", str(dataset), "--source", str(original)])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "out/rollouts_ledger/manifest.json").read_text())
    digest = hashlib.sha256(original.read_bytes()).hexdigest()
    assert manifest["source_digest"] == digest


def test_cli2_identical_rows_share_a_task_and_own_indices_are_kept(
    tmp_path: Path,
) -> None:
    """CLI-2: identical lines are one task, rollouts counted on; own indices kept."""
    rows = [_row("a"), _row("b"), _row("a"), _row("c", _ng_task_index=7)]
    expanded = expand_dataset(
        _dataset(tmp_path, rows), {"agent_name": AGENT}, num_repeats=2
    )
    keys = [(row["_ng_task_index"], row["_ng_rollout_index"]) for row in expanded.rows]
    assert keys == [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (0, 3), (7, 0), (7, 1)]
    assert expanded.tasks == 3
    first = expanded.rows[0]
    assert list(first) == [
        "responses_create_params",
        "agent_ref",
        "_ng_task_index",
        "_ng_rollout_index",
    ]
    assert first["agent_ref"] == {"name": AGENT}


def test_cli2_limit_overrides_and_seed_as_nemo_gym_applies_them(tmp_path: Path) -> None:
    """CLI-2: limit, responses_create_params and num_repeats_add_seed are reproduced."""
    rows = [_row("a", agent_ref={"name": AGENT}), _row("b"), _row("c")]
    config = {
        "limit": 2,
        "num_repeats": 2,
        "num_repeats_add_seed": True,
        "agent_name": AGENT,
        "responses_create_params": {"temperature": 0.5},
    }
    expanded = expand_dataset(_dataset(tmp_path, rows), config)
    assert len(expanded.rows) == 4
    params = expanded.rows[3]["responses_create_params"]
    assert params["temperature"] == 0.5
    assert params["metadata"] == {"extra_body": '{"seed": 1}'}
    assert b'"metadata":{"extra_body":"{\\"seed\\": 1}"}' in expanded.data


@pytest.mark.parametrize(
    "setting",
    [
        "prompt_config: prompts/math.yaml",
        "skills: {path: skills}",
        "agent_map: {_default: other_agent}",
        "fan_out: {a: [b, c]}",
        "interleave_repeats: true",
        "num_repeats: {_default: 2}",
    ],
)
def test_cli2_expansion_options_not_reproduced_are_refused_by_name(
    tmp_path: Path, setting: str
) -> None:
    """CLI-2: each 0.7.0 option not reproduced is refused, naming it (exit 3)."""
    dataset = _dataset(tmp_path, [_row("q", agent_ref={"name": AGENT})])
    result = _create(tmp_path, ["--dataset", str(dataset)], config=setting + "\n")
    assert result.exit_code == 3, result.output
    key = setting.split(":")[0]
    assert key in result.output
    assert "--inputs" in result.output
    assert not (tmp_path / "out").exists()


def test_cli2_num_repeats_disagreeing_with_the_config_is_refused(
    tmp_path: Path,
) -> None:
    """CLI-2: --num-repeats and the configuration's num_repeats must agree."""
    dataset = _dataset(tmp_path, [_row("q", agent_ref={"name": AGENT})])
    args = ["--dataset", str(dataset), "--num-repeats", "3"]
    result = _create(tmp_path, args, config="num_repeats: 2\n")
    assert result.exit_code == 3
    assert "--num-repeats 3" in result.output
    assert "num_repeats: 2" in result.output
    agreeing = _create(tmp_path, args, config="num_repeats: 3\n")
    assert agreeing.exit_code == 0, agreeing.output
    assert "3 rollouts of 1 task" in agreeing.output


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--inputs", "{d}", "--dataset", "{d}"], "not both"),
        ([], "give --inputs"),
        (["--inputs", "{d}", "--num-repeats", "2"], "--num-repeats expands"),
    ],
)
def test_cli2_inputs_and_dataset_are_mutually_exclusive(
    tmp_path: Path, args: list[str], words: str
) -> None:
    """CLI-2: --inputs or --dataset; --num-repeats only with --dataset (exit 2)."""
    dataset = _dataset(tmp_path, [_row("q", agent_ref={"name": AGENT})])
    result = _create(tmp_path, [arg.format(d=dataset) for arg in args])
    assert result.exit_code == 2
    assert words in result.output


def test_cli2_inputs_still_refuse_rows_without_indices(tmp_path: Path) -> None:
    """CLI-2: a dataset given as --inputs is refused as before (exit 3)."""
    dataset = _dataset(tmp_path, [_row("q", agent_ref={"name": AGENT})])
    result = _create(tmp_path, ["--inputs", str(dataset)])
    assert result.exit_code == 3
    assert "_ng_task_index" in result.output
    assert "goes in with --dataset instead of --inputs" in result.output


def test_cli2_dry_run_expands_the_dataset_and_writes_nothing(tmp_path: Path) -> None:
    """CLI-2: ``--dry-run --json`` counts the expanded rollouts; no file is written."""
    rows = [_row("a", agent_ref={"name": AGENT}), _row("b", agent_ref={"name": AGENT})]
    dataset = _dataset(tmp_path, rows)
    args = ["--dataset", str(dataset), "--num-repeats", "3", "--dry-run", "--json"]
    result = _create(tmp_path, args)
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert (document["rollouts"], document["tasks"], document["dry_run"]) == (
        6,
        2,
        True,
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b'{"responses_create_params": {}, "_ng_rollout_index": 0}\n', "--inputs"),
        (b'{"responses_create_params": {}}\n\n', "line 2 is blank"),
        (b'{"responses_create_params": {}}\n{"x"\n', "line 2 is not JSON"),
        (b'{"question": "q"}\n', "no responses_create_params"),
        (b'{"responses_create_params": {}, "agent_ref": {"name": "x"}}\n', "'x'"),
        (b'{"responses_create_params": {}, "task_input": {}}\n', "task_input"),
    ],
)
def test_cli2_dataset_rows_that_cannot_be_expanded_name_the_line(
    tmp_path: Path, data: bytes, words: str
) -> None:
    """CLI-2: a row NeMo Gym would not expand this way is refused with file and line."""
    dataset = _dataset(tmp_path, data)
    result = _create(
        tmp_path, ["--dataset", str(dataset)], config=f"agent_name: {AGENT}\n"
    )
    assert result.exit_code == 3, result.output
    assert str(dataset) in result.output
    assert words in result.output
    assert dataset.read_bytes() == data
