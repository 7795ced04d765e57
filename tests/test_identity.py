"""Configuration identity (identity.md, ID-1..ID-5): the document and what enters it.

The configurations here are shaped like real NeMo Gym ones (server blocks,
``${policy_base_url}``, ``${oc.env:...}``, judge servers, agents); the
``nemo_configuration`` builder is shared with the other identity test modules.
ID-6..ID-9, ID-17, ID-33 and the properties are in
``tests/test_identity_values.py``.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf
from pydantic import BaseModel, ConfigDict

from ledger import ConfigError, config_identity, identity_digest
from tests.internals import (
    to_plain,
)

Config = dict[str, Any]


def nemo_configuration() -> tuple[Config, Config, list[Config]]:
    """A collection config, a merged global config and rows, as NeMo Gym has them."""
    global_config: Config = {
        "policy_base_url": "http://10.1.2.3:8000/v1",
        "policy_api_key": "sk-policy-000111222",
        "policy_model_name": "nvidia/nemotron-nano-9b",
        "default_host": "127.0.0.1",
        "policy_model": {
            "responses_api_models": {
                "vllm_model": {
                    "entrypoint": "app.py",
                    "host": "127.0.0.1",
                    "port": 40001,
                    "base_url": "${policy_base_url}",
                    "api_key": "${policy_api_key}",
                    "model": "${policy_model_name}",
                    "return_token_id_information": False,
                    "uses_reasoning_parser": True,
                    "chat_template_kwargs": None,
                    "extra_body": None,
                    "default_headers": {},
                }
            }
        },
        "judge_model": {
            "responses_api_models": {
                "openai_model": {
                    "entrypoint": "app.py",
                    "host": "127.0.0.1",
                    "port": 40002,
                    "openai_base_url": "https://integrate.api.nvidia.com/v1",
                    "openai_api_key": "${oc.env:JUDGE_API_KEY,MISSING}",
                    "openai_model": "openai/gpt-oss-120b",
                    "request_timeout_s": 120,
                    "max_retries": 3,
                }
            }
        },
        "math_with_judge": {
            "resources_servers": {
                "math_with_judge": {
                    "entrypoint": "app.py",
                    "host": "127.0.0.1",
                    "port": 40003,
                    "judge_model_server": {
                        "type": "responses_api_models",
                        "name": "judge_model",
                    },
                    "judge_responses_create_params": {
                        "input": [],
                        "temperature": 0.0,
                        "max_output_tokens": 512,
                    },
                    "should_use_judge": True,
                    "abstention_token": "[ABSTAIN]",
                    "eos_token": "</s>",
                }
            }
        },
        "math_agent": {
            "responses_api_agents": {
                "simple_agent": {
                    "entrypoint": "app.py",
                    "host": "127.0.0.1",
                    "port": 40004,
                    "resources_server": {
                        "type": "resources_servers",
                        "name": "math_with_judge",
                    },
                    "model_server": {
                        "type": "responses_api_models",
                        "name": "policy_model",
                    },
                    "datasets": [
                        {
                            "name": "aime24",
                            "type": "benchmark",
                            "jsonl_fpath": "benchmarks/aime24/data/aime24.jsonl",
                            "num_repeats": 32,
                        }
                    ],
                }
            }
        },
        "claude_agent": {
            "responses_api_agents": {
                "claude_code_agent": {
                    "entrypoint": "app.py",
                    "resources_server": {
                        "type": "resources_servers",
                        "name": "math_with_judge",
                    },
                    "model": "claude-sonnet-4-6",
                    "anthropic_api_key": "${policy_api_key}",
                    "anthropic_base_url": None,
                    "max_turns": None,
                    "timeout": 300,
                    "concurrency": 32,
                    "env": [{"name": "HF_TOKEN", "value": "${oc.env:HF_TOKEN}"}],
                    "docker_args": ["--env", "HF_TOKEN=hf_literal0000"],
                    "artifact_request_headers": {
                        "Authorization": "Bearer ${oc.env:HF_TOKEN}"
                    },
                    "api_key_name": "POLICY_API_KEY",
                }
            }
        },
        "unused_model": {
            "responses_api_models": {
                "vllm_model": {"model": "${oc.env:UNUSED_MODEL_NAME_NEVER_SET}"}
            }
        },
    }
    config: Config = {
        "agent_name": "math_agent",
        "input_jsonl_fpath": "benchmarks/aime24/data/aime24.jsonl",
        "output_jsonl_fpath": "results/aime24_rollouts.jsonl",
        "limit": None,
        "num_repeats": 4,
        "num_repeats_add_seed": False,
        "num_samples_in_parallel": 64,
        "responses_create_params": {
            "temperature": 0.6,
            "top_p": 0.95,
            "max_output_tokens": 4096,
        },
    }
    rows = [
        {
            "_ng_task_index": task,
            "_ng_rollout_index": rollout,
            "agent_ref": {"type": "responses_api_agents", "name": "math_agent"},
            "responses_create_params": {
                "input": [{"role": "user", "content": f"Problem {task}"}]
            },
        }
        for task in range(3)
        for rollout in range(2)
    ]
    return config, global_config, rows


def changed(tree: Config, dotted: str, value: Any) -> Config:
    """A deep copy of ``tree`` with the value at a dotted path set (``...`` removes)."""
    out = copy.deepcopy(tree)
    *parents, last = dotted.split(".")
    node = out
    for part in parents:
        node = node[part]
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return out


def identity_for(config: Config, global_config: Config, rows: Any = None) -> Config:
    """The identity with the builder's rows unless others are given."""
    return config_identity(
        config, global_config, nemo_configuration()[2] if rows is None else rows
    )


