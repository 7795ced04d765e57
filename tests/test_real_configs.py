"""Every real NeMo Gym configuration through identity rules (ID-1, ID-10..12, ID-21).

The 438 files of ``../shared/fixtures/nemo-gym-configs/`` (or the folder named by
``ROLLOUT_LEDGER_NEMO_GYM_CONFIGS``) are loaded through OmegaConf without
resolving anything and never modified. Each goes through ``credential_safe``,
``classify_key`` and ``config_identity`` (rows naming its agents), as written and
with an ``env.yaml``-style overlay that supplies the policy model a launcher
would add: either an identity or the documented ``ConfigError``, never another
exception. The pinned summary makes any change in those rules show as a diff.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ledger import (
    ConfigError,
    classify_key,
    config_identity,
    credential_safe,
    identity_digest,
)
from tests.internals import (
    REDACTED,
    SERVER_KINDS,
    credential_interpolation,
    credential_named,
    find_interpolations,
    join_key,
    server_blocks,
)
from tests.prerequisites import CONFIGS_ENV, nemo_gym_configs, require_folder

CONFIGS = nemo_gym_configs()
require_folder(CONFIGS, "*.yaml", CONFIGS_ENV)

#: What a launcher's env.yaml adds: the policy model and its connection settings.
OVERLAY: dict[str, Any] = {
    "policy_base_url": "http://127.0.0.1:8000/v1",
    "policy_api_key": "sk-overlay-policy",
    "policy_model_name": "nvidia/test-model",
    "judge_base_url": "http://127.0.0.1:8001/v1",
    "judge_api_key": "sk-overlay-judge",
    "judge_model_name": "judge-model",
    "policy_model": {
        "responses_api_models": {
            "vllm_model": {
                "entrypoint": "app.py",
                "base_url": "${policy_base_url}",
                "api_key": "${policy_api_key}",
                "model": "${policy_model_name}",
            }
        }
    },
}

#: The documented ConfigError messages of config_identity, by kind.
DOCUMENTED = {
    "missing server": "is not in the configuration",
    "wrong kind": "block; it configures",
    "unexpanded directive": "unexpanded directive",
    "unresolvable interpolation": "cannot be resolved",
    "missing value": "is ???",
}


def config_files() -> list[Path]:
    """Every YAML configuration of the fixture folder."""
    return sorted(CONFIGS.rglob("*.yaml")) if CONFIGS.is_dir() else []


def _id(path: Path) -> str:
    return str(path.relative_to(CONFIGS))


@cache
def load(path: Path) -> DictConfig:
    """A file through OmegaConf, unresolved (PyYAML when OmegaConf refuses it)."""
    try:
        loaded = OmegaConf.load(path)
    except (yaml.YAMLError, OmegaConfBaseException):
        # One file repeats a mapping key, which OmegaConf's loader refuses;
        # PyYAML keeps the last value, as a plain YAML reader would.
        loaded = OmegaConf.create(yaml.safe_load(path.read_text()))
    assert isinstance(loaded, DictConfig)
    return loaded


@cache
def plain(path: Path) -> dict[str, Any]:
    """The file as plain data, interpolations unresolved (shared: do not modify)."""
    value = OmegaConf.to_container(load(path), resolve=False, throw_on_missing=False)
    assert isinstance(value, dict)
    return {str(key): item for key, item in value.items()}


@pytest.fixture(autouse=True)
def _no_referenced_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every variable the files read is unset, so outcomes do not depend on the host."""
    for name in _referenced_variables():
        monkeypatch.delenv(name, raising=False)


@cache
def _referenced_variables() -> frozenset[str]:
    pattern = re.compile(r"oc\.env:([A-Za-z_][A-Za-z0-9_]*)")
    return frozenset(
        name for path in config_files() for name in pattern.findall(path.read_text())
    )


def _mapping_keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _mapping_keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from _mapping_keys(item)


def _items(
    value: Any, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, str(key)), item
            yield from _items(item, (*path, str(key)))
    elif isinstance(value, list):
        for item in value:
            yield from _items(item, path)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


