"""CLI-2, CLI-4: NeMo Gym's own configuration files, each given where it belongs.

``--global-config`` takes NeMo Gym's server configurations as they are (the
files of ``ng_run``'s ``config_paths``); ``--config`` the collection settings
(``ng_collect_rollouts``'s). A key in the wrong file is refused naming the file,
the key and the option it belongs to; ``--help`` says which file is which.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli import main
from projections import expand_dataset
from tests.internals import load_global_config
from tests.prerequisites import CONFIGS_ENV, nemo_gym_configs, require_folder

CONFIGS = nemo_gym_configs()
require_folder(CONFIGS, "*.yaml", CONFIGS_ENV)
BLACKJACK = CONFIGS / "resources_servers/blackjack/configs/blackjack.yaml"
LEGAL = CONFIGS / "resources_servers/legal_agent_bench/configs/legal_agent_bench.yaml"
GDPVAL = CONFIGS / "benchmarks/gdpval/config.yaml"
DATASET = (
    b'{"responses_create_params":{"input":[{"role":"user","content":"q"}]},'
    b'"agent_ref":{"name":"blackjack_gymnasium_agent"}}\n'
)


def _create(folder: Path, config: Path, *global_configs: Path) -> Result:
    dataset = folder / "data.jsonl"
    dataset.write_bytes(DATASET)
    servers = [arg for path in global_configs for arg in ("--global-config", path)]
    return CliRunner().invoke(
        main,
        [
            "create",
            str(folder / "out" / "rollouts.jsonl"),
            "--dataset",
            str(dataset),
            "--config",
            str(config),
            *map(str, servers),
        ],
    )


@pytest.mark.slow
def test_cli2_every_real_server_configuration_is_accepted_as_global_config() -> None:
    """CLI-2: no real NeMo Gym configuration is refused as --global-config for a key.

    (Some are refused for other reasons, e.g. unexpanded ``_inherit_from``:
    none for holding a collection setting.)
    """
    files = sorted(CONFIGS.rglob("*.yaml"))
    assert len(files) > 400
    misplaced = []
    for path in files:
        try:
            load_global_config([path])
        except Exception as exc:
            if "--config" in str(exc):
                misplaced.append(str(exc))
    assert misplaced == []


@pytest.mark.parametrize(
    "path",
    [
        BLACKJACK,
        LEGAL,
        GDPVAL,
        CONFIGS / "responses_api_models/openai_model/configs/openai_model.yaml",
    ],
    ids=lambda path: path.stem,
)
def test_cli2_a_server_configuration_given_as_config_names_global_config(
    tmp_path: Path, path: Path
) -> None:
    """CLI-2: a real server configuration given as --config: use --global-config."""
    result = _create(tmp_path, path)
    assert result.exit_code == 3, result.output
    assert str(path) in result.output
    assert "belongs in a --global-config file" in result.output
    assert "server block" in result.output
    assert not (tmp_path / "out").exists()


def test_cli2_config_paths_given_as_config_names_global_config(
    tmp_path: Path,
) -> None:
    """CLI-2: a server configuration's config_paths in --config: use --global-config."""
    config = tmp_path / "collection.yaml"
    config.write_text("config_paths:\n  - resources_servers/x/configs/x.yaml\n")
    result = _create(tmp_path, config, BLACKJACK)
    assert result.exit_code == 3
    assert "config_paths" in result.output
    assert "--global-config" in result.output


@pytest.mark.parametrize(
    "setting",
    [
        "num_samples_in_parallel: 8",
        "agent_name: blackjack_gymnasium_agent",
        "num_repeats: 4",
        "input_jsonl_fpath: data.jsonl",
        "limit: 10",
    ],
)
def test_cli2_a_collection_setting_given_as_global_config_names_config(
    tmp_path: Path, setting: str
) -> None:
    """CLI-2: agent_name, num_samples_in_parallel... in --global-config: --config."""
    servers = tmp_path / "env.yaml"
    servers.write_text(f"policy_base_url: http://x\n{setting}\n")
    config = tmp_path / "collection.yaml"
    config.write_text("num_samples_in_parallel: 4\n")
    result = _create(tmp_path, config, BLACKJACK, servers)
    assert result.exit_code == 3, result.output
    key = setting.split(":")[0]
    assert f"{servers}: {key} is a collection setting" in result.output
    assert "belongs in the --config file" in result.output


def test_cli2_real_configurations_as_they_are_start_a_run(tmp_path: Path) -> None:
    """CLI-2: blackjack's server configuration and a policy file, as they are."""
    policy = tmp_path / "env.yaml"
    policy.write_text(
        "policy_base_url: http://localhost:8000/v1\n"
        "policy_model:\n  responses_api_models:\n    openai_model:\n"
        "      openai_model: gpt-4o\n"
    )
    config = tmp_path / "collection.yaml"
    config.write_text("agent_name: blackjack_gymnasium_agent\nnum_repeats: 2\n")
    result = _create(tmp_path, config, BLACKJACK, policy)
    assert result.exit_code == 0, result.output
    assert "2 rollouts of 1 task" in result.output


def test_cli2_a_server_configurations_request_settings_apply_to_the_dataset(
    tmp_path: Path,
) -> None:
    """CLI-2: a server file's responses_create_params applies, under --config's.

    NeMo Gym reads the collection settings from the merged configuration, so
    legal_agent_bench's ``temperature``/``top_p`` reach every row.
    """
    dataset = tmp_path / "data.jsonl"
    dataset.write_bytes(DATASET)
    servers = load_global_config([LEGAL])
    collection = {"responses_create_params": {"top_p": 0.5}}
    expanded = expand_dataset(dataset, collection, global_config=servers)
    params = expanded.rows[0]["responses_create_params"]
    assert params["temperature"] == 1.0
    assert params["top_p"] == 0.5


@pytest.mark.parametrize("command", ["create", "resume", "diff-config", "run"])
def test_cli2_help_says_where_to_read_which_nemo_gym_file_is_which(
    command: str,
) -> None:
    """CLI-2, CLI-4: --help points at the one explanation of --config and
    --global-config (issue 28: it is said once, not in every command's help)."""
    result = CliRunner().invoke(main, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "see `rollout-ledger explain config`" in text
    assert "See `rollout-ledger explain global-config`" in text
    assert "config_paths" not in text  # the explanation lives in the glossary


def test_cli2_explain_says_which_nemo_gym_file_is_which() -> None:
    """CLI-2: `explain config` and `explain global-config` name NeMo Gym's files."""
    config = CliRunner().invoke(main, ["explain", "config"]).output
    assert "ng_collect_rollouts takes on its command line" in config
    assert "it belongs in --global-config" in config
    servers = CliRunner().invoke(main, ["explain", "global-config"]).output
    assert "A NeMo Gym server configuration as it is" in servers
    assert "config_paths" in servers
    assert "it belongs in --config" in servers