# --- ID-1: the identity document ------------------------------------------------------


def test_id_1_identity_document_has_scheme_collection_and_servers() -> None:
    """ID-1: {scheme: 1, collection, servers: {server: {kind: {impl: settings}}}}."""
    config, global_config, _ = nemo_configuration()
    identity = identity_for(config, global_config)
    assert set(identity) == {"scheme", "collection", "servers"}
    assert identity["scheme"] == 1
    assert identity["collection"]["num_repeats"] == 4
    model = identity["servers"]["policy_model"]["responses_api_models"]["vllm_model"]
    assert model["model"] == "nvidia/nemotron-nano-9b"


def test_id_1_config_digest_is_identity_digest_of_identity() -> None:
    """ID-1: the digest is a function of the identity alone."""
    config, global_config, _ = nemo_configuration()
    first = identity_for(config, global_config)
    second = identity_for(copy.deepcopy(config), copy.deepcopy(global_config))
    assert identity_digest(first) == identity_digest(second)


# --- ID-2: plain data from any container ----------------------------------------------


class PydanticCollection(BaseModel):
    """A collection config as a pydantic model holding a nested Hydra container."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    agent_name: str
    input_jsonl_fpath: str
    output_jsonl_fpath: str
    limit: int | None
    num_repeats: int
    num_repeats_add_seed: bool
    num_samples_in_parallel: int
    responses_create_params: Any


@dataclasses.dataclass
class DataclassCollection:
    """A collection config as a dataclass with a tuple and a path inside."""

    agent_name: str
    input_jsonl_fpath: Path
    output_jsonl_fpath: str
    limit: int | None
    num_repeats: int
    num_repeats_add_seed: bool
    num_samples_in_parallel: int
    responses_create_params: dict[str, Any]


def _as_pydantic(config: Config) -> Any:
    hydra = OmegaConf.create(config["responses_create_params"])
    return PydanticCollection(**{**config, "responses_create_params": hydra})


def _as_dataclass(config: Config) -> Any:
    return DataclassCollection(
        **{**config, "input_jsonl_fpath": Path(config["input_jsonl_fpath"])}
    )


@pytest.mark.parametrize(
    ("name", "wrap_config", "wrap_global"),
    [
        ("plain", lambda c: c, lambda g: g),
        ("omegaconf", OmegaConf.create, OmegaConf.create),
        ("pydantic with nested DictConfig", _as_pydantic, lambda g: g),
        ("dataclass with a Path", _as_dataclass, OmegaConf.create),
        ("tuples", lambda c: c, lambda g: {**g, "extra_list": ("a", "b")}),
    ],
)
def test_id_2_containers_become_the_same_plain_identity(
    name: str, wrap_config: Any, wrap_global: Any
) -> None:
    """ID-2: OmegaConf, pydantic (with nested Hydra containers), dataclasses, tuples."""
    config, global_config, rows = nemo_configuration()
    expected = identity_for(config, global_config)
    got = config_identity(wrap_config(config), wrap_global(global_config), rows)
    assert got == expected, name
    assert identity_digest(got) == identity_digest(expected)


def test_id_2_omegaconf_is_converted_without_resolving() -> None:
    """ID-2: interpolations survive conversion, so redaction sees them first."""
    config, global_config, rows = nemo_configuration()
    hydra = OmegaConf.create(global_config)
    identity = config_identity(config, hydra, rows)
    model = identity["servers"]["policy_model"]["responses_api_models"]["vllm_model"]
    assert model["base_url"] == "<runtime:policy_base_url>"


def test_id_2_a_value_that_is_no_json_names_its_key() -> None:
    """ID-2: an object no identity can hold is a ConfigError naming its key."""
    config, global_config, rows = nemo_configuration()
    bad = changed(config, "responses_create_params.stop", object())
    with pytest.raises(ConfigError, match=r"responses_create_params\.stop") as info:
        config_identity(bad, global_config, rows)
    assert info.value.key == "responses_create_params.stop"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({3: "a", True: "b", None: "c"}, {"3": "a", "true": "b", "null": "c"}),
        ({"s": {"b", "a", "c"}}, {"s": ["a", "b", "c"]}),
        (
            {"p": Path("/data/x.jsonl"), "t": (1, (2, 3))},
            {"p": "/data/x.jsonl", "t": [1, [2, 3]]},
        ),
    ],
)
def test_id_2_plain_data_conversions(value: Any, expected: Any) -> None:
    """ID-2: keys as JSON text, sets in a fixed order, paths and tuples."""
    assert to_plain(value) == expected


def test_id_2_colliding_keys_are_a_config_error() -> None:
    """ID-2: 1 and "1" would be one JSON key."""
    with pytest.raises(ConfigError, match="collide"):
        to_plain({"limits": {1: "a", "1": "b"}})


# --- ID-3: reachable servers ----------------------------------------------------------


@pytest.mark.parametrize(
    ("agents", "servers"),
    [
        (
            ["math_agent"],
            {"math_agent", "math_with_judge", "judge_model", "policy_model"},
        ),
        (["claude_agent"], {"claude_agent", "math_with_judge", "judge_model"}),
        (
            ["claude_agent", "math_agent"],
            {
                "claude_agent",
                "math_agent",
                "math_with_judge",
                "judge_model",
                "policy_model",
            },
        ),
    ],
)
def test_id_3_only_servers_the_rows_reach_are_part_of_it(
    agents: list[str], servers: set[str]
) -> None:
    """ID-3: rows' agents, then transitively every referenced server."""
    config, global_config, _ = nemo_configuration()
    rows = [{"agent_ref": {"name": agent}} for agent in agents]
    assert set(config_identity(config, global_config, rows)["servers"]) == servers


