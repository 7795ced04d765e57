"""Credential redaction (identity.md, ID-10..ID-15; quality.md R-6)."""

from __future__ import annotations

import copy
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st
from omegaconf import OmegaConf

from ledger import (
    Clock,
    ConfigError,
    LedgerError,
    RunManifest,
    config_identity,
    credential_safe,
    diff_keys,
    drift,
    identity_digest,
    redact_secrets,
)
from tests.internals import credential_named, redact_text
from tests.test_identity import changed, nemo_configuration

R = "<redacted>"
AGENT = "claude_agent.responses_api_agents.claude_code_agent"

# --- ID-10: the marker, before any resolving ------------------------------------------


def test_id_10_credentials_become_the_fixed_marker() -> None:
    """ID-10: every credential is replaced by "<redacted>"; the rest is untouched."""
    value = {"api_key": "sk-abc", "model": "gpt", "nested": {"password": 123}}
    assert credential_safe(value) == {
        "api_key": R,
        "model": "gpt",
        "nested": {"password": R},
    }


def test_id_10_omegaconf_input_is_redacted_without_resolving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ID-10: a credential-named ${oc.env:...} never reads the environment."""
    monkeypatch.setenv("HF_TOKEN", "hf_planted_secret_0042")
    hydra = OmegaConf.create({"token_header": "Bearer ${oc.env:HF_TOKEN}", "n": 1})
    assert credential_safe(hydra) == {"token_header": f"Bearer {R}", "n": 1}


def test_id_10_identity_never_reads_a_credential_variable_that_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ID-10: HF_TOKEN is set, yet the identity holds only the marker."""
    monkeypatch.setenv("HF_TOKEN", "hf_planted_secret_0042")
    config, global_config, _ = nemo_configuration()
    rows = [{"agent_ref": {"name": "claude_agent"}}]
    with mock.patch.dict(os.environ, {"HF_TOKEN": "hf_planted_secret_0042"}):
        identity = config_identity(config, global_config, rows)
    text = json.dumps(identity)
    assert "hf_planted_secret_0042" not in text
    agent = identity["servers"]["claude_agent"]["responses_api_agents"]
    assert agent["claude_code_agent"]["env"] == [{"name": "HF_TOKEN", "value": R}]


