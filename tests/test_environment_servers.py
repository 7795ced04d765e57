"""Environment servers are part of the run (nemo_gym_0_7.md, ID-41; extends ID-3).

The rows are NeMo Gym 0.7.0's own (``../shared/fixtures/nemo-gym-0.7``): task
rows routed through the environment server ``demo_env`` (``c10``: they carry
``_ng_environment_server`` and no ``agent_ref``), and agent-routed rows
(``c01``: ``agent_ref`` only in the materialized inputs). The agent, its
resources server and the policy model are the real configuration files of
``../shared/fixtures/nemo-gym-configs``; that checkout predates environment
servers, so the ``demo_env`` block is written here, in the shape 0.7.0 reads
(an ``agent_server`` reference and a ``scenario``).
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from omegaconf import OmegaConf

from cli import main
from ledger import Clock, ConfigError, config_identity, drift, identity_digest
from tests.internals import identity_manifest
from tests.prerequisites import (
    CONFIGS_ENV,
    nemo_gym_configs,
    require_folder,
    unavailable,
)

FIXTURES_07 = (
    Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "nemo-gym-0.7"
)
CONFIGS = nemo_gym_configs()
require_folder(CONFIGS, "*.yaml", CONFIGS_ENV)
if not (FIXTURES_07 / "c10_episode_result_reward").is_dir():
    unavailable(f"no NeMo Gym 0.7.0 runs at {FIXTURES_07}")

#: 0.7.0 task rows routed through ``demo_env``, and agent-routed rows.
TASK_ROWS = (
    FIXTURES_07 / "c10_episode_result_reward" / "rollouts_materialized_inputs.jsonl"
)
AGENT_ROWS = (
    FIXTURES_07 / "c01_agent_request_failed_503" / "rollouts_materialized_inputs.jsonl"
)
AGENT = "workplace_assistant_simple_agent"
REAL_FILES = (
    CONFIGS / "environments" / "workplace_assistant" / "config.yaml",
    CONFIGS / "responses_api_models" / "vllm_model" / "configs" / "vllm_model.yaml",
)
ENV_KEY = "servers.demo_env.environment_servers.single_agent_turn_legacy"
AGENT_KEY = f"servers.{AGENT}.responses_api_agents.simple_agent"

Config = dict[str, Any]


def environment(agent: Any = None, **settings: Any) -> Config:
    """The launcher's globals and the ``demo_env`` environment server block."""
    block: Config = {
        "entrypoint": "app.py",
        "host": "127.0.0.1",
        "port": 41000,
        "scenario": "workplace_default",
        "sandbox_url": "http://10.0.0.9:7000",
        "agent_server": (
            {"type": "responses_api_agents", "name": AGENT} if agent is None else agent
        ),
        **settings,
    }
    return {
        "policy_base_url": "http://127.0.0.1:8000/v1",
        "policy_api_key": "sk-env-policy-0001",
        "policy_model_name": "nvidia/test-model",
        "demo_env": {"environment_servers": {"single_agent_turn_legacy": block}},
        # Routes rows to an agent the run never reaches, and shares the policy
        # model: not part of the run, and never resolved (its variable is unset).
        "other_env": {
            "environment_servers": {
                "single_agent_turn_legacy": {
                    "scenario": "${oc.env:ROLLOUT_LEDGER_TEST_NEVER_SET}",
                    "agent_server": {"name": "other_agent"},
                }
            }
        },
        "other_agent": {
            "responses_api_agents": {
                "simple_agent": {
                    "model_server": {
                        "type": "responses_api_models",
                        "name": "policy_model",
                    },
                    "max_steps": 3,
                }
            }
        },
    }


def global_config(env: Config) -> Config:
    """The real files then ``env``, merged in order (as ``--global-config`` does)."""
    files = [OmegaConf.load(path) for path in REAL_FILES]
    merged = OmegaConf.to_container(OmegaConf.merge(*files, env), resolve=False)
    assert isinstance(merged, dict)
    return {str(key): value for key, value in merged.items()}


def read_rows(path: Path) -> list[Config]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