def test_id_3_unused_server_with_unset_variable_does_not_fail() -> None:
    """ID-3: an unreachable server is never resolved."""
    config, global_config, rows = nemo_configuration()
    assert "UNUSED_MODEL_NAME_NEVER_SET" not in os.environ
    assert "unused_model" not in config_identity(config, global_config, rows)["servers"]


def test_id_3_no_rows_means_every_server() -> None:
    """ID-3: with no rows (and no agent_name), all servers."""
    config, global_config, _ = nemo_configuration()
    del global_config["unused_model"]
    del config["agent_name"]
    identity = config_identity(config, global_config, [])
    assert set(identity["servers"]) == {
        "policy_model",
        "judge_model",
        "math_with_judge",
        "math_agent",
        "claude_agent",
    }


def test_id_3_rows_without_agent_ref_use_the_collection_agent_name() -> None:
    """ID-3 (decision): rows naming no agent run on the collection's agent_name."""
    config, global_config, _ = nemo_configuration()
    identity = config_identity(config, global_config, [{"_ng_task_index": 0}])
    assert "math_agent" in identity["servers"]
    assert "claude_agent" not in identity["servers"]


@pytest.mark.parametrize(
    ("dotted", "missing", "key"),
    [
        (
            "math_with_judge.resources_servers.math_with_judge.judge_model_server.name",
            "gpt_judge",
            "math_with_judge.resources_servers.math_with_judge.judge_model_server",
        ),
        (
            "math_agent.responses_api_agents.simple_agent.model_server.name",
            "policy_model_v2",
            "math_agent.responses_api_agents.simple_agent.model_server",
        ),
    ],
)
def test_id_3_missing_referenced_server_is_a_config_error_naming_it(
    dotted: str, missing: str, key: str
) -> None:
    """ID-3: a referenced server missing from the configuration is a ConfigError."""
    config, global_config, rows = nemo_configuration()
    broken = changed(global_config, dotted, missing)
    with pytest.raises(ConfigError, match=repr(missing)) as info:
        config_identity(config, broken, rows)
    assert info.value.key == key
    assert key in str(info.value)