def test_id_10_unset_credential_variable_needs_no_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ID-10: redacted first, so an unset ${oc.env:JUDGE_API_KEY} is no error."""
    monkeypatch.delenv("JUDGE_API_KEY", raising=False)
    config, global_config, rows = nemo_configuration()
    dotted = "judge_model.responses_api_models.openai_model.openai_api_key"
    global_config = changed(global_config, dotted, "${oc.env:JUDGE_API_KEY}")
    identity = config_identity(config, global_config, rows)
    judge = identity["servers"]["judge_model"]["responses_api_models"]["openai_model"]
    assert judge["openai_api_key"] == R


# --- ID-11: credential-named keys -----------------------------------------------------

README_19 = [
    "Authorization",
    "HF_TOKEN",
    "POLICY_API_KEY",
    "anthropic_api_key",
    "apiKey",
    "api_key",
    "api_key_name",
    "bearer_token",
    "brave_api_key",
    "client_password",
    "gateway_token",
    "judge_api_key",
    "model_api_key",
    "nv_inference_api_key",
    "openai_api_key",
    "policy_api_key",
    "pricing_data_api_key",
    "sec_api_key",
    "tavily_api_key",
]


@pytest.mark.parametrize(
    ("key", "named"),
    [
        # the 19 credential-named keys of the real configurations
        *((key, True) for key in README_19),
        # more credential spellings
        ("hf_token", True),
        ("HFToken", True),
        ("token", True),
        ("X-Api-Key", True),
        ("Proxy-Authorization", True),
        ("proxy_authorization", True),
        ("secrets", True),
        ("client_secret", True),
        ("private_key", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("aws_access_key_id", True),
        ("session_cookie", True),
        ("Set-Cookie", True),
        ("db_passwd", True),
        ("gcp_credentials", True),
        ("id_token", True),
        # token counts, vocabulary tokens and rates are not credentials
        ("eos_token", False),
        ("bos_token", False),
        ("pad_token", False),
        ("think_end_token", False),
        ("abstention_token", False),
        ("input_cost_per_token", False),
        ("max_token", False),
        ("max_new_tokens", False),
        ("max_output_tokens", False),
        ("max_completion_tokens", False),
        ("num_speculative_tokens", False),
        ("context_reset_tokens", False),
        ("eos_token_id", False),
        ("tokenizer", False),
        ("key_metrics", False),
        ("key_prefix", False),
        ("keyword", False),
        ("token_id_capture", False),
        ("return_token_id_information", False),
    ],
)
def test_id_11_credential_named_keys(key: str, named: bool) -> None:
    """ID-11: words split on _ - . and case, concatenated and matched."""
    assert credential_named(key) is named


# --- ID-12: credential forms ----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # a whole subtree below a credential-named key
        ({"api_key": {"primary": "a", "backup": ["b"]}}, {"api_key": R}),
        ({"judge_api_key": None}, {"judge_api_key": R}),
        # every value of a secrets mapping
        ({"secrets": {"db": "x", "n": 3}}, {"secrets": R}),
        # Authorization / Proxy-Authorization headers, any case
        (
            {"headers": {"authorization": "token abc"}},
            {"headers": {"authorization": R}},
        ),
        ({"headers": {"AUTHORIZATION": "abc"}}, {"headers": {"AUTHORIZATION": R}}),
        (
            {"h": {"Proxy-Authorization": "Basic eA=="}},
            {"h": {"Proxy-Authorization": R}},
        ),
        # {name: X, value: ...} entries of environment-variable lists
        (
            {
                "env": [
                    {"name": "HF_TOKEN", "value": "hf_x"},
                    {"name": "LANG", "value": "C"},
                ]
            },
            {"env": [{"name": "HF_TOKEN", "value": R}, {"name": "LANG", "value": "C"}]},
        ),
        (
            {"env": [{"key": "OPENAI_API_KEY", "value": "sk"}]},
            {"env": [{"key": "OPENAI_API_KEY", "value": R}]},
        ),
        # X=... inside strings, up to whitespace & ; , or a quote
        ("--env HF_TOKEN=abc --rm", f"--env HF_TOKEN={R} --rm"),
        ("https://h/search?api_key=abc&b=1", f"https://h/search?api_key={R}&b=1"),
        ("PASSWORD=abc;USER=bob", f"PASSWORD={R};USER=bob"),
        ("export GATEWAY_TOKEN='abc def'", f"export GATEWAY_TOKEN='{R}'"),
        ("eos_token=</s> max_tokens=5", "eos_token=</s> max_tokens=5"),
        # name: value in a string (header lines, JSON fragments)
        ('{"api_key": "abc def"}', f'{{"api_key": "{R}"}}'),
        ("X-Api-Key: abc", f"X-Api-Key: {R}"),
        # command-line flags
        ("--api-key abc --model m", f"--api-key {R} --model m"),
        (["--api-key", "abc", "--model", "m"], ["--api-key", R, "--model", "m"]),
        # Bearer / Basic credentials anywhere in a string
        ("Bearer abc.def.ghi", f"Bearer {R}"),
        ("curl -H 'Authorization: Bearer abc' x", f"curl -H 'Authorization: {R}' x"),
        ("hdr=bearer abc", f"hdr=bearer {R}"),
        ("Basic dXNlcjpwYXNz", f"Basic {R}"),
        # URL passwords
        ("https://user:pw@host/x", f"https://user:{R}@host/x"),
        ("postgres://admin:p@ss:w@db:5432/runs", f"postgres://admin:{R}@db:5432/runs"),
        ("https://host:8443/v1", "https://host:8443/v1"),
        # credential-named interpolations, as a whole
        ("${oc.env:HF_TOKEN}", R),
        ("${policy_api_key}", R),
        ("${oc.select:tavily_api_key,${oc.env:TAVILY_API_KEY,null}}", R),
        ("${oc.select:judge_model_name,${oc.env:JUDGE_API_KEY}}", R),
        ("Bearer ${oc.env:NGC_TOKEN}", f"Bearer {R}"),
        ("HF_TOKEN=${oc.env:SOME_VALUE}", f"HF_TOKEN={R}"),
        ("https://u:${oc.env:DB_PW}@h/", f"https://u:{R}@h/"),
        ("${policy_model_name}", "${policy_model_name}"),
        ("\\${oc.env:HF_TOKEN}", "\\${oc.env:HF_TOKEN}"),
        # more argument and header spellings
        ("serve --token abc --port 9", f"serve --token {R} --port 9"),
        ("serve --password=abc", f"serve --password={R}"),
        (["--hf-token", "abc"], ["--hf-token", R]),
        ("Authorization: basic dXNlcjpwYXNz", f"Authorization: {R}"),
        ("authorization: token abc", f"authorization: {R}"),
        # a URL with a driver, and a password used as a mapping key
        ("postgresql+psycopg://u:pw@db/x", f"postgresql+psycopg://u:{R}@db/x"),
        (
            {"mirrors": {"https://u:pw@hub/x": 1}},
            {"mirrors": {f"https://u:{R}@hub/x": 1}},
        ),
        # provider token formats, wherever they stand
        ("use sk-proj-AbCdEf0123456789xyz", f"use {R}"),
        ({"note": "hf_AbCdEfGhIjKlMnOpQrStUv"}, {"note": R}),
        # interpolations stay whole; what they resolve to is redacted later
        ("${oc.env:DB,'postgres://u:pw@h/x'}", "${oc.env:DB,'postgres://u:pw@h/x'}"),
        # a value below a credential-named key, repeated elsewhere (a YAML alias)
        (
            {"api_key": "S3cAliasedValue9", "launch": "S3cAliasedValue9", "n": "x"},
            {"api_key": R, "launch": R, "n": "x"},
        ),
        (
            {"api_key_name": "OPENAI_API_KEY", "doc": "set OPENAI_API_KEY"},
            {"api_key_name": R, "doc": "set OPENAI_API_KEY"},
        ),
        # a placeholder is no value to search for; a key keeps its name
        (
            {"client_password": "password", "doc": "the password field"},
            {"client_password": R, "doc": "the password field"},
        ),
        (
            {
                "api_key": "S3cKnownValue7",
                "S3cKnownValue7_dir": "x",
                "v": "aS3cKnownValue7",
            },
            {"api_key": R, "S3cKnownValue7_dir": "x", "v": "aS3cKnownValue7"},
        ),
    ],
)
def test_id_12_every_credential_form_is_redacted(value: Any, expected: Any) -> None:
    """ID-12: the credential forms, with the rest of the value kept."""
    assert credential_safe(value) == expected


def test_id_12_escaped_credential_interpolation_is_never_resolved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ID-12: an escaped \\${oc.env:HF_TOKEN} is literal text, never a read."""
    monkeypatch.setenv("HF_TOKEN", "hf_planted_secret_0043")
    config, global_config, rows = nemo_configuration()
    config["note"] = "\\${oc.env:HF_TOKEN}"
    identity = config_identity(config, global_config, rows)
    assert identity["collection"]["note"] == "${oc.env:HF_TOKEN}"


