"""Configuration identity (identity.md, ID-6..ID-9, ID-17, ID-33): what values count.

Null defaults, placement, resolution and the digest, file-valued settings, a
saved identity, and the properties (key order, containers, PYTHONHASHSEED).
The configurations come from ``nemo_configuration`` in ``tests/test_identity.py``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from omegaconf import OmegaConf

from ledger import ConfigError, config_identity, identity_digest
from tests.internals import (
    counted_identity,
    find_interpolations,
    identity_normalize,
    key_tables,
    registries,
)
from tests.test_identity import Config, changed, nemo_configuration

# --- ID-6: null defaults --------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "dotted"),
    [
        ("collection", "limit"),
        ("collection", "prompt_config"),
        ("collection", "skills"),
        ("collection", "responses_create_params.seed"),
        (
            "global",
            "math_with_judge.resources_servers.math_with_judge.judge_model_server",
        ),
    ],
)
def test_id_6_null_setting_with_null_default_equals_absent(
    where: str, dotted: str
) -> None:
    """ID-6: where the default is null, null and absent are the same."""
    config, global_config, rows = nemo_configuration()
    if where == "collection":
        null = config_identity(changed_set(config, dotted, None), global_config, rows)
        absent = config_identity(changed_set(config, dotted, ...), global_config, rows)
    else:
        null = config_identity(config, changed(global_config, dotted, None), rows)
        absent = config_identity(config, changed(global_config, dotted, ...), rows)
    assert identity_digest(null) == identity_digest(absent)


def changed_set(tree: Config, dotted: str, value: Any) -> Config:
    """Like :func:`changed`, creating missing mappings on the way."""
    out = copy.deepcopy(tree)
    *parents, last = dotted.split(".")
    node = out
    for part in parents:
        node = node.setdefault(part, {})
    if value is ...:
        node.pop(last, None)
    else:
        node[last] = value
    return out


def test_id_6_null_elsewhere_is_a_value_of_its_own() -> None:
    """ID-6: claude_code_agent's max_turns: null (unlimited) differs from absent."""
    config, global_config, _ = nemo_configuration()
    rows = [{"agent_ref": {"name": "claude_agent"}}]
    dotted = "claude_agent.responses_api_agents.claude_code_agent.max_turns"
    null = config_identity(config, global_config, rows)
    absent = config_identity(config, changed(global_config, dotted, ...), rows)
    assert identity_digest(null) != identity_digest(absent)


def test_id_6_a_set_value_with_a_null_default_stays() -> None:
    """ID-6: only null is dropped."""
    config, global_config, rows = nemo_configuration()
    identity = config_identity(changed(config, "limit", 10), global_config, rows)
    assert identity["collection"]["limit"] == 10


def test_id_6_and_17_registry_is_replaceable(monkeypatch: pytest.MonkeyPatch) -> None:
    """ID-17: the null-default registry is module data read at call time."""
    config, global_config, _ = nemo_configuration()
    rows = [{"agent_ref": {"name": "claude_agent"}}]
    monkeypatch.setattr(
        registries,
        "NULL_DEFAULTS",
        {
            **registries.NULL_DEFAULTS,
            "responses_api_agents.claude_code_agent": frozenset({"max_turns"}),
        },
    )
    agent = config_identity(config, global_config, rows)["servers"]["claude_agent"]
    assert "max_turns" not in agent["responses_api_agents"]["claude_code_agent"]


def test_id_17_registries_start_as_the_spec_lists() -> None:
    """ID-17: initial null defaults, added settings and removed null defaults."""
    null_defaults = {
        "collection": frozenset(
            {"prompt_config", "skills", "limit", "responses_create_params.seed"}
        ),
        "resources_servers": frozenset({"judge_model_server"}),
    }
    assert dict(registries.NULL_DEFAULTS) == null_defaults
    assert registries.ADDED_COLLECTION_SETTINGS == {
        "num_repeats_add_seed": False,
        "prompt_config": None,
        "skills": None,
    }
    assert registries.REMOVED_NULL_DEFAULTS == {}


# --- ID-7: placement ------------------------------------------------------------------