def test_id_3_missing_agent_named_by_rows_is_a_config_error() -> None:
    """ID-3: the rows' agent must be configured too."""
    config, global_config, _ = nemo_configuration()
    with pytest.raises(ConfigError, match=r"'ghost_agent'.*row 0 agent_ref\.name"):
        config_identity(config, global_config, [{"agent_ref": {"name": "ghost_agent"}}])


def test_id_3_reference_of_the_wrong_kind_is_a_config_error() -> None:
    """ID-3: {type: kind, name: server} must name a server of that kind."""
    config, global_config, rows = nemo_configuration()
    dotted = "math_agent.responses_api_agents.simple_agent.model_server.name"
    with pytest.raises(ConfigError, match="has no responses_api_models block"):
        config_identity(config, changed(global_config, dotted, "math_with_judge"), rows)


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("environment_server", {"name": "env_server"}),
        ("agent_server", {"name": "env_server"}),
        ("tools", [{"type": "resources_servers", "name": "env_server"}]),
        ("model_server_alias", {"type": "resources_servers", "name": "env_server"}),
    ],
)
def test_id_3_references_are_found_wherever_settings_nest_them(
    setting: str, value: Any
) -> None:
    """ID-3: reference settings and {type, name} mappings, also inside lists."""
    config, global_config, rows = nemo_configuration()
    global_config["env_server"] = {
        "resources_servers": {"sandbox_env": {"scenario": "bank"}}
    }
    agent = global_config["math_agent"]["responses_api_agents"]["simple_agent"]
    agent[setting] = value
    assert "env_server" in config_identity(config, global_config, rows)["servers"]


def test_id_3_reference_name_may_be_an_interpolation() -> None:
    """ID-3: references are read from resolved settings."""
    config, global_config, rows = nemo_configuration()
    global_config["judge_server_name"] = "judge_model"
    dotted = "math_with_judge.resources_servers.math_with_judge.judge_model_server.name"
    identity = config_identity(
        config, changed(global_config, dotted, "${judge_server_name}"), rows
    )
    assert "judge_model" in identity["servers"]


# --- ID-4: concrete server paths ------------------------------------------------------


def test_id_4_server_settings_keep_their_concrete_path() -> None:
    """ID-4: <server>.<kind>.<implementation>, nested; global keys are not servers."""
    config, global_config, rows = nemo_configuration()
    identity = config_identity(config, global_config, rows)
    assert set(identity["servers"]["math_with_judge"]) == {"resources_servers"}
    assert set(identity["servers"]["math_with_judge"]["resources_servers"]) == {
        "math_with_judge"
    }
    assert "default_host" not in identity["servers"]
    assert "default_host" not in identity["collection"]


