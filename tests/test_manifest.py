"""The run manifest (identity.md, ID-30..ID-37, ID-40) and the attempt cap (REC-10)."""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest
from pydantic import ValidationError

from ledger import (
    Clock,
    ConfigError,
    CorruptLedger,
    RunManifest,
    config_identity,
    identity_digest,
    max_rollout_attempts,
)
from ledger.events import RunCreated
from tests.internals import (
    added_at_default,
    encode_rows,
    identity_manifest,
    materialized_digest,
    registries,
    restored_null_defaults,
)
from tests.test_identity import changed, nemo_configuration

FIELDS = [
    "format",
    "schema_version",
    "run_id",
    "created_at",
    "source_path",
    "source_digest",
    "materialized_digest",
    "config_digest",
    "identity_scheme",
    "max_rollout_attempts",
    "selection_policy",
    "legacy_import",
    "identity_overridden",
]


def _create(**options: Any) -> RunManifest:
    config, global_config, rows = nemo_configuration()
    options.setdefault("clock", Clock(seed=3))
    options.setdefault("max_rollout_attempts", 3)
    return RunManifest.create(
        options.pop("source", None), rows, config, global_config, **options
    )


# --- ID-30: the fields ----------------------------------------------------------------


def test_id_30_manifest_has_exactly_the_spec_fields() -> None:
    """ID-30: the field list, in order, with its fixed values."""
    manifest = _create()
    body = manifest.to_body()
    assert list(body) == FIELDS
    assert body["format"] == "rollout-ledger/manifest"
    assert (body["schema_version"], body["identity_scheme"]) == (1, 1)
    assert body["selection_policy"] == "latest_allocated"
    assert (body["legacy_import"], body["identity_overridden"]) == (False, False)
    assert len(body["run_id"]) == 32
    assert uuid.UUID(hex=body["run_id"]).version == 4
    assert json.loads(json.dumps(body)) == body


def test_id_30_manifest_mirrors_the_run_created_event_body() -> None:
    """ID-30 (house style "one schema"): run_created carries the manifest fields."""
    event_fields = set(RunCreated.__struct_fields__) - {"identity", "policy", "index"}
    assert event_fields == set(FIELDS)
    body = _create().to_body()
    event = RunCreated(**body)
    assert {name: getattr(event, name) for name in FIELDS} == body


def test_id_30_manifest_is_frozen() -> None:
    """ID-30: frozen."""
    manifest = _create()
    with pytest.raises(ValidationError):
        manifest.run_id = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"surprise": 1}, "surprise"),
        ({"schema_version": 2}, "schema_version"),
        ({"selection_policy": "any_success"}, "selection_policy"),
        ({"config_digest": "abc"}, "config_digest"),
        ({"max_rollout_attempts": 0}, "max_rollout_attempts"),
        ({"max_rollout_attempts": "3"}, "max_rollout_attempts"),
        ({"format": "nemo-gym/manifest"}, "format"),
    ],
)
def test_id_30_unknown_fields_and_unsupported_values_are_refused(
    change: dict[str, Any], where: str
) -> None:
    """ID-30: unknown fields refused, and so are values of another version."""
    body = {**_create().to_body(), **change}
    with pytest.raises(ValidationError, match=where):
        RunManifest.model_validate(body)


# --- ID-31: create --------------------------------------------------------------------


def test_id_31_create_takes_ids_and_time_from_the_clock() -> None:
    """ID-31: run_id (uuid4 hex) and created_at come from the clock."""
    first, second = _create(clock=Clock(seed=9)), _create(clock=Clock(seed=9))
    assert first == second
    clock = Clock(seed=9)
    assert first.run_id == uuid.UUID(clock.new_id()).hex
    assert first.created_at == "2026-01-01T00:00:00.000000Z"


def test_id_31_digests_identity_and_config_digest() -> None:
    """ID-31: config_digest is the identity's digest; manifest.identity is it."""
    config, global_config, rows = nemo_configuration()
    manifest = _create()
    identity = config_identity(config, global_config, rows)
    assert manifest.identity == identity
    assert manifest.config_digest == identity_digest(identity)
    assert manifest.materialized_digest == hashlib.sha256(encode_rows(rows)).hexdigest()


def test_id_31_materialized_digest_is_over_the_bytes_create_writes() -> None:
    """ID-30/ID-31: one deterministic msgspec JSON object per line."""
    rows: list[dict[str, Any]] = [
        {"b": 1, "a": {"d": [1, 2], "c": None}},
        {"_ng_task_index": 0},
    ]
    expected = b'{"a":{"c":null,"d":[1,2]},"b":1}\n{"_ng_task_index":0}\n'
    assert materialized_digest(rows) == hashlib.sha256(expected).hexdigest()