@pytest.mark.parametrize(
    "dotted",
    [
        "policy_model.responses_api_models.vllm_model.host",
        "policy_model.responses_api_models.vllm_model.port",
        "math_agent.responses_api_agents.simple_agent.port",
        "math_with_judge.resources_servers.math_with_judge.host",
    ],
)
def test_id_7_server_placement_is_not_part_of_the_identity(dotted: str) -> None:
    """ID-7: host/port in a server's settings change on every launch."""
    config, global_config, rows = nemo_configuration()
    before = config_identity(config, global_config, rows)
    after = config_identity(config, changed(global_config, dotted, 59999), rows)
    assert before == after
    assert (
        "host"
        not in before["servers"]["policy_model"]["responses_api_models"]["vllm_model"]
    )


def test_id_7_nested_host_settings_are_not_placement() -> None:
    """ID-7: only host and port directly in a server's settings are placement."""
    config, global_config, rows = nemo_configuration()
    agent = global_config["math_agent"]["responses_api_agents"]["simple_agent"]
    agent["sandbox"] = {"host": "sandbox.internal", "image": "python:3.12"}
    got = config_identity(config, global_config, rows)["servers"]["math_agent"]
    assert got["responses_api_agents"]["simple_agent"]["sandbox"]["host"] == (
        "sandbox.internal"
    )


# --- ID-8: resolution and the digest --------------------------------------------------


def test_id_8_interpolations_resolve_against_the_whole_configuration() -> None:
    """ID-8: global, relative and collection-side references resolve as collected."""
    config, global_config, rows = nemo_configuration()
    agent = global_config["math_agent"]["responses_api_agents"]["simple_agent"]
    agent["max_steps"] = 12
    agent["max_tool_steps"] = "${.max_steps}"
    agent["model_label"] = "${policy_model_name}"
    config["num_repeats"] = "${math_agent.responses_api_agents.simple_agent.max_steps}"
    identity = config_identity(config, global_config, rows)
    got = identity["servers"]["math_agent"]["responses_api_agents"]["simple_agent"]
    assert (got["max_tool_steps"], got["model_label"]) == (
        12,
        "nvidia/nemotron-nano-9b",
    )
    assert identity["collection"]["num_repeats"] == 12


def test_id_8_environment_interpolations_of_settings_are_resolved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ID-8: a non-credential oc.env value is part of what the run measures."""
    config, global_config, rows = nemo_configuration()
    dotted = "math_with_judge.resources_servers.math_with_judge.prompt_template"
    global_config = changed(global_config, dotted, "${oc.env:JUDGE_PROMPT,default}")
    monkeypatch.setenv("JUDGE_PROMPT", "strict")
    strict = config_identity(config, global_config, rows)
    monkeypatch.setenv("JUDGE_PROMPT", "lenient")
    lenient = config_identity(config, global_config, rows)
    assert identity_digest(strict) != identity_digest(lenient)


@pytest.mark.parametrize(
    ("dotted", "value", "key", "message"),
    [
        (
            "policy_model.responses_api_models.vllm_model.model",
            "${policy_model_nam}",
            "policy_model.responses_api_models.vllm_model.model",
            "policy_model_nam",
        ),
        (
            "judge_model.responses_api_models.openai_model.openai_model",
            "${oc.env:JUDGE_MODEL_NEVER_SET_X}",
            "judge_model.responses_api_models.openai_model.openai_model",
            "cannot be resolved",
        ),
        (
            "math_agent.responses_api_agents.simple_agent.resources_server.name",
            "???",
            "math_agent.responses_api_agents.simple_agent.resources_server.name",
            r"is \?\?\?",
        ),
        (
            "math_agent.responses_api_agents.simple_agent.datasets",
            [{"name": "x", "num_repeats": "${nope}"}],
            "math_agent.responses_api_agents.simple_agent.datasets[0].num_repeats",
            "nope",
        ),
    ],
)
def test_id_8_unresolvable_interpolation_is_a_config_error_naming_its_key(
    dotted: str, value: Any, key: str, message: str
) -> None:
    """ID-8: an interpolation that cannot be resolved, or ???, names its dotted key."""
    config, global_config, rows = nemo_configuration()
    with pytest.raises(ConfigError, match=message) as info:
        config_identity(config, changed(global_config, dotted, value), rows)
    assert info.value.key == key
    assert key in str(info.value)


@pytest.mark.parametrize(
    ("text", "bodies"),
    [
        ("plain", []),
        ("${a}", ["a"]),
        ("http://${h}:${p}/v1", ["h", "p"]),
        ("${oc.select:a,${oc.env:B,c}}", ["oc.select:a,${oc.env:B,c}"]),
        ("\\${a} ${b}", ["b"]),
        ("\\\\${a}", ["a"]),
        ("${oc.env:X,'}'}", ["oc.env:X,'}'"]),
        ("${unclosed", []),
        ("$ {a} ${}", [""]),
    ],
)
def test_id_8_scanner_finds_interpolations_by_brace_matching(
    text: str, bodies: list[str]
) -> None:
    """ID-8: our own brace-matching scanner, escapes and quotes included."""
    assert [one.body for one in find_interpolations(text)] == bodies


@pytest.mark.parametrize("directive", ["_inherit_from", "_copy"])
def test_id_8_unexpanded_loader_directive_is_a_config_error(directive: str) -> None:
    """ID-8: NeMo Gym's loader expands _inherit_from and _copy before we see them."""
    config, global_config, rows = nemo_configuration()
    global_config["aime24_agent"] = {directive: "math_agent"}
    with pytest.raises(ConfigError, match=f"aime24_agent.{directive}") as info:
        config_identity(config, global_config, rows)
    assert info.value.key == f"aime24_agent.{directive}"


