"""Differences between identities and their classes (identity.md, ID-20..ID-22)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from ledger import Drift, classify_key, config_identity, diff_keys, drift
from tests.internals import join_key, split_key
from tests.test_identity import changed, nemo_configuration

POLICY = "servers.policy_model.responses_api_models.vllm_model"
JUDGE = "servers.judge_model.responses_api_models.openai_model"
MATH = "servers.math_with_judge.resources_servers.math_with_judge"
AGENT = "servers.math_agent.responses_api_agents.simple_agent"

# --- ID-20: diff_keys -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "keys"),
    [
        # nested mappings are compared key by key
        ({"x": {"y": 1, "z": 2}}, {"x": {"y": 1, "z": 3}}, ["x.z"]),
        # a list is one value
        ({"p": {"stop": ["a", "b"]}}, {"p": {"stop": ["a", "c"]}}, ["p.stop"]),
        ({"p": {"stop": [{"k": 1}]}}, {"p": {"stop": [{"k": 2}]}}, ["p.stop"]),
        # a key on one side only differs as a whole
        ({"x": {"y": {"deep": 1}}}, {"x": {}}, ["x.y"]),
        ({}, {"new": None}, ["new"]),
        # 1, 1.0 and true are different values
        ({"v": 1}, {"v": 1.0}, ["v"]),
        ({"v": 1}, {"v": True}, ["v"]),
        ({"v": None}, {"v": 0}, ["v"]),
        # a mapping against a scalar differs at that key
        ({"f": "p.txt"}, {"f": {"path": "p.txt", "sha256": "0" * 64}}, ["f"]),
        # sorted
        (
            {"b": 1, "a": {"c": 1}, "c": 1},
            {"b": 2, "a": {"c": 2}, "c": 2},
            ["a.c", "b", "c"],
        ),
        # segments holding "." or "\" are escaped
        ({"m": {"gpt-4.1": 1}}, {"m": {"gpt-4.1": 2}}, ["m.gpt-4\\.1"]),
        ({"m": {"a\\b": 1}}, {"m": {"a\\b": 2}}, ["m.a\\\\b"]),
        ({"same": [1, 2]}, {"same": [1, 2]}, []),
    ],
)
def test_id_20_diff_keys(a: dict[str, Any], b: dict[str, Any], keys: list[str]) -> None:
    """ID-20: sorted dotted keys whose values differ; a list is one value."""
    assert diff_keys(a, b) == keys
    assert diff_keys(b, a) == keys


@pytest.mark.parametrize(
    "segments", [("a", "b"), ("gpt-4.1", "x"), ("a\\b", "c.d\\"), ("",), ("a", "")]
)
def test_id_20_every_dotted_key_names_one_place(segments: tuple[str, ...]) -> None:
    """ID-20: escaping round-trips."""
    assert split_key(join_key(segments)) == segments


# --- ID-21: classify_key --------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        # timeouts and deadlines
        (f"{JUDGE}.request_timeout_s", "operational"),
        (f"{AGENT}.timeout", "operational"),
        ("collection.agent_deadline_s", "operational"),
        ("servers.x.responses_api_agents.swe.swebench_agent_timeout", "operational"),
        # retries
        (f"{JUDGE}.max_retries", "operational"),
        (f"{MATH}.judge_retry.backoff_s", "operational"),
        # transport
        (f"{POLICY}.base_url", "operational"),
        (f"{JUDGE}.openai_base_url", "operational"),
        (f"{AGENT}.models_config.providers.nvinf.baseUrl", "operational"),
        (f"{AGENT}.sandbox.host", "operational"),
        (f"{AGENT}.sandbox_port", "operational"),
        (f"{AGENT}.proxy", "operational"),
        (f"{AGENT}.search_endpoint", "operational"),
        (f"{POLICY}.tensor_parallel_size", "operational"),
        ("collection.disallowed_ports", "operational"),
        # concurrency
        ("collection.num_samples_in_parallel", "operational"),
        (f"{AGENT}.concurrency", "operational"),
        (f"{MATH}.judge_endpoint_max_concurrency", "operational"),
        (f"{AGENT}.num_workers", "operational"),
        # health
        (f"{AGENT}.skip_health_check", "operational"),
        (f"{POLICY}.readiness_probe", "operational"),
        # paths
        ("collection.results_dir", "operational"),
        (f"{AGENT}.model_call_capture_dir", "operational"),
        (f"{MATH}.judge_prompt_fpath.path", "operational"),
        # tracking
        ("collection.verbose", "operational"),
        ("collection.upload_rollouts", "operational"),
        ("collection.wandb_project", "operational"),
        (f"{AGENT}.log_level", "operational"),
        (f"{AGENT}.logging.format", "operational"),
        # collection control
        ("collection.output_jsonl_fpath", "operational"),
        ("collection.input_jsonl_fpath", "operational"),
        ("collection.resume_from_cache", "operational"),
        ("collection.dispatch_budget_s", "operational"),
        ("collection.retain_results_in_memory", "operational"),
        # credentials (ID-15)
        (f"{POLICY}.api_key", "operational"),
        (f"{AGENT}.env_api_key_name", "operational"),
        # semantic: dataset and limits, agent and model, sampling, prompts, judge
        ("collection.limit", "semantic"),
        ("collection.num_repeats", "semantic"),
        ("collection.num_repeats_add_seed", "semantic"),
        ("collection.agent_name", "semantic"),
        ("collection.responses_create_params.temperature", "semantic"),
        ("collection.responses_create_params.top_p", "semantic"),
        ("collection.responses_create_params.max_output_tokens", "semantic"),
        ("collection.responses_create_params.seed", "semantic"),
        ("collection.responses_create_params.parallel_tool_calls", "semantic"),
        ("collection.responses_create_params.reasoning", "semantic"),
        ("collection.responses_create_params.top_logprobs", "semantic"),
        ("collection.responses_create_params.logit_bias", "semantic"),
        ("collection.prompt_config", "semantic"),
        (f"{POLICY}.model", "semantic"),
        (f"{POLICY}.chat_template_kwargs", "semantic"),
        (f"{MATH}.judge_model_server", "semantic"),
        (f"{MATH}.judge_responses_create_params.temperature", "semantic"),
        (f"{MATH}.abstention_token", "semantic"),
        (f"{MATH}.eos_token", "semantic"),
        (f"{MATH}.judge_prompt_fpath.sha256", "semantic"),
        (f"{MATH}.judge_prompt_fpath", "semantic"),
        (f"{AGENT}.max_turns", "semantic"),
        (f"{AGENT}.catalog", "semantic"),
        (f"{AGENT}.datasets", "semantic"),
        # a server's name never matters; a whole server is semantic
        ("servers.timeout_judge.responses_api_models.openai_model.model", "semantic"),
        ("servers.log_server.resources_servers.host_bench.scoring_rule", "semantic"),
        ("servers.policy_model", "semantic"),
        ("servers.policy_model.responses_api_models.vllm_model", "semantic"),
        ("scheme", "semantic"),
        ("collection.some_unknown_setting", "semantic"),
    ],
)
def test_id_21_classify_key(key: str, expected: str) -> None:
    """ID-21: operational when any segment of the settings part matches a rule."""
    assert classify_key(key) == expected


# --- ID-22: drift ---------------------------------------------------------------------


def test_id_22_no_saved_identity_is_no_drift() -> None:
    """ID-22: None when no saved identity counts (ID-33)."""
    assert drift(None, {"scheme": 1}) is None


def test_id_22_drift_is_frozen_with_sorted_tuples() -> None:
    """ID-22: a frozen Drift with .semantic and .operational, sorted."""
    saved = {"collection": {"b_timeout": 1, "a_timeout": 1, "z": 1, "limit": 5}}
    current = {"collection": {"b_timeout": 2, "a_timeout": 2, "z": 2, "limit": 6}}
    got = drift(saved, current)
    assert got == Drift(
        semantic=("collection.limit", "collection.z"),
        operational=("collection.a_timeout", "collection.b_timeout"),
    )
    with pytest.raises(AttributeError):
        got.semantic = ()  # type: ignore[misc]
    assert msgspec.json.decode(msgspec.json.encode(got), type=Drift) == got


# --- ID-21/ID-22 on real-shaped configurations ----------------------------------------


@pytest.mark.parametrize(
    ("where", "dotted", "value", "keys"),
    [
        (
            "global",
            "judge_model.responses_api_models.openai_model.request_timeout_s",
            300,
            [f"{JUDGE}.request_timeout_s"],
        ),
        (
            "global",
            "judge_model.responses_api_models.openai_model.max_retries",
            8,
            [f"{JUDGE}.max_retries"],
        ),
        (
            "config",
            "num_samples_in_parallel",
            256,
            ["collection.num_samples_in_parallel"],
        ),
        (
            "global",
            "judge_model.responses_api_models.openai_model.openai_base_url",
            "https://judge.internal:9000/v1",
            [f"{JUDGE}.openai_base_url"],
        ),
        (
            "config",
            "output_jsonl_fpath",
            "results/run2.jsonl",
            ["collection.output_jsonl_fpath"],
        ),
    ],
)
def test_id_21_operational_changes_drift_operationally_naming_exactly_them(
    where: str, dotted: str, value: Any, keys: list[str]
) -> None:
    """ID-21: a timeout, a retry count, concurrency, a literal endpoint URL."""
    config, global_config, rows = nemo_configuration()
    saved = config_identity(config, global_config, rows)
    if where == "config":
        config = changed(config, dotted, value)
    else:
        global_config = changed(global_config, dotted, value)
    assert drift(saved, config_identity(config, global_config, rows)) == Drift(
        operational=tuple(keys)
    )


@pytest.mark.parametrize(
    ("dotted", "value"),
    [
        ("policy_model.responses_api_models.vllm_model.host", "10.9.9.9"),
        ("policy_model.responses_api_models.vllm_model.port", 51234),
        ("math_agent.responses_api_agents.simple_agent.port", 51235),
        ("policy_base_url", "http://10.200.0.7:8123/v1"),
        ("policy_api_key", "sk-rotated-key"),
    ],
)
def test_id_21_placement_moved_references_and_rotated_keys_are_no_drift(
    dotted: str, value: Any
) -> None:
    """ID-7/ID-5/ID-15: a block's host/port, a moved ${policy_base_url}, a new key."""
    config, global_config, rows = nemo_configuration()
    saved = config_identity(config, global_config, rows)
    current = config_identity(config, changed(global_config, dotted, value), rows)
    assert drift(saved, current) == Drift()