#: The task rows as 0.7.0 wrote them, and agent-routed rows naming our agent.
TASK = read_rows(TASK_ROWS)
ROUTED = [{**row, "agent_ref": {"name": AGENT}} for row in read_rows(AGENT_ROWS)]


def identity(env: Config, rows: list[Config] = TASK) -> Config:
    return config_identity({}, global_config(env), rows)


def servers_of(env: Config, rows: list[Config] = TASK) -> list[str]:
    return sorted(identity(env, rows)["servers"])


def digest(env: Config, rows: list[Config] = TASK) -> str:
    return identity_digest(identity(env, rows))


def with_setting(env: Config, server: str, key: str, value: Any) -> Config:
    """``env`` with one setting of ``server``'s (only) block set, as an overlay."""
    out = copy.deepcopy(env)
    block = out.setdefault(server, {})
    if server == AGENT:
        block.setdefault("responses_api_agents", {}).setdefault("simple_agent", {})
    (impls,) = block.values()
    (settings,) = impls.values()
    settings[key] = value
    return out


# --- through the Python API -----------------------------------------------------------


def test_id_41_task_rows_reach_their_environment_server_and_its_agent() -> None:
    """ID-41: ``_ng_environment_server`` seeds the run's servers; its agent follows."""
    assert servers_of(environment()) == [
        "demo_env",
        "policy_model",
        "workplace_assistant",
        AGENT,
    ]


def test_id_41_agent_routed_rows_reach_the_environment_server_routing_them() -> None:
    """ID-41: an environment server whose ``agent_server`` is reached is reached."""
    assert servers_of(environment(), ROUTED) == [
        "demo_env",
        "policy_model",
        "workplace_assistant",
        AGENT,
    ]


@pytest.mark.parametrize(
    "agent",
    [
        pytest.param({"name": AGENT}, id="untyped-mapping"),
        pytest.param(AGENT, id="plain-name"),
        pytest.param("${chosen_agent}", id="interpolated-name"),
        pytest.param("${chosen_ref}", id="interpolated-mapping"),
    ],
)
def test_id_41_every_form_of_agent_server_is_followed(agent: Any) -> None:
    """ID-41: the agent reached through ``agent_server`` however it is written."""
    env = {
        **environment(agent),
        "chosen_agent": AGENT,
        "chosen_ref": {"type": "responses_api_agents", "name": AGENT},
    }
    assert AGENT in servers_of(env)
    assert "demo_env" in servers_of(env, ROUTED)
    changed = with_setting(env, AGENT, "max_steps", 12)
    assert digest(changed) != digest(env)


def test_id_41_an_environment_server_routing_elsewhere_is_not_part_of_the_run() -> None:
    """ID-41: sharing the policy model routes no rows; its settings never count."""
    env = environment()
    assert "other_env" not in servers_of(env)
    assert "other_agent" not in servers_of(env)
    changed = with_setting(env, "other_env", "scenario", "anything")
    assert digest(changed) == digest(env)


def test_id_41_an_environment_server_missing_from_the_configuration_is_refused() -> (
    None
):
    """ID-41/ID-3: the server a row names must be configured; the row is named."""
    env = environment()
    del env["demo_env"]
    with pytest.raises(ConfigError, match="_ng_environment_server") as caught:
        servers_of(env)
    assert "demo_env" in str(caught.value)


def test_id_41_environment_server_settings_classify_like_any_server_s() -> None:
    """ID-41/ID-21: ``scenario`` is semantic; its host, port and URL are not."""
    env = environment()
    saved = identity(env)
    moved = with_setting(env, "demo_env", "host", "10.1.1.1")
    moved = with_setting(moved, "demo_env", "port", 42000)
    assert digest(moved) == digest(env)  # ID-7: placement is not identity
    url = with_setting(env, "demo_env", "sandbox_url", "http://10.0.0.10:7001")
    found = drift(saved, identity(url))
    assert found is not None
    assert (found.semantic, found.operational) == ((), (f"{ENV_KEY}.sandbox_url",))
    scenario = with_setting(env, "demo_env", "scenario", "workplace_hard")
    found = drift(saved, identity(scenario))
    assert found is not None
    assert (found.semantic, found.operational) == ((f"{ENV_KEY}.scenario",), ())