def test_id_8_digest_is_sha256_of_compact_sorted_utf8_json() -> None:
    """ID-8: sorted keys, no whitespace, UTF-8 (not escaped), as hex."""
    identity = {
        "scheme": 1,
        "servers": {},
        "collection": {"b": "é", "a": [1, 2.5, None, 1e-7, 1e22]},
    }
    expected = json.dumps(
        identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode()
    assert identity_digest(identity) == hashlib.sha256(expected).hexdigest()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_id_8_digest_refuses_nan_naming_its_key(bad: float) -> None:
    """ID-8: NaN refused."""
    with pytest.raises(
        ConfigError, match=r"collection\.responses_create_params\.top_p"
    ):
        identity_digest(
            {"scheme": 1, "collection": {"responses_create_params": {"top_p": bad}}}
        )


# --- ID-9: file-valued settings -------------------------------------------------------


@pytest.fixture
def prompt_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A judge prompt template, in the current directory as the collector takes it."""
    monkeypatch.chdir(tmp_path)
    prompt = tmp_path / "prompts" / "judge.txt"
    prompt.parent.mkdir()
    prompt.write_text("Grade the answer: {answer}\n")
    return prompt


def _with_prompt(
    global_config: Config, value: str, key: str = "judge_prompt_fpath"
) -> Config:
    return changed(
        global_config, f"math_with_judge.resources_servers.math_with_judge.{key}", value
    )


def _math_settings(identity: Config) -> Config:
    settings: Config = identity["servers"]["math_with_judge"]["resources_servers"][
        "math_with_judge"
    ]
    return settings


@pytest.mark.parametrize(
    "key", ["judge_prompt_fpath", "rubric_path", "system_prompt_file"]
)
def test_id_9_semantic_file_setting_becomes_path_and_digest(
    prompt_file: Path, key: str
) -> None:
    """ID-9: {path, sha256} for a readable regular file (relative to the cwd)."""
    config, global_config, rows = nemo_configuration()
    identity = config_identity(
        config, _with_prompt(global_config, "prompts/judge.txt", key), rows
    )
    assert _math_settings(identity)[key] == {
        "path": "prompts/judge.txt",
        "sha256": hashlib.sha256(prompt_file.read_bytes()).hexdigest(),
    }


def test_id_9_larger_file_is_recorded_by_size(
    prompt_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ID-9: a file above the limit (16 MiB; lowered here) becomes {path, size}."""
    monkeypatch.setattr(key_tables, "FILE_VALUE_MAX_BYTES", 4)
    config, global_config, rows = nemo_configuration()
    identity = config_identity(
        config, _with_prompt(global_config, str(prompt_file)), rows
    )
    assert _math_settings(identity)["judge_prompt_fpath"] == {
        "path": str(prompt_file),
        "size": prompt_file.stat().st_size,
    }


@pytest.mark.parametrize("value", ["prompts/missing.txt", "prompts", ""])
def test_id_9_path_naming_no_file_stays_a_string(prompt_file: Path, value: str) -> None:
    """ID-9: a missing file or a folder stays a string."""
    config, global_config, rows = nemo_configuration()
    identity = config_identity(config, _with_prompt(global_config, value), rows)
    assert _math_settings(identity)["judge_prompt_fpath"] == value


def test_id_9_operational_paths_are_never_read(prompt_file: Path) -> None:
    """ID-9: outputs, logs and checkpoints stay strings even when the file exists."""
    config, global_config, rows = nemo_configuration()
    config["output_jsonl_fpath"] = "prompts/judge.txt"
    config["input_jsonl_fpath"] = "prompts/judge.txt"
    identity = config_identity(config, global_config, rows)
    assert identity["collection"]["output_jsonl_fpath"] == "prompts/judge.txt"
    assert identity["collection"]["input_jsonl_fpath"] == "prompts/judge.txt"


def test_id_9_unreadable_file_is_a_config_error_naming_it(
    prompt_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ID-9 (decision): a regular file that cannot be read is an error, not a path."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(identity_normalize, "open", refuse, raising=False)
    config, global_config, rows = nemo_configuration()
    with pytest.raises(
        ConfigError, match=r"prompts/judge\.txt.*Permission denied"
    ) as info:
        config_identity(config, _with_prompt(global_config, "prompts/judge.txt"), rows)
    assert info.value.path == "prompts/judge.txt"


# --- ID-33: a saved identity counts only with its own digest --------------------------


def test_id_33_saved_identity_counts_with_its_digest() -> None:
    """ID-33: the identity the config_digest was taken from counts."""
    config, global_config, rows = nemo_configuration()
    identity = config_identity(config, global_config, rows)
    assert counted_identity(identity, identity_digest(identity), where="x") == identity


def test_id_33_other_identity_is_ignored_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """ID-33: otherwise ignored with a warning (logger "ledger") naming its origin."""
    config, global_config, rows = nemo_configuration()
    identity = config_identity(config, global_config, rows)
    with caplog.at_level(logging.WARNING, logger="ledger"):
        got = counted_identity(identity, "0" * 64, where="run_created (seq 1)")
    assert got is None
    assert [r.name for r in caplog.records] == ["ledger"]
    assert "run_created (seq 1)" in caplog.records[0].getMessage()


# --- Properties: key order, containers, PYTHONHASHSEED (ID-1, ID-2, ID-8) -------------

_KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8).filter(
    lambda key: (
        not key.endswith(("_path", "_fpath", "_file"))
        and key not in {"host", "port", "_copy"}
    )
)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet="abcdefghijklmnopqrstuvwxyz ABC-0123456789", max_size=12)
)
_TREES = st.recursive(
    st.dictionaries(_KEYS, _SCALARS, max_size=4),
    lambda children: st.dictionaries(
        _KEYS, children | st.lists(_SCALARS, max_size=3), max_size=4
    ),
    max_leaves=12,
)