@pytest.mark.parametrize(
    "text",
    [
        "${oc.env:HF_TOKEN}",
        "x ${oc.select:a,'${oc.env:HF_TOKEN}'} y",
        "${oc.select:a,${oc.select:b,${oc.env:HF_TOKEN}}}",
        "{${oc.env:HF_TOKEN}}",
        "\\\\${oc.env:HF_TOKEN}",
        "${oc.env:HF_TOKEN}${oc.env:HF_TOKEN}",
        "a}${oc.env:'HF_TOKEN'}",
    ],
)
def test_id_12_redacted_text_never_resolves_to_the_credential(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ID-12: whatever OmegaConf makes of the redacted text, it is no credential."""
    monkeypatch.setenv("HF_TOKEN", "hf_planted_secret_0044")
    try:
        node = OmegaConf.create({"a": "x", "b": "y", "v": redact_text(text)})
        resolved = str(node.v)
    except Exception:  # any parse or resolution failure reads nothing
        resolved = ""
    assert "hf_planted_secret_0044" not in resolved


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("postgresql+psycopg://user:pw@db/x", f"postgresql+psycopg://user:{R}@db/x"),
        ("serve --api-key S3cK --port 1", f"serve --api-key {R} --port 1"),
        ("serve --api-key=S3cK", f"serve --api-key={R}"),
        ("serve --token S3cK", f"serve --token {R}"),
        ("serve --password=S3cK", f"serve --password={R}"),
        ("HF_TOKEN=S3cK rest", f"HF_TOKEN={R} rest"),
        ("Authorization: basic dXNlcjpwYXNz", f"Authorization: {R}"),
        ("upstream said: Bearer abc.def", f"upstream said: Bearer {R}"),
        ("key sk-proj-AbCdEf0123456789xyz", f"key {R}"),
        ("sk-ant-api03-AbCdEf0123456789", R),
        ("hf_AbCdEfGhIjKlMnOpQrStUv", R),
        ("ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", R),
        ("github_pat_11ABCDEFG0123456789_abcdefghij", R),
        ("glpat-AbCdEfGhIjKlMnOpQrSt", R),
        ("xoxb-123456789012-abcdefABCDEF", R),
        ("id AKIAIOSFODNN7EXAMPLE", f"id {R}"),
        ("AIzaSyA-0123456789abcdefghijklmnopqrstu", R),
        ("nvapi-AbCdEfGhIjKlMnOpQrStUv", R),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJl", f"jwt {R}"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", R),
        # inside an interpolation's text too (a message quoting a configuration)
        (
            "${oc.env:X,'postgres://u:pw@h/db'}",
            f"${{oc.env:X,'postgres://u:{R}@h/db'}}",
        ),
        # what is no credential stays
        ("http://host:8443/v1", "http://host:8443/v1"),
        ("eos_token=</s> max_tokens=5", "eos_token=</s> max_tokens=5"),
        ("task-0123456789abcdefghij", "task-0123456789abcdefghij"),
        ("sha256 " + "ab" * 32, "sha256 " + "ab" * 32),
        ("timeout", "timeout"),
    ],
)
def test_id_12_redact_secrets_finds_credential_shaped_values_in_any_text(
    text: str, expected: str
) -> None:
    """ID-12/ID-13: the one redaction of text (messages, row strings, values)."""
    assert redact_secrets(text) == expected


def _alnum(secret: str) -> str:
    """A secret in the alphabet and at the length of provider tokens."""
    return "".join(c if c.isalnum() else "x" for c in secret).ljust(34, "0")


#: (name, setting, globals, environment), each planting ``{s}`` where a value
#: resolved from an interpolation of an innocent name holds a credential (ID-12).
VALUE_FORMS: list[tuple[str, str, dict[str, str], dict[str, str]]] = [
    ("env url password", "${oc.env:RL_DB}", {}, {"RL_DB": "postgresql://u:{s}@db/x"}),
    ("env driver url", "${oc.env:RL_DB}", {}, {"RL_DB": "mysql+pymysql://u:{s}@db/x"}),
    ("env --api-key", "${oc.env:RL_ARGS}", {}, {"RL_ARGS": "serve --api-key {s} -v"}),
    ("env --api-key=", "${oc.env:RL_ARGS}", {}, {"RL_ARGS": "serve --api-key={s}"}),
    ("env bearer", "${oc.env:RL_HDR}", {}, {"RL_HDR": "Bearer {s}"}),
    ("env assignment", "${oc.env:RL_ENV}", {}, {"RL_ENV": "--env HF_TOKEN={s} -d"}),
    ("env token format", "${oc.env:RL_TOK}", {}, {"RL_TOK": "sk-{a}"}),
    ("default url", "${oc.env:RL_UNSET_9,'postgresql://u:{s}@db/x'}", {}, {}),
    ("default bearer", "${oc.env:RL_UNSET_9,'Bearer {s}'}", {}, {}),
    ("default token", "${oc.env:RL_UNSET_9,hf_{a}}", {}, {}),
    ("select", "${oc.select:plant_store}", {"plant_store": "https://u:{s}@h/x"}, {}),
    ("select default", "${oc.select:no_such,'Bearer {s}'}", {}, {}),
    ("decode", "${oc.decode:'Bearer {s}'}", {}, {}),
    ("create", "${oc.create:'{hdr: \"Bearer {s}\"}'}", {}, {}),
    ("basic", "Authorization: basic {s}", {}, {}),
    ("reference", "${plant_args}", {"plant_args": "--password {s}"}, {}),
]


def _with_value_form(
    form: tuple[str, str, dict[str, str], dict[str, str]], secret: str
) -> tuple[Any, Any, dict[str, str]]:
    _, setting, globals_, env = form

    def filled(text: str) -> str:
        return text.replace("{s}", secret).replace("{a}", _alnum(secret))

    config, global_config, _ = nemo_configuration()
    agent = global_config["math_agent"]["responses_api_agents"]["simple_agent"]
    agent["plant"] = filled(setting)
    global_config.update({key: filled(value) for key, value in globals_.items()})
    return config, global_config, {key: filled(value) for key, value in env.items()}


@pytest.mark.parametrize("form", VALUE_FORMS, ids=[form[0] for form in VALUE_FORMS])
def test_id_12_a_value_resolved_from_an_interpolation_is_redacted_and_never_drifts(
    form: tuple[str, str, dict[str, str], dict[str, str]],
) -> None:
    """ID-12/ID-13/ID-15 (R-6): what ``${oc.env:...}`` of an innocent name, a
    default, ``oc.select``, ``oc.decode`` or ``oc.create`` resolves to is
    redacted by its value; rotating it changes neither identity nor digest."""
    rows = [{"agent_ref": {"name": "math_agent"}}]
    identities = []
    for secret in ("S3cFirstSecret0001", "S3cOtherSecret0002"):
        config, global_config, env = _with_value_form(form, secret)
        with mock.patch.dict(os.environ, env):
            identity = config_identity(config, global_config, rows)
        agent = identity["servers"]["math_agent"]["responses_api_agents"]
        text = json.dumps(identity)
        assert secret not in text
        assert _alnum(secret) not in text
        assert R in json.dumps(agent["simple_agent"]["plant"])  # it was resolved
        identities.append(identity)
    assert diff_keys(*identities) == []
    assert identity_digest(identities[0]) == identity_digest(identities[1])


def test_id_12_a_yaml_alias_of_an_api_key_is_redacted_under_its_other_key(
    tmp_path: Path,
) -> None:
    """ID-12 (R-6): an anchor/alias repeats an ``api_key`` under an innocent key."""
    identities = []
    for secret in ("S3cAnchoredKey0001", "S3cAnchoredKey0002"):
        path = tmp_path / "servers.yaml"
        path.write_text(
            "agent:\n"
            "  responses_api_agents:\n"
            "    simple_agent:\n"
            "      entrypoint: app.py\n"
            f"      api_key: &key {secret}\n"
            "      launch_args: [--model, m, *key]\n"
            "      note: *key\n",
            encoding="utf-8",
        )
        identity = config_identity({}, OmegaConf.load(path), [])
        agent = identity["servers"]["agent"]["responses_api_agents"]["simple_agent"]
        assert secret not in json.dumps(identity)
        assert agent["note"] == R
        assert agent["launch_args"] == ["--model", "m", R]
        identities.append(identity)
    assert identity_digest(identities[0]) == identity_digest(identities[1])


def test_id_12_a_url_with_a_password_as_a_mapping_key_keeps_its_shape() -> None:
    """ID-12 (R-6): the key is redacted like a value, and rotating it is no drift."""
    identities = []
    for secret in ("S3cKeyPw00001x", "S3cKeyPw00002x"):
        config, global_config, _ = nemo_configuration()
        agent = global_config["math_agent"]["responses_api_agents"]["simple_agent"]
        agent["mirrors"] = {f"https://u:{secret}@hub.example/x": "primary"}
        identity = config_identity(config, global_config, [])
        assert secret not in json.dumps(identity)
        settings = identity["servers"]["math_agent"]["responses_api_agents"]
        assert settings["simple_agent"]["mirrors"] == {
            f"https://u:{R}@hub.example/x": "primary"
        }
        identities.append(identity)
    assert identity_digest(identities[0]) == identity_digest(identities[1])


def test_id_13_an_unresolvable_interpolation_s_message_holds_no_default_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ID-13: a refusal quoting an interpolation redacts what its text holds."""
    monkeypatch.delenv("RL_UNSET_9", raising=False)
    config, global_config, _ = nemo_configuration()
    agent = global_config["math_agent"]["responses_api_agents"]["simple_agent"]
    agent["plant"] = "${oc.decode:'Bearer S3cInMessage0001'} ${no_such_key}"
    with pytest.raises(ConfigError) as info:
        config_identity(config, global_config, [{"agent_ref": {"name": "math_agent"}}])
    assert "S3cInMessage0001" not in str(info.value)
    assert "plant" in str(info.value)


# --- ID-13: no byte of a credential anywhere (R-6) ------------------------------------

_SECRET = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.",
    min_size=14,
    max_size=24,
).map(lambda text: f"S3c{text}")
_CREDENTIAL_KEYS = st.sampled_from(
    [
        "api_key",
        "openai_api_key",
        "HF_TOKEN",
        "hfToken",
        "client_password",
        "gateway_token",
        "bearer_token",
        "AWS_SECRET_ACCESS_KEY",
        "session_cookie",
        "credentials",
    ]
)
_AUTH_HEADERS = st.sampled_from(
    ["Authorization", "authorization", "AUTHORIZATION", "Proxy-Authorization"]
)
FORMS = 26