@pytest.mark.parametrize(
    ("inside", "expected"), [(True, "data/aime24.jsonl"), (False, None)]
)
def test_id_31_source_digest_and_path(
    tmp_path: Path, inside: bool, expected: Any
) -> None:
    """ID-31: the source's bytes digested; its path relative to run_dir when inside."""
    source = tmp_path / "data" / "aime24.jsonl"
    source.parent.mkdir()
    source.write_bytes(b'{"question": "1+1"}\n')
    run_dir = tmp_path if inside else tmp_path / "elsewhere"
    manifest = _create(source=source, run_dir=run_dir)
    assert manifest.source_digest == hashlib.sha256(source.read_bytes()).hexdigest()
    assert manifest.source_path == (expected or str(source))


def test_id_31_no_source_is_unverified() -> None:
    """ID-31: source None gives "unverified" and a null path."""
    manifest = _create(source=None)
    assert (manifest.source_digest, manifest.source_path) == ("unverified", None)


def test_id_31_unreadable_source_is_a_config_error_naming_it(tmp_path: Path) -> None:
    """ID-31: a source that cannot be read names the file."""
    with pytest.raises(ConfigError, match=r"missing\.jsonl"):
        _create(source=tmp_path / "missing.jsonl")


@pytest.mark.parametrize(
    ("given", "environment", "expected"),
    [(None, "7", 7), (None, None, 3), (5, "7", 5)],
)
def test_id_31_cap_comes_from_the_environment_unless_given(
    given: int | None,
    environment: str | None,
    expected: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ID-31/REC-10: NEMO_GYM_MAX_ROLLOUT_ATTEMPTS unless max_rollout_attempts=."""
    if environment is None:
        monkeypatch.delenv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", raising=False)
    else:
        monkeypatch.setenv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", environment)
    assert _create(max_rollout_attempts=given).max_rollout_attempts == expected


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_id_31_invalid_cap_is_a_config_error(bad: Any) -> None:
    """ID-31: a given cap must be a positive integer."""
    with pytest.raises(ConfigError, match="max_rollout_attempts"):
        _create(max_rollout_attempts=bad)


def test_id_31_identity_errors_surface_from_create() -> None:
    """ID-31: create computes the identity, so its ConfigError reaches the caller."""
    config, global_config, rows = nemo_configuration()
    rows = [{"agent_ref": {"name": "ghost"}}]
    with pytest.raises(ConfigError, match="ghost"):
        RunManifest.create(None, rows, config, global_config, clock=Clock(seed=1))


# --- ID-32, ID-33: write and read -----------------------------------------------------


def test_id_32_write_publishes_manifest_and_identity_beside_it(tmp_path: Path) -> None:
    """ID-32: manifest.json and identity.json, canonical JSON, digest matching."""
    manifest = _create()
    target = tmp_path / "rollouts_ledger" / "manifest.json"
    manifest.write(target)
    assert json.loads(target.read_text()) == manifest.to_body()
    identity = json.loads((target.parent / "identity.json").read_text())
    assert identity == manifest.identity
    assert identity_digest(identity) == manifest.config_digest
    assert target.read_bytes().endswith(b"}\n")
    assert sorted(p.name for p in target.parent.iterdir()) == [
        "identity.json",
        "manifest.json",
    ]


def test_id_33_read_keeps_an_identity_whose_digest_matches(tmp_path: Path) -> None:
    """ID-33: the published identity counts beside its manifest."""
    manifest = _create()
    manifest.write(tmp_path / "manifest.json")
    read = RunManifest.read(tmp_path / "manifest.json")
    assert read == manifest
    assert read.identity == manifest.identity


def test_id_33_identity_of_another_digest_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """ID-33: otherwise ignored with a warning naming where it came from."""
    manifest = _create()
    manifest.write(tmp_path / "manifest.json")
    other = manifest.identity
    assert other is not None
    other["collection"]["num_repeats"] = 99
    (tmp_path / "identity.json").write_text(json.dumps(other))
    with caplog.at_level(logging.WARNING, logger="ledger"):
        read = RunManifest.read(tmp_path / "manifest.json")
    assert read.identity is None
    assert str(tmp_path / "identity.json") in caplog.text


def test_id_33_with_identity_checks_the_digest() -> None:
    """ID-33: identities carried by events count only with their own digest."""
    manifest = _create()
    identity = manifest.identity
    stripped = manifest.with_identity(None)
    assert stripped.identity is None
    assert stripped.with_identity(identity, where="run_created").identity == identity
    assert (
        stripped.with_identity({"scheme": 2}, where="drift_accepted").identity is None
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"{not json", "corrupt"), (b'{"schema_version": 9}', "schema_version")],
)
def test_id_33_corrupt_manifest_is_refused_naming_the_file(
    tmp_path: Path, content: bytes, message: str
) -> None:
    """REC-51: a corrupt or unsupported manifest is an error, never a guess."""
    (tmp_path / "manifest.json").write_bytes(content)
    with pytest.raises(CorruptLedger, match=message) as info:
        RunManifest.read(tmp_path / "manifest.json")
    assert info.value.path == str(tmp_path / "manifest.json")


# --- ID-34: import_legacy -------------------------------------------------------------


def test_id_34_import_legacy_without_foreign_ids() -> None:
    """ID-34: new id, unverified digests, legacy_import, cap from REC-10."""
    rows = nemo_configuration()[2]
    data = encode_rows(rows)
    manifest = RunManifest.import_legacy(
        rows, materialized_bytes=data, clock=Clock(seed=4), max_rollout_attempts=4
    )
    assert manifest.legacy_import is True
    assert manifest.config_digest == manifest.source_digest == "unverified"
    assert manifest.materialized_digest == hashlib.sha256(data).hexdigest()
    assert manifest.identity is None
    assert manifest.max_rollout_attempts == 4
    assert not manifest.matches_config("unverified")


def test_id_34_import_legacy_keeps_foreign_run_id_and_digest() -> None:
    """ID-34/REC-73: a foreign run_id and config_digest are kept."""
    foreign = "5f0c" + "0" * 28
    manifest = RunManifest.import_legacy(
        [], materialized_bytes=b"", run_id=foreign, config_digest="e" * 64
    )
    assert (manifest.run_id, manifest.config_digest) == (foreign, "e" * 64)
    assert manifest.matches_config("e" * 64)


def test_id_34_import_legacy_writes_no_identity(tmp_path: Path) -> None:
    """ID-32/ID-34: an imported run has no identity file."""
    RunManifest.import_legacy([], materialized_bytes=b"").write(tmp_path / "m.json")
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


# --- ID-35, ID-36, ID-37: matches_config ----------------------------------------------


def _digest_without(identity: dict[str, Any], *names: str) -> str:
    form = json.loads(json.dumps(identity))
    for name in names:
        form["collection"].pop(name, None)
    return identity_digest(form)


def test_id_37_current_digest_matches() -> None:
    """ID-37: the manifest's own config_digest."""
    manifest = _create()
    assert manifest.matches_config(manifest.config_digest)


@pytest.mark.parametrize(
    "form",
    [
        "without num_repeats_add_seed",
        "prompt_config restored at null",
        "skills restored at null",
        "all three restored at their defaults",
    ],
)
def test_id_35_earlier_collection_forms_match(form: str) -> None:
    """ID-35: before a setting existed, at its default, at the configured value."""
    manifest = _create()
    identity = manifest.identity
    assert identity is not None
    collection = identity["collection"]
    if form == "without num_repeats_add_seed":
        del collection["num_repeats_add_seed"]
    elif form == "prompt_config restored at null":
        collection["prompt_config"] = None
    elif form == "skills restored at null":
        collection["skills"] = None
    else:
        collection.update(num_repeats_add_seed=False, prompt_config=None, skills=None)
    assert manifest.matches_config(identity_digest(identity))


def test_id_35_other_values_of_an_added_setting_do_not_match() -> None:
    """ID-35: only absent, default and the configured value."""
    manifest = _create()
    identity = manifest.identity
    assert identity is not None
    identity["collection"]["num_repeats_add_seed"] = True
    assert not manifest.matches_config(identity_digest(identity))


def test_id_35_and_17_added_settings_registry_is_replaceable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ID-17/ID-35: a newly registered setting's absence is an earlier form."""
    monkeypatch.setattr(
        registries,
        "ADDED_COLLECTION_SETTINGS",
        {**registries.ADDED_COLLECTION_SETTINGS, "num_samples_in_parallel": None},
    )
    manifest = _create()
    identity = manifest.identity
    assert identity is not None
    assert manifest.matches_config(_digest_without(identity, "num_samples_in_parallel"))


def test_rec_53_added_setting_at_default_is_ignorable() -> None:
    """REC-53/ID-35: a key only the current side has, at its registered default."""
    manifest = _create()
    current = manifest.identity
    assert current is not None
    saved = json.loads(json.dumps(current))
    del saved["collection"]["num_repeats_add_seed"]
    assert added_at_default(saved, current) == {"collection.num_repeats_add_seed"}
    current["collection"]["num_repeats_add_seed"] = True
    assert added_at_default(saved, current) == frozenset()


def _two_vllm_servers() -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    config, global_config, rows = nemo_configuration()
    judge = global_config["judge_model"]["responses_api_models"]
    judge["vllm_model"] = {
        "model": "judge-70b",
        "base_url": "${policy_base_url}",
        "reasoning_parser": "deepseek_r1",
    }
    del judge["openai_model"]
    return config, global_config, rows


def test_id_36_removed_null_defaults_are_restored_per_concrete_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ID-36: added where absent, never over another server's value."""
    monkeypatch.setattr(
        registries,
        "REMOVED_NULL_DEFAULTS",
        {"responses_api_models.vllm_model": frozenset({"reasoning_parser"})},
    )
    config, global_config, rows = _two_vllm_servers()
    manifest = RunManifest.create(
        None, rows, config, global_config, clock=Clock(seed=1)
    )
    identity = manifest.identity
    assert identity is not None
    servers = identity["servers"]
    servers["policy_model"]["responses_api_models"]["vllm_model"][
        "reasoning_parser"
    ] = None
    assert restored_null_defaults(manifest.identity or {}) == identity
    assert manifest.matches_config(identity_digest(identity))
    # ... also with the earlier collection forms
    del identity["collection"]["num_repeats_add_seed"]
    assert manifest.matches_config(identity_digest(identity))
    # never over the value the judge sets
    servers["judge_model"]["responses_api_models"]["vllm_model"]["reasoning_parser"] = (
        None
    )
    assert not manifest.matches_config(identity_digest(identity))


def test_id_37_unredacted_digest_of_an_earlier_collector_matches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ID-37: computed also from the unredacted form, in memory (ID-14)."""
    monkeypatch.setenv("HF_TOKEN", "hf_planted_secret_0050")
    monkeypatch.setenv("JUDGE_API_KEY", "nvapi-planted-0050")
    config, global_config, rows = nemo_configuration()
    raw = config_identity(config, global_config, rows, credential_safe=False)
    del raw["collection"]["num_repeats_add_seed"]
    manifest = _create()
    assert manifest.matches_config(identity_digest(raw))


def test_id_37_unredacted_form_needing_an_unset_variable_is_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ID-37: skipped, never an error."""
    monkeypatch.delenv("JUDGE_API_KEY", raising=False)
    config, global_config, rows = nemo_configuration()
    dotted = "judge_model.responses_api_models.openai_model.openai_api_key"
    global_config = changed(global_config, dotted, "${oc.env:JUDGE_API_KEY}")
    manifest = RunManifest.create(
        None, rows, config, global_config, clock=Clock(seed=1)
    )
    assert not manifest.matches_config("a" * 64)
    assert manifest.matches_config(manifest.config_digest)


@pytest.mark.parametrize(
    "digest",
    [
        "unverified",
        "0" * 64,
        hashlib.sha256(b"another identity algorithm").hexdigest(),
    ],
)
def test_id_37_other_digests_never_match(digest: str) -> None:
    """ID-37: a digest of another algorithm, or "unverified", never matches."""
    assert not _create().matches_config(digest)


def test_id_31_unredacted_forms_are_computed_only_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ID-31: the unredacted identity (which reads the environment) is lazy."""
    manifest = _create()
    calls: list[bool] = []
    original = identity_manifest.identity_of

    def spy(inputs: Any, *, credential_safe: bool = True) -> Any:
        calls.append(credential_safe)
        return original(inputs, credential_safe=credential_safe)

    monkeypatch.setattr(identity_manifest, "identity_of", spy)
    assert manifest.matches_config(manifest.config_digest)
    assert calls == []
    assert not manifest.matches_config("b" * 64)
    assert calls == [False]
    manifest.matches_config("c" * 64)
    assert calls == [False]


# --- REC-10: the attempt cap ----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected", "warned"),
    [
        (None, 3, False),
        ("", 3, False),
        ("  ", 3, False),
        ("5", 5, False),
        (" 12 ", 12, False),
        ("0", 3, True),
        ("-2", 3, True),
        ("2.5", 3, True),
        ("three", 3, True),
        ("٣", 3, True),
    ],
)
def test_rec_10_max_rollout_attempts(
    value: str | None, expected: int, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """REC-10: a positive int, else 3 (one warning naming a bad value)."""
    environ = {} if value is None else {"NEMO_GYM_MAX_ROLLOUT_ATTEMPTS": value}
    with caplog.at_level(logging.WARNING, logger="ledger"):
        assert max_rollout_attempts(environ=environ) == expected
    assert len(caplog.records) == (1 if warned else 0)
    if warned:
        assert repr(value) in caplog.text


def test_rec_10_reads_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """REC-10: the environment is read when no mapping is given."""
    monkeypatch.setenv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", "6")
    assert max_rollout_attempts() == 6


def test_id_30_body_encodes_as_an_event_would() -> None:
    """ID-30: plain JSON types only (msgspec round trip)."""
    body = _create().to_body()
    assert msgspec.json.decode(msgspec.json.encode(body)) == body