# --- through the command line ------------------------------------------------------


class EnvRun:
    """A run created with ``create`` from 0.7.0 rows, resumed under changed servers."""

    def __init__(self, folder: Path, rows: list[Config]) -> None:
        self.folder = folder
        self.clock = Clock(seed=41)
        self.out = folder / "results" / "rollouts.jsonl"
        self.inputs = folder / "rows.jsonl"
        self.inputs.write_text("".join(json.dumps(row) + "\n" for row in rows))
        # No agent_name: the task rows' agent is reached only through demo_env.
        self.collection = folder / "collection.yaml"
        self.collection.write_text("num_repeats: 2\nnum_samples_in_parallel: 8\n")
        self.configs = 0

    def config_args(self, env: Config) -> list[Any]:
        self.configs += 1
        overlay = self.folder / f"env{self.configs}.yaml"
        OmegaConf.save(OmegaConf.create(env), overlay)
        files = [arg for path in REAL_FILES for arg in ("--global-config", path)]
        return ["--config", self.collection, *files, "--global-config", overlay]

    def invoke(self, *args: Any) -> Result:
        return CliRunner().invoke(
            main,
            [str(arg) for arg in args],
            obj={"clock": self.clock, "actor": "operator:tester"},
            catch_exceptions=False,
        )

    def create(self, env: Config) -> None:
        result = self.invoke(
            "create", self.out, "--inputs", self.inputs, *self.config_args(env)
        )
        assert result.exit_code == 0, result.stderr

    def diff_config(self, env: Config) -> str:
        result = self.invoke("diff-config", self.out, *self.config_args(env))
        refuses = "resume would refuse" in result.stdout  # exit 3 (CLI-1)
        assert result.exit_code == (3 if refuses else 0), result.stderr
        return result.stdout


@pytest.fixture(params=["task-rows", "agent-routed-rows"])
def env_run(request: pytest.FixtureRequest, tmp_path: Path) -> EnvRun:
    """A run of 0.7.0's task rows, or of its agent-routed rows, through demo_env."""
    run = EnvRun(tmp_path, TASK if request.param == "task-rows" else ROUTED)
    run.create(environment())
    return run


def test_id_41_cli_a_changed_scenario_refuses_the_resume_exit_3(
    env_run: EnvRun,
) -> None:
    """ID-41, CLI-1, CLI-4, CLI-11: the environment server's scenario is semantic."""
    env = with_setting(environment(), "demo_env", "scenario", "workplace_hard")
    result = env_run.invoke(
        "resume", env_run.out, *env_run.config_args(env), "--dry-run"
    )
    assert result.exit_code == 3, result.stderr  # CLI-1: refused, IdentityMismatch
    assert (
        f'{ENV_KEY}.scenario: saved "workplace_default", now "workplace_hard"'
        in result.stderr
    )
    shown = env_run.diff_config(env)
    assert (
        "semantic:\n"
        f'  {ENV_KEY}.scenario: saved "workplace_default", now "workplace_hard"\n'
        "operational: none\n"
        f"resume would refuse ({ENV_KEY}.scenario); --allow-unsafe would override\n"
    ) in shown
    # The unchanged configuration still resumes: nothing was recorded.
    same = env_run.invoke(
        "resume", env_run.out, *env_run.config_args(environment()), "--dry-run"
    )
    assert same.exit_code == 0, same.stderr


def test_id_41_cli_a_moved_environment_server_resumes_as_operational(
    env_run: EnvRun,
) -> None:
    """ID-41, ID-20: its host, port and URL changing is operational drift, accepted."""
    env = environment(host="10.1.1.1", port=42000)
    env = with_setting(env, "demo_env", "sandbox_url", "http://10.0.0.10:7001")
    shown = env_run.diff_config(env)
    assert shown.endswith(
        "semantic: none\n"
        "operational:\n"
        f'  {ENV_KEY}.sandbox_url: saved "http://10.0.0.9:7000", '
        'now "http://10.0.0.10:7001"\n'
        "resume would proceed\n"
    )
    plan = env_run.folder / "plan.jsonl"
    result = env_run.invoke(
        "resume", env_run.out, *env_run.config_args(env), "--plan-out", plan
    )
    assert result.exit_code == 0, result.stderr
    assert f"operational drift accepted: {ENV_KEY}.sandbox_url" in result.stderr
    assert len(plan.read_text().splitlines()) == 2
    # Accepted for good: the run's identity is now the moved one.
    assert "no key differs" in env_run.diff_config(env)