def test_id_4_global_settings_enter_only_when_the_collection_copies_them() -> None:
    """ID-4: a global setting reaches the identity through the collection document."""
    config, global_config, rows = nemo_configuration()
    global_config["split"] = "benchmark"
    before = config_identity(config, global_config, rows)
    config["dataset_split"] = "${split}"
    after = config_identity(config, global_config, rows)
    assert "split" not in before["collection"]
    assert after["collection"]["dataset_split"] == "benchmark"


def test_id_4_same_implementation_under_two_servers_stays_apart() -> None:
    """ID-4: the server name is part of the path."""
    config, global_config, _ = nemo_configuration()
    global_config["judge_model"] = copy.deepcopy(global_config["policy_model"])
    global_config["judge_model"]["responses_api_models"]["vllm_model"]["model"] = (
        "judge-70b"
    )
    identity = config_identity(config, global_config, [])
    judge = identity["servers"]["judge_model"]["responses_api_models"]["vllm_model"]
    policy = identity["servers"]["policy_model"]["responses_api_models"]["vllm_model"]
    assert (judge["model"], policy["model"]) == ("judge-70b", "nvidia/nemotron-nano-9b")


# --- ID-5: connection references ------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("${policy_base_url}", "<runtime:policy_base_url>"),
        (
            "http://${policy_host}:${policy_port}/v1",
            "http://<runtime:policy_host>:<runtime:policy_port>/v1",
        ),
        (
            "${oc.env:NEMO_SKILLS_SANDBOX_PORT,6000}",
            "<runtime:NEMO_SKILLS_SANDBOX_PORT>",
        ),
        (
            "${oc.env:NEMO_SKILLS_SANDBOX_HOST,127.0.0.1}",
            "<runtime:NEMO_SKILLS_SANDBOX_HOST>",
        ),
        ("${oc.select:judge_base_url,${policy_base_url}}", "<runtime:judge_base_url>"),
        (
            "${policy_model.responses_api_models.vllm_model.port}",
            "<runtime:policy_model.responses_api_models.vllm_model.port>",
        ),
        ("${sandbox_endpoint}/exec", "<runtime:sandbox_endpoint>/exec"),
        ("${search_url}", "<runtime:search_url>"),
        ("${policy_model_name}", "nvidia/nemotron-nano-9b"),
        ("http://judge.internal:8000/v1", "http://judge.internal:8000/v1"),
        ("\\${policy_base_url}", "${policy_base_url}"),
    ],
)
def test_id_5_connection_references_stay_stable_in_their_template(
    value: str, expected: str
) -> None:
    """ID-5: runtime interpolations become <runtime:NAME>; literals never do."""
    config, global_config, rows = nemo_configuration()
    dotted = "math_agent.responses_api_agents.simple_agent.client_url"
    identity = config_identity(config, changed(global_config, dotted, value), rows)
    agent = identity["servers"]["math_agent"]["responses_api_agents"]["simple_agent"]
    assert agent["client_url"] == expected


def test_id_5_references_nested_where_clients_put_them() -> None:
    """ID-5: inside nested provider settings (pi_agent's models_config)."""
    config, global_config, rows = nemo_configuration()
    agent = global_config["math_agent"]["responses_api_agents"]["simple_agent"]
    agent["models_config"] = {
        "providers": {"nvinf": {"baseUrl": "${policy_base_url}", "api": "openai"}}
    }
    identity = config_identity(config, global_config, rows)
    got = identity["servers"]["math_agent"]["responses_api_agents"]["simple_agent"]
    assert got["models_config"]["providers"]["nvinf"]["baseUrl"] == (
        "<runtime:policy_base_url>"
    )


def test_id_5_task_data_named_port_is_never_a_reference() -> None:
    """ID-5: a literal port inside a tool schema stays what it is."""
    config, global_config, rows = nemo_configuration()
    tool = {
        "type": "function",
        "name": "open_socket",
        "parameters": {"properties": {"port": {"type": "integer", "default": 8080}}},
    }
    config["responses_create_params"]["tools"] = [tool]
    identity = config_identity(config, global_config, rows)
    assert identity["collection"]["responses_create_params"]["tools"] == [tool]