def _plant(
    global_config: dict[str, Any],
    config: dict[str, Any],
    s: list[str],
    key: str,
    header: str,
) -> dict[str, str]:
    """Plant secrets s[0..] in every form of ID-12; return the environment to set.

    s[12..] are values, not names: resolved from interpolations of innocent
    names, defaults, ``oc.select``/``oc.decode``/``oc.create``, a basic
    authorization, a YAML alias of the ``api_key``, a URL key, token formats.
    """
    agent = global_config["claude_agent"]["responses_api_agents"]["claude_code_agent"]
    agent[key] = s[0]
    agent["secrets"] = {"db": s[1]}
    agent["artifact_request_headers"] = {header: f"token {s[2]}"}
    agent["env"] = [{"name": "HF_TOKEN", "value": s[3]}]
    agent["docker_args"] = ["--env", f"HF_TOKEN={s[4]}", "--api-key", s[5]]
    agent["search_url"] = f"https://search.example/q?api_key={s[6]}&n=5"
    agent["launch"] = f"curl -H 'X-Trace: 1' -H 'X-Upstream: Bearer {s[7]}' $URL"
    agent["mirror"] = f"https://mirror:{s[8]}@hub.example/models"
    agent["hf_header"] = "Basic ${oc.env:HF_TOKEN}"
    agent["judge_key_ref"] = "${policy_api_key}"
    agent["search_key_ref"] = "${oc.select:tavily_api_key,unset}"
    global_config["policy_api_key"] = s[10]
    global_config["tavily_api_key"] = s[11]
    config["responses_create_params"]["extra_headers"] = {
        "Authorization": s[2],
        "X-Forward": f"Basic {s[1]}",
    }
    agent["db"] = "${oc.env:RL_DB}"
    agent["serve"] = "${oc.env:RL_ARGS}"
    agent["upstream"] = "${oc.env:RL_HDR}"
    agent["container_env"] = "${oc.env:RL_ASSIGN}"
    agent["fallback"] = f"${{oc.env:RL_UNSET_0,'postgresql://u:{s[16]}@db/x'}}"
    global_config["plant_store"] = f"https://u:{s[17]}@store.example/x"
    agent["store"] = "${oc.select:plant_store}"
    agent["decoded"] = f"${{oc.decode:'Bearer {s[18]}'}}"
    agent["created"] = f"${{oc.create:'{{hdr: \"Bearer {s[19]}\"}}'}}"
    agent["basic"] = f"Authorization: basic {s[20]}"
    agent["alias"] = s[0]  # what a YAML alias of the api_key loads as
    agent["mirrors"] = {f"https://u:{s[21]}@hub.example/x": "primary"}
    agent["provider"] = f"key sk-{_alnum(s[22])} in use"
    agent["serve_eq"] = f"serve --api-key={s[23]}"
    agent["token_flag"] = ["serve", "--token", s[24]]
    agent["pg"] = "${oc.env:RL_PG}"
    return {
        "HF_TOKEN": s[9],
        "JUDGE_API_KEY": s[10],
        "RL_DB": f"postgresql://u:{s[12]}@db:5432/x",
        "RL_ARGS": f"serve --api-key {s[13]} --port 9",
        "RL_HDR": f"Bearer {s[14]}",
        "RL_ASSIGN": f"--env GATEWAY_TOKEN={s[15]} -d",
        "RL_PG": f"postgresql+psycopg://u:{s[25]}@db/x",
    }