@pytest.mark.parametrize(
    ("where", "dotted", "value", "keys"),
    [
        (
            "config",
            "responses_create_params.temperature",
            1.0,
            ["collection.responses_create_params.temperature"],
        ),
        ("config", "num_repeats", 8, ["collection.num_repeats"]),
        ("config", "limit", 100, ["collection.limit"]),
        ("global", "policy_model_name", "nvidia/other-12b", [f"{POLICY}.model"]),
        (
            "global",
            "math_with_judge.resources_servers.math_with_judge.judge_responses_create_params.temperature",
            0.7,
            [f"{MATH}.judge_responses_create_params.temperature"],
        ),
        (
            "global",
            "math_with_judge.resources_servers.math_with_judge.should_use_judge",
            False,
            [f"{MATH}.should_use_judge"],
        ),
        (
            "global",
            "judge_model.responses_api_models.openai_model.openai_model",
            "openai/gpt-5",
            [f"{JUDGE}.openai_model"],
        ),
    ],
)
def test_id_21_semantic_changes_drift_semantically_naming_them(
    where: str, dotted: str, value: Any, keys: list[str]
) -> None:
    """ID-21: temperature, repeats, limit, the model name, judge settings."""
    config, global_config, rows = nemo_configuration()
    saved = config_identity(config, global_config, rows)
    if where == "config":
        config = changed(config, dotted, value)
    else:
        global_config = changed(global_config, dotted, value)
    assert drift(saved, config_identity(config, global_config, rows)) == Drift(
        semantic=tuple(keys)
    )


def test_id_21_judge_server_swap_names_the_reference_and_the_new_server() -> None:
    """ID-21: pointing the judge at another server drops that server: semantic."""
    config, global_config, rows = nemo_configuration()
    saved = config_identity(config, global_config, rows)
    dotted = "math_with_judge.resources_servers.math_with_judge.judge_model_server.name"
    current = config_identity(
        config, changed(global_config, dotted, "policy_model"), rows
    )
    got = drift(saved, current)
    assert got is not None
    assert got.operational == ()
    assert got.semantic == ("servers.judge_model", f"{MATH}.judge_model_server.name")