# --- ID-10..ID-12: credential_safe on every file --------------------------------------


@pytest.mark.parametrize("path", config_files(), ids=_id)
def test_id_10_every_real_configuration_is_credential_safe(path: Path) -> None:
    """ID-10..ID-12: no credential-named value, no credential interpolation survives."""
    original = plain(path)
    safe = credential_safe(load(path))
    for dotted, value in _items(safe):
        if credential_named(dotted[-1]):
            assert value == REDACTED, join_key(dotted)
    for text in _strings(safe):
        assert not any(
            credential_interpolation(one) for one in find_interpolations(text)
        )
    literals = {
        value
        for dotted, value in _items(original)
        if credential_named(dotted[-1])
        and isinstance(value, str)
        and "${" not in value
        and len(value) >= 8
    }
    assert literals.isdisjoint(set(_strings(safe)))


def _readme_credential_keys() -> list[str]:
    text = (CONFIGS / "README.md").read_text()
    listed = text.split("credential-named:", 1)[1].split(";", 1)[0]
    return re.findall(r"`([^`]+)`", listed)


def test_id_11_credential_named_keys_of_the_real_configurations() -> None:
    """ID-11: the README's 19 names are credential-named; no other key of the files is.

    Of the 19, ``HF_TOKEN`` occurs in these files only as an environment variable
    (``${oc.env:HF_TOKEN}``), and ``POLICY_API_KEY`` and ``api_key_name`` not at
    all, so 16 of them are mapping keys here.
    """
    readme = _readme_credential_keys()
    assert len(readme) == 19
    assert all(credential_named(key) for key in readme)
    keys = {key for path in config_files() for key in _mapping_keys(plain(path))}
    found = {key for key in keys if credential_named(key)}
    assert found <= set(readme)
    assert set(readme) - found == {"HF_TOKEN", "POLICY_API_KEY", "api_key_name"}
    variables = _referenced_variables()
    assert "HF_TOKEN" in variables
    for counts in (
        "max_output_tokens",
        "context_reset_tokens",
        "num_speculative_tokens",
    ):
        assert counts in keys
        assert not credential_named(counts)


# --- ID-21: classify_key on every key -------------------------------------------------


def _identity_keys(config: dict[str, Any]) -> Iterator[str]:
    """Every dotted key of the file, written as an identity would name it."""
    blocks = server_blocks(config)
    for name, value in config.items():
        if name not in blocks:
            yield from (join_key(("collection", *p)) for p, _ in _items({name: value}))
            continue
        for kind, impls in blocks[name].items():
            for impl, settings in impls.items():
                prefix = ("servers", name, kind, impl)
                yield from (join_key((*prefix, *p)) for p, _ in _items(settings))


@cache
def _all_identity_keys() -> frozenset[str]:
    return frozenset(
        key for path in config_files() for key in _identity_keys(plain(path))
    )


@pytest.mark.parametrize("path", config_files(), ids=_id)
def test_id_21_every_real_key_is_classified(path: Path) -> None:
    """ID-21: every key of every file is operational or semantic."""
    checked = 0
    for key in _identity_keys(plain(path)):
        assert classify_key(key) in ("operational", "semantic")
        checked += 1
    assert checked  # the file had keys to classify


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("concurrency", "operational"),
        ("timeout", "operational"),
        ("request_timeout_s", "operational"),
        ("judge_endpoint_max_concurrency", "operational"),
        ("base_url", "operational"),
        ("openai_base_url", "operational"),
        ("num_workers", "operational"),
        ("harbor_jobs_dir", "operational"),
        ("api_key", "operational"),
        ("model", "semantic"),
        ("max_turns", "semantic"),
        ("max_steps", "semantic"),
        ("judge_model_server", "semantic"),
        ("judge_responses_create_params", "semantic"),
        ("should_use_judge", "semantic"),
        ("chat_template_kwargs", "semantic"),
        ("uses_reasoning_parser", "semantic"),
        ("abstention_token", "semantic"),
        ("max_output_tokens", "semantic"),
        ("datasets", "semantic"),
    ],
)
def test_id_21_real_settings_classify_as_the_reference_says(
    setting: str, expected: str
) -> None:
    """ID-21: the classes of nemo_gym_formats.md section 5.2, on keys of real files."""
    seen = [
        key
        for key in _all_identity_keys()
        if key.startswith("servers.") and key.rsplit(".", 1)[-1] == setting
    ]
    assert seen, setting
    assert {classify_key(key) for key in seen} == {expected}