def _broken_variants(
    config: Any, global_config: Any
) -> Iterator[tuple[Any, Any, bool]]:
    """Configurations next to the secrets that fail in each documented way.

    Each with the mode (credential-safe or unredacted) its failure is about.
    """
    agent = "claude_agent.responses_api_agents.claude_code_agent"
    yield (
        config,
        changed(global_config, f"{agent}.resources_server.name", "ghost"),
        True,
    )
    for safe in (True, False):
        yield config, changed(global_config, f"{agent}.model", "${no_such_key}"), safe
    yield config, changed(global_config, f"{agent}.model", "???"), False
    yield changed(config, "limit", object()), global_config, True
    yield (
        config,
        changed(global_config, f"{agent}.api_key", "${oc.env:NEVER_SET}"),
        False,
    )


def _raised(config: Any, global_config: Any, rows: Any, *, safe: bool) -> list[str]:
    try:
        config_identity(config, global_config, rows, credential_safe=safe)
    except LedgerError as exc:
        return [str(exc), repr(exc), repr(exc.args), repr(vars(exc))]
    return []


@pytest.mark.slow
@given(
    secrets=st.lists(_SECRET, min_size=FORMS, max_size=FORMS, unique=True),
    rotated=st.lists(_SECRET, min_size=FORMS, max_size=FORMS, unique=True),
    key=_CREDENTIAL_KEYS,
    header=_AUTH_HEADERS,
)
def test_id_13_no_byte_of_a_planted_secret_is_ever_written_or_shown(
    secrets: list[str], rotated: list[str], key: str, header: str
) -> None:
    """ID-13/ID-15 (R-6): identity, manifest, files, diffs, errors, logs hold none."""
    planted = set(secrets) | set(rotated) | {_alnum(x) for x in (*secrets, *rotated)}
    config, global_config, _ = nemo_configuration()
    rows = [{"agent_ref": {"name": "claude_agent"}}]
    env = _plant(global_config, config, secrets, key, header)
    config2, global2 = copy.deepcopy(nemo_configuration()[:2])
    env2 = _plant(global2, config2, rotated, key, header)
    shown: list[str] = []
    handler = _Collect()
    logging.getLogger("ledger").addHandler(handler)
    try:
        with mock.patch.dict(os.environ, env), tempfile.TemporaryDirectory() as folder:
            identity = config_identity(config, global_config, rows)
            manifest = RunManifest.create(
                None,
                rows,
                config,
                global_config,
                clock=Clock(seed=1),
                max_rollout_attempts=3,
            )
            manifest.matches_config("f" * 64)
            manifest.write(Path(folder) / "manifest.json")
            RunManifest.read(Path(folder) / "manifest.json")
            shown += [p.read_text() for p in Path(folder).iterdir()]
            for broken_config, broken_global, safe in _broken_variants(
                config, global_config
            ):
                shown += _raised(broken_config, broken_global, rows, safe=safe)
        with mock.patch.dict(os.environ, env2):
            identity2 = config_identity(config2, global2, rows)
        keys = diff_keys(identity, identity2)
        shown += [
            json.dumps(identity),
            json.dumps(identity2),
            repr(manifest),
            str(keys),
        ]
        shown += [repr(drift(identity, identity2)), json.dumps(manifest.to_body())]
    finally:
        logging.getLogger("ledger").removeHandler(handler)
    shown += handler.messages
    leaked = [s for s in planted for text in shown if s in text]
    assert leaked == []
    # ID-15: rotating every credential changes neither the identity nor the digest.
    assert keys == []
    assert identity_digest(identity) == identity_digest(identity2)