def test_id_41_cli_an_agent_reached_only_through_agent_server_is_compared(
    tmp_path: Path,
) -> None:
    """ID-41: task rows name no agent; the agent behind demo_env is still compared."""
    run = EnvRun(tmp_path, TASK)
    run.create(environment())
    env = with_setting(environment(), AGENT, "max_steps", 12)
    result = run.invoke("resume", run.out, *run.config_args(env), "--dry-run")
    assert result.exit_code == 3, result.stderr
    assert f"{AGENT_KEY}.max_steps: saved 6, now 12" in result.stderr
    assert f"resume would refuse ({AGENT_KEY}.max_steps)" in run.diff_config(env)


def test_id_41_cli_create_refuses_rows_naming_an_unconfigured_environment_server(
    tmp_path: Path,
) -> None:
    """ID-41/ID-3, CLI-1: exit 3 naming the server and the row field."""
    run = EnvRun(tmp_path, TASK)
    env = environment()
    del env["demo_env"]
    result = run.invoke(
        "create", run.out, "--inputs", run.inputs, *run.config_args(env)
    )
    assert result.exit_code == 3
    assert "'demo_env'" in result.stderr
    assert "_ng_environment_server" in result.stderr


# --- runs created before environment servers counted --------------------------------


@pytest.fixture
def earlier_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EnvRun:
    """A run of agent-routed rows whose identity was taken before ID-41.

    Made by creating it while the manifest computes identities as they were
    computed then (``environments=False``): its saved identity lacks demo_env.
    """
    earlier = functools.partial(identity_manifest.identity_of, environments=False)
    run = EnvRun(tmp_path, ROUTED)
    with monkeypatch.context() as patch:
        patch.setattr(identity_manifest, "identity_of", earlier)
        run.create(environment())
    saved = json.loads(
        (run.out.parent / "rollouts_ledger" / "identity.json").read_text()
    )
    assert "demo_env" not in saved["servers"]
    return run


def test_id_41_an_earlier_run_with_the_same_configuration_adopts_the_new_identity(
    earlier_run: EnvRun,
) -> None:
    """ID-41, REC-57: not refused for servers only the new selection reaches."""
    env = environment()
    shown = earlier_run.diff_config(env)
    assert "  servers.demo_env: saved (absent), now {" in shown
    assert shown.endswith("resume would adopt the current identity\n")
    result = earlier_run.invoke(
        "resume",
        earlier_run.out,
        *earlier_run.config_args(env),
        "--plan-out",
        earlier_run.folder / "plan.jsonl",
    )
    assert result.exit_code == 0, result.stderr
    assert "before environment servers counted" in result.stderr
    saved = json.loads(
        (earlier_run.out.parent / "rollouts_ledger" / "identity.json").read_text()
    )
    assert "demo_env" in saved["servers"]  # adopted: compared from now on
    changed = with_setting(env, "demo_env", "scenario", "workplace_hard")
    refused = earlier_run.invoke(
        "resume", earlier_run.out, *earlier_run.config_args(changed), "--dry-run"
    )
    assert refused.exit_code == 3
    assert f"{ENV_KEY}.scenario" in refused.stderr


def test_id_41_an_earlier_run_still_refuses_a_changed_setting(
    earlier_run: EnvRun,
) -> None:
    """ID-41: adoption covers the selection only, never a changed setting."""
    env = with_setting(environment(), AGENT, "max_steps", 12)
    result = earlier_run.invoke(
        "resume", earlier_run.out, *earlier_run.config_args(env), "--dry-run"
    )
    assert result.exit_code == 3, result.stderr
    assert f"{AGENT_KEY}.max_steps: saved 6, now 12" in result.stderr
