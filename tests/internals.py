"""The private names the tests of internal units use, in one place.

Most tests go through the public names (``from ledger import ...``,
``from projections import ...``, ``from cli import main``): those are the
contract and do not move. Some tests check a unit that is not exported (the
SQLite store contract, the hash chain, the write index, the PostgreSQL schema,
the row rules behind ``row_facts``, the identity tables, the importer's line
reader, a command's click object). They import those names from here
(``from tests.internals import SQLiteStore``), never from the private module.

This is the one place to update when a private module moves or is renamed:
change its entry below and every test follows (``tests/test_internals.py``
resolves each entry and fails on a test that imports a private module itself).

A name is imported when first asked for, not when this module is: the child
processes of the crash harnesses import test modules, and loading every room
of the product (and psycopg, click) in each of them would slow them down.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Each name and where it lives: ``"module"`` holds an attribute of the same
#: name, ``"module:attribute"`` one of another name.
_NAMES: dict[str, str] = {
    # The SQLite store, its hash chain and how a stored row decodes
    "first_chain_break": "ledger.store.chain",
    "decode_row": "ledger.store.decode",
    "EventRow": "ledger.store.sqlite",
    "NewEvent": "ledger.store.sqlite",
    "SCHEMA_VERSION": "ledger.store.sqlite",
    "SQLiteStore": "ledger.store.sqlite",
    # The writer's internals: the recorder, the write index, plan records, run paths
    "RunPaths": "ledger.paths",
    "record_plan_rows": "ledger.run.plan_record",
    "Recorder": "ledger.run.recorder",
    "INDEX_CODE_VERSION": "ledger.run.write_index",
    "INDEX_KINDS": "ledger.run.write_index",
    "WriteIndex": "ledger.run.write_index",
    # The PostgreSQL store: schema, store, advisory lock, run URLs, copies
    "acquire_run_lock": "ledger.postgres.advisory",
    "export_files": "ledger.postgres.copy",
    "import_into_store": "ledger.postgres.copy",
    "MIGRATIONS": "ledger.postgres.schema",
    "PG_SCHEMA_VERSION": "ledger.postgres.schema",
    "SCHEMA": "ledger.postgres.schema",
    "migrate": "ledger.postgres.schema",
    "NewRow": "ledger.postgres.store",
    "PostgresStore": "ledger.postgres.store",
    "RunUrl": "ledger.postgres.url",
    "STORE_ENV": "ledger.postgres.url",
    "is_run_url": "ledger.postgres.url",
    "resolve_run": "ledger.postgres.url",
    # The row rules behind row_facts and the failure-kind tables
    "LEGACY_FAILURE_CLASSES": "ledger.rows.answers",
    "counts_as_generation": "ledger.rows.answers",
    "is_diagnostic_error": "ledger.rows.answers",
    "is_legacy_placeholder": "ledger.rows.answers",
    "is_placeholder": "ledger.rows.answers",
    "is_typed_response": "ledger.rows.answers",
    "calls_span": "ledger.rows.calls",
    "calls_summary": "ledger.rows.calls",
    "has_failure_evidence": "ledger.rows.calls",
    "reduce_call": "ledger.rows.calls",
    "CallFacts": "ledger.rows.facts",
    "CallsSummary": "ledger.rows.facts",
    "FailureEventFacts": "ledger.rows.facts",
    "RejudgmentRef": "ledger.rows.facts",
    "KIND_ALIASES": "ledger.rows.failure_kinds",
    "STAGES": "ledger.rows.failure_kinds",
    "canonical_kind": "ledger.rows.failure_kinds",
    "is_transport_kind": "ledger.rows.failure_kinds",
    "own_failure_kind": "ledger.rows.kinds",
    "row_kind": "ledger.rows.kinds",
    "FinalContext": "ledger.rows.rules",
    "row_route": "ledger.rows.rules",
    # Identity: plain data, key tables, registries, credentials, manifest forms
    "credential_interpolation": "ledger.identity.credentials",
    "credential_named": "ledger.identity.credentials",
    "redact_text": "ledger.identity.credentials",
    "counted_identity": "ledger.identity.digest",
    "added_at_default": "ledger.identity.forms",
    "restored_null_defaults": "ledger.identity.forms",
    "find_interpolations": "ledger.identity.interpolations",
    "REDACTED": "ledger.identity.key_tables",
    "SERVER_KINDS": "ledger.identity.key_tables",
    "join_key": "ledger.identity.key_words",
    "split_key": "ledger.identity.key_words",
    "materialized_digest": "ledger.identity.manifest",
    "to_plain": "ledger.identity.plain_data",
    "server_blocks": "ledger.identity.servers",
    "check_row_identity": "ledger.row_identity",
    # Policy files and the policy log
    "parse_approvals": "ledger.policy.approvals",
    "read_approvals": "ledger.policy.approvals",
    "policy_changes": "ledger.policy.log",
    "policy_from_events": "ledger.policy.log",
    "policy_from_json": "ledger.policy.log",
    "DEFAULT_POLICY": "ledger.policy.model",
    "read_policy_file": "ledger.policy.source",
    # The importer of runs saved without a ledger, and its line reader
    "BAD_ATTEMPT": "ledger.legacy.reading",
    "BLANK": "ledger.legacy.reading",
    "NOT_FAILURE": "ledger.legacy.reading",
    "NOT_JSON": "ledger.legacy.reading",
    "NOT_OBJECT": "ledger.legacy.reading",
    "NO_INDEX": "ledger.legacy.reading",
    "NO_PERSIST": "ledger.legacy.reading",
    "OMISSION_IN_OUT": "ledger.legacy.reading",
    "OTHER_RUN": "ledger.legacy.reading",
    "OutcomeReader": "ledger.legacy.reading",
    "PLACEHOLDER": "ledger.legacy.reading",
    "REASONS": "ledger.legacy.reading",
    "TORN": "ledger.legacy.reading",
    "UNKNOWN_KEY": "ledger.legacy.reading",
    "legacy_read_materialized": "ledger.legacy.reading:read_materialized",
    "raw_lines": "ledger.legacy.reading",
    # Encodings and files
    "canonical_json": "ledger.files",
    "encode_row": "ledger.jsonl",
    "encode_rows": "ledger.jsonl",
    # Projections' internals: the fold, the state, snapshots, replan, rendering
    "BRANCHES": "projections.classify",
    "rendered_files": "projections.publish",
    "read_materialized": "projections.replan",
    "apply": "projections.replay",
    "CODE_VERSION": "projections.snapshot",
    "load_snapshot": "projections.snapshot",
    "save_snapshot": "projections.snapshot",
    "Judgment": "projections.state",
    "RolloutState": "projections.state",
    # Command objects, for tests that mount one command on a group of their own
    "_progress_bar": "cli.commands_import",
    "import_": "cli.commands_import",
    "demo": "cli.demo",
    "LedgerGroup": "cli.main",
}

#: Modules some tests use whole: to monkeypatch or fault-inject one of their
#: attributes, or to read their tables. (A package may bind a function over its
#: submodule of the same name, as ``projections`` does ``replan``, so these are
#: imported by their full name.)
_MODULES: dict[str, str] = {
    "commands_import": "cli.commands_import",
    "key_tables": "ledger.identity.key_tables",
    "identity_manifest": "ledger.identity.manifest",
    "identity_normalize": "ledger.identity.normalize",
    "registries": "ledger.identity.registries",
    "legacy_importer": "ledger.legacy.importer",
    "rules": "ledger.rows.rules",
    "replan_module": "projections.replan",
    "results_module": "projections.results",
}

__all__ = sorted([*_NAMES, *_MODULES])


def __getattr__(name: str) -> Any:
    """Import ``name`` from where the tables say, once (PEP 562)."""
    if name in _MODULES:
        value: Any = importlib.import_module(_MODULES[name])
    elif name in _NAMES:
        module, _, attribute = _NAMES[name].partition(":")
        value = getattr(importlib.import_module(module), attribute or name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