class _Collect(logging.Handler):
    """Every message logged while it is attached."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


# --- ID-14: the unredacted form, in memory only ---------------------------------------


def test_id_14_unredacted_form_resolves_credentials_in_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ID-14: credential_safe=False resolves as an earlier collector did."""
    monkeypatch.setenv("HF_TOKEN", "hf_planted_secret_0045")
    config, global_config, _ = nemo_configuration()
    rows = [{"agent_ref": {"name": "claude_agent"}}]
    raw = config_identity(config, global_config, rows, credential_safe=False)
    agent = raw["servers"]["claude_agent"]["responses_api_agents"]["claude_code_agent"]
    assert agent["env"] == [{"name": "HF_TOKEN", "value": "hf_planted_secret_0045"}]
    assert agent["anthropic_api_key"] == "sk-policy-000111222"


def test_id_14_unredacted_failure_message_holds_no_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ID-14: an unredacted form's error names the key only."""
    monkeypatch.setenv("HF_TOKEN", "hf_planted_secret_0046")
    config, global_config, _ = nemo_configuration()
    rows = [{"agent_ref": {"name": "claude_agent"}}]
    dotted = f"{AGENT}.model"
    broken = changed(global_config, dotted, "${oc.env:HF_TOKEN}-${oc.env:UNSET_X_1}")
    with pytest.raises(ConfigError) as info:
        config_identity(config, broken, rows, credential_safe=False)
    assert info.value.key == dotted
    assert "hf_planted_secret_0046" not in str(info.value)
    assert "UNSET_X_1" not in str(info.value)