# --- ID-1, ID-3, ID-8: config_identity on every file ----------------------------------


def _agents(config: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = server_blocks(config)
    return [
        {"agent_ref": {"type": "responses_api_agents", "name": name}}
        for name, kinds in blocks.items()
        if "responses_api_agents" in kinds
    ]


@cache
def identity_or_error(path: Path, *, overlay: bool) -> dict[str, Any] | ConfigError:
    """The identity of a file (rows naming its agents), or its ConfigError."""
    config = with_overlay(path) if overlay else load(path)
    try:
        return config_identity({}, config, _agents(plain_of(config)))
    except ConfigError as exc:
        return exc


def outcome(path: Path, *, overlay: bool) -> str:
    """``ok``, or the documented kind of ConfigError; anything else propagates."""
    got = identity_or_error(path, overlay=overlay)
    config = with_overlay(path) if overlay else load(path)
    if isinstance(got, ConfigError):
        kinds = [kind for kind, text in DOCUMENTED.items() if text in str(got)]
        assert got.key, str(got)
        assert len(kinds) == 1, str(got)
        return kinds[0]
    assert set(got) == {"scheme", "collection", "servers"}
    assert set(got["servers"]) <= set(server_blocks(plain_of(config)))
    assert all(set(kinds) <= SERVER_KINDS for kinds in got["servers"].values())
    assert len(identity_digest(got)) == 64
    return "ok"


def plain_of(config: Any) -> dict[str, Any]:
    """A DictConfig as a plain mapping, unresolved."""
    value = OmegaConf.to_container(config, resolve=False, throw_on_missing=False)
    assert isinstance(value, dict)
    return {str(key): item for key, item in value.items()}


@cache
def with_overlay(path: Path) -> DictConfig:
    """The file merged over an env.yaml-style overlay (the file wins)."""
    merged = OmegaConf.merge(OmegaConf.create(OVERLAY), load(path))
    assert isinstance(merged, DictConfig)
    return merged


@pytest.mark.parametrize("path", config_files(), ids=_id)
def test_id_1_every_real_configuration_has_an_identity_or_a_documented_error(
    path: Path,
) -> None:
    """ID-1/ID-3/ID-8: an identity, or a ConfigError naming what is missing."""
    outcome(path, overlay=False)
    outcome(path, overlay=True)


def test_id_1_real_configuration_outcomes_are_pinned() -> None:
    """ID-1: how many files get an identity, and why the others do not."""
    files = config_files()
    as_written = Counter(outcome(path, overlay=False) for path in files)
    overlaid = Counter(outcome(path, overlay=True) for path in files)
    assert len(files) == 438
    assert as_written == {
        "ok": 60,
        "missing server": 198,
        "unexpanded directive": 111,
        "unresolvable interpolation": 41,
        "missing value": 28,
    }
    assert overlaid == {
        "ok": 253,
        "missing server": 23,
        "unexpanded directive": 111,
        "unresolvable interpolation": 19,
        "missing value": 32,
    }


def test_id_5_real_connection_references_stay_references() -> None:
    """ID-5: with the overlay, ${policy_base_url} never resolves to its address."""
    checked = 0
    for path in config_files():
        identity = identity_or_error(path, overlay=True)
        if isinstance(identity, ConfigError):
            continue
        text = json.dumps(identity)
        assert OVERLAY["policy_base_url"] not in text, _id(path)
        assert "sk-overlay" not in text, _id(path)
        checked += 1
    assert checked  # some identities were computed and checked