def _reordered(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: _reordered(item, rng) for key, item in items}
    if isinstance(value, list):
        return [_reordered(item, rng) for item in value]
    return value


def _random_configuration(settings: Config, judge: Config) -> tuple[Config, Config]:
    config, global_config, _ = nemo_configuration()
    del global_config["unused_model"]
    config["responses_create_params"]["extra"] = settings
    global_config["math_with_judge"]["resources_servers"]["math_with_judge"][
        "extra"
    ] = judge
    return config, global_config


@given(settings=_TREES, judge=_TREES, seed=st.integers(0, 2**32))
def test_id_1_identity_does_not_depend_on_key_order_or_containers(
    settings: Config, judge: Config, seed: int
) -> None:
    """ID-1/ID-2: key order and OmegaConf versus plain containers never matter."""
    config, global_config = _random_configuration(settings, judge)
    rows = nemo_configuration()[2]
    expected = config_identity(config, global_config, rows)
    rng = random.Random(seed)
    shuffled = config_identity(
        _reordered(config, rng), _reordered(global_config, rng), rows
    )
    hydra = config_identity(
        OmegaConf.create(_reordered(config, rng)), OmegaConf.create(global_config), rows
    )
    assert shuffled == expected == hydra
    assert (
        identity_digest(shuffled) == identity_digest(expected) == identity_digest(hydra)
    )


_SEED_SCRIPT = """
import json, sys
from ledger import config_identity, identity_digest
from tests.test_identity import nemo_configuration
config, global_config, rows = nemo_configuration()
config["tags"] = {"zeta", "alpha", "mu", "beta", "omega", "kappa"}
identity = config_identity(config, global_config, rows)
print(identity_digest(identity))
print(json.dumps(identity, sort_keys=True))
"""


def test_id_8_digest_does_not_depend_on_pythonhashseed() -> None:
    """ID-8: two processes with different hash seeds give the same bytes."""
    root = Path(__file__).resolve().parent.parent
    outputs = []
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", _SEED_SCRIPT],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    assert len(outputs[0].splitlines()[0]) == 64