# --- ID-15: rotating a credential changes nothing -------------------------------------


@pytest.mark.parametrize(
    ("where", "dotted", "value"),
    [
        ("global", "policy_api_key", "sk-rotated-999"),
        ("global", f"{AGENT}.artifact_request_headers.Authorization", "Bearer rotated"),
        ("global", f"{AGENT}.docker_args", ["--env", "HF_TOKEN=hf_rotated"]),
        ("global", f"{AGENT}.api_key_name", "OTHER_API_KEY"),
        ("env", "HF_TOKEN", "hf_rotated_value"),
        ("env", "JUDGE_API_KEY", "nvapi-rotated"),
    ],
)
def test_id_15_rotating_a_credential_changes_neither_identity_nor_digest(
    where: str, dotted: str, value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ID-15: credentials are operational by construction."""
    config, global_config, _ = nemo_configuration()
    rows = [
        {"agent_ref": {"name": "claude_agent"}},
        {"agent_ref": {"name": "math_agent"}},
    ]
    monkeypatch.setenv("HF_TOKEN", "hf_original")
    monkeypatch.setenv("JUDGE_API_KEY", "nvapi-original")
    before = config_identity(config, global_config, rows)
    if where == "env":
        monkeypatch.setenv(dotted, value)
    else:
        global_config = changed(global_config, dotted, value)
    after = config_identity(config, global_config, rows)
    assert diff_keys(before, after) == []
    assert identity_digest(before) == identity_digest(after)


_FRAGMENTS = st.sampled_from(
    [
        "${oc.env:HF_TOKEN}",
        "${oc.env:HF_TOKEN,",
        "${oc.select:a,",
        "${oc.env:",
        "HF_TOKEN",
        "${b}",
        "${",
        "$",
        "{",
        "}",
        "'",
        '"',
        "\\",
        ",",
        ":",
        " ",
        "a",
        "Bearer ",
        "api_key=",
    ]
)


@given(parts=st.lists(_FRAGMENTS, max_size=12))
def test_id_12_no_text_shape_resolves_to_a_credential(parts: list[str]) -> None:
    """ID-12: for any text, what OmegaConf resolves from its redaction is safe."""
    text = "".join(parts)
    with mock.patch.dict(os.environ, {"HF_TOKEN": "hf_planted_secret_0047"}):
        try:
            node = OmegaConf.create({"a": "x", "b": "y", "v": redact_text(text)})
            resolved = str(node.v)
        except Exception:  # any parse or resolution failure reads nothing
            resolved = ""
    assert "hf_planted_secret_0047" not in resolved
