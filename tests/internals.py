"""The private names the tests of internal units use, in one place.

Most tests go through the public names (``from ledger import ...``,
``from projections import ...``, ``from cli import main``): those are the
contract and do not move. Some tests check a unit that is not exported (the
SQLite store contract, the hash chain, the write index, the PostgreSQL schema,
the row rules behind ``row_facts``, the identity tables, the importer's line
reader, a command's click object). They import those names from here
(``from tests.internals import SQLiteStore``), never from the private module.

This is the one place to update when a private module moves or is renamed:
change its import below and every test follows. ``tests/test_internals.py``
resolves every name and fails on a test that imports a private module itself.

The imports below are read, not run, when this module loads: each name is
imported when a test first asks for it (PEP 562 ``__getattr__``). The crash
harnesses' child processes import test modules, and loading every room of
the product (and psycopg, click) in each of them would slow them down.
Type checkers and editors see the imports as written.
"""

from __future__ import annotations

import ast
import importlib
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import cli.demo.command as demo_module
    import ledger.aside as aside_module
    import ledger.collector_files.inputs_seen as inputs_seen_module
    import ledger.collector_files.rows_seen as rows_seen_module
    import ledger.event_views as event_views
    import ledger.files as files_module
    import ledger.identity.key_tables as key_tables
    import ledger.identity.manifest as identity_manifest
    import ledger.identity.normalize as identity_normalize
    import ledger.identity.registries as registries
    import ledger.legacy.importer as legacy_importer
    import ledger.legacy.log as legacy_log
    import ledger.rows.rules as rules
    import ledger.store.built_aside as built_aside
    import projections.browse.runs as browse_runs_module
    import projections.decisions.current_manifest as current_manifest_module
    import projections.operations.release as replan_module
    import projections.report.context as report_context_module
    import projections.views.checks as checks_module
    import projections.views.results as results_module
    from cli.commands.importing import _progress_bar, import_
    from cli.common import load_global_config
    from cli.demo.command import demo
    from cli.launch.collector import dies_with_parent
    from cli.main import LedgerGroup
    from cli.render.html import report_server
    from cli.render.loopback import host_allowed
    from cli.render.progress import RoundProgressLine, progress_words
    from cli.render.safe_json import script_json
    from cli.serve.server import make_server
    from ledger.collector_files.inputs_seen import InputsSeen, still_seen
    from ledger.event_views import VIEWS
    from ledger.files import canonical_json
    from ledger.identity.digest import counted_identity
    from ledger.identity.forms import added_at_default, restored_null_defaults
    from ledger.identity.interpolations import find_interpolations
    from ledger.identity.key_tables import REDACTED, SERVER_KINDS
    from ledger.identity.key_words import join_key, split_key
    from ledger.identity.manifest import materialized_digest
    from ledger.identity.plain_data import to_plain
    from ledger.identity.secrets.redact import (
        Redactor,
        credential_interpolation,
        credential_named,
        redact_text,
    )
    from ledger.identity.servers import server_blocks
    from ledger.jsonl import encode_row, encode_rows
    from ledger.legacy.inputs import read_materialized as legacy_read_materialized
    from ledger.legacy.parsing import (
        BAD_ATTEMPT,
        BLANK,
        NO_INDEX,
        NO_PERSIST,
        NOT_FAILURE,
        NOT_JSON,
        NOT_OBJECT,
        OMISSION_IN_OUT,
        OTHER_RUN,
        PLACEHOLDER,
        REASONS,
        TORN,
        UNKNOWN_KEY,
        raw_lines,
    )
    from ledger.legacy.reading import OutcomeReader
    from ledger.paths import RunPaths
    from ledger.policy.approvals import parse_approvals, read_approvals
    from ledger.policy.log import policy_changes, policy_from_events, policy_from_json
    from ledger.policy.model import DEFAULT_POLICY
    from ledger.policy.source import read_policy_file
    from ledger.postgres.advisory import acquire_run_lock
    from ledger.postgres.copy import export_files, import_into_store
    from ledger.postgres.schema import MIGRATIONS, PG_SCHEMA_VERSION, SCHEMA, migrate
    from ledger.postgres.store import PostgresStore
    from ledger.postgres.url import STORE_ENV, RunUrl, is_postgres_url, resolve_run
    from ledger.rows.answers import (
        LEGACY_FAILURE_CLASSES,
        counts_as_generation,
        is_diagnostic_error,
        is_legacy_placeholder,
        is_placeholder,
        is_typed_response,
    )
    from ledger.rows.calls import (
        calls_span,
        calls_summary,
        has_failure_evidence,
        reduce_call,
    )
    from ledger.rows.facts import (
        CallFacts,
        CallsSummary,
        FailureEventFacts,
        RejudgmentRef,
    )
    from ledger.rows.failure_kinds import (
        DEFAULT_REGRADE_KINDS,
        KIND_ALIASES,
        KIND_INFO,
        STAGES,
        KindInfo,
        canonical_kind,
        is_transport_kind,
        kind_info,
    )
    from ledger.rows.kinds import own_failure_kind, row_kind
    from ledger.rows.rules import FinalContext, row_route
    from ledger.run.index_keeper import ENDS_VERSION, IndexKeeper
    from ledger.run.plan_record import record_plan_rows
    from ledger.run.recorder import Recorder
    from ledger.run.write_index import INDEX_CODE_VERSION, INDEX_KINDS, WriteIndex
    from ledger.store.chain import first_chain_break
    from ledger.store.decode import decode_row
    from ledger.store.file_sink import FileSink
    from ledger.store.memory.log import MemoryStore
    from ledger.store.memory.runs import forget_all
    from ledger.store.port import EventRow, NewEvent, NewRow
    from ledger.store.sqlite.store import SCHEMA_VERSION, SQLiteStore
    from projections.decisions.classify import BRANCHES, classify
    from projections.decisions.rules import TaskDecisions
    from projections.figures.metrics import pass_at_k, t_quantile_975
    from projections.figures.sums import (
        ValueSums,
        add_values,
        figures_of_scores,
        merge_scores,
        pack_scores,
        sorted_scores,
        unpack_scores,
        updated,
    )
    from projections.figures.sums import summary as reward_summary
    from projections.fold.apply import (
        HANDLERS,
        IGNORED_KINDS,
        NEEDS_AT,
        FoldStep,
        fold_events,
    )
    from projections.fold.fast_path import FAST_DECODER
    from projections.fold.left import load_open
    from projections.fold.reading import apply
    from projections.fold.settled import settle
    from projections.fold.snapshot import CODE_VERSION, load_snapshot
    from projections.fold.state import Judgment, RolloutState
    from projections.operations.keep import save_open, save_snapshot
    from projections.operations.release import read_materialized
    from projections.report.charts import failures_svg, per_task_svg, text_width
    from projections.views.published import rendered_files


__all__ = [
    "BAD_ATTEMPT",
    "BLANK",
    "BRANCHES",
    "CODE_VERSION",
    "DEFAULT_POLICY",
    "DEFAULT_REGRADE_KINDS",
    "ENDS_VERSION",
    "FAST_DECODER",
    "HANDLERS",
    "IGNORED_KINDS",
    "INDEX_CODE_VERSION",
    "INDEX_KINDS",
    "KIND_ALIASES",
    "KIND_INFO",
    "LEGACY_FAILURE_CLASSES",
    "MIGRATIONS",
    "NEEDS_AT",
    "NOT_FAILURE",
    "NOT_JSON",
    "NOT_OBJECT",
    "NO_INDEX",
    "NO_PERSIST",
    "OMISSION_IN_OUT",
    "OTHER_RUN",
    "PG_SCHEMA_VERSION",
    "PLACEHOLDER",
    "REASONS",
    "REDACTED",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SERVER_KINDS",
    "STAGES",
    "STORE_ENV",
    "TORN",
    "UNKNOWN_KEY",
    "VIEWS",
    "CallFacts",
    "CallsSummary",
    "EventRow",
    "FailureEventFacts",
    "FileSink",
    "FinalContext",
    "FoldStep",
    "IndexKeeper",
    "InputsSeen",
    "Judgment",
    "KindInfo",
    "LedgerGroup",
    "MemoryStore",
    "NewEvent",
    "NewRow",
    "OutcomeReader",
    "PostgresStore",
    "Recorder",
    "Redactor",
    "RejudgmentRef",
    "RolloutState",
    "RoundProgressLine",
    "RunPaths",
    "RunUrl",
    "SQLiteStore",
    "TaskDecisions",
    "ValueSums",
    "WriteIndex",
    "_progress_bar",
    "acquire_run_lock",
    "add_values",
    "added_at_default",
    "apply",
    "aside_module",
    "browse_runs_module",
    "built_aside",
    "calls_span",
    "calls_summary",
    "canonical_json",
    "canonical_kind",
    "checks_module",
    "classify",
    "counted_identity",
    "counts_as_generation",
    "credential_interpolation",
    "credential_named",
    "current_manifest_module",
    "decode_row",
    "demo",
    "demo_module",
    "dies_with_parent",
    "encode_row",
    "encode_rows",
    "event_views",
    "export_files",
    "failures_svg",
    "figures_of_scores",
    "files_module",
    "find_interpolations",
    "first_chain_break",
    "fold_events",
    "forget_all",
    "has_failure_evidence",
    "host_allowed",
    "identity_manifest",
    "identity_normalize",
    "import_",
    "import_into_store",
    "inputs_seen_module",
    "is_diagnostic_error",
    "is_legacy_placeholder",
    "is_placeholder",
    "is_postgres_url",
    "is_transport_kind",
    "is_typed_response",
    "join_key",
    "key_tables",
    "kind_info",
    "legacy_importer",
    "legacy_log",
    "legacy_read_materialized",
    "load_global_config",
    "load_open",
    "load_snapshot",
    "make_server",
    "materialized_digest",
    "merge_scores",
    "migrate",
    "own_failure_kind",
    "pack_scores",
    "parse_approvals",
    "pass_at_k",
    "per_task_svg",
    "policy_changes",
    "policy_from_events",
    "policy_from_json",
    "progress_words",
    "raw_lines",
    "read_approvals",
    "read_materialized",
    "read_policy_file",
    "record_plan_rows",
    "redact_text",
    "reduce_call",
    "registries",
    "rendered_files",
    "replan_module",
    "report_context_module",
    "report_server",
    "resolve_run",
    "restored_null_defaults",
    "results_module",
    "reward_summary",
    "row_kind",
    "row_route",
    "rows_seen_module",
    "rules",
    "save_open",
    "save_snapshot",
    "script_json",
    "server_blocks",
    "settle",
    "sorted_scores",
    "split_key",
    "still_seen",
    "t_quantile_975",
    "text_width",
    "to_plain",
    "unpack_scores",
    "updated",
]


@cache
def _where() -> dict[str, tuple[str, str | None]]:
    """Each name and where it is: a module and an attribute, or a module (None)."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    found: dict[str, tuple[str, str | None]] = {}
    for node in block.body:
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            for alias in node.names:
                found[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                found[alias.asname or alias.name] = (alias.name, None)
    return found


def __getattr__(name: str) -> Any:
    """Import ``name`` from where the imports above say, once."""
    if name not in _where():
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _where()[name]
    value = importlib.import_module(module)
    if attribute is not None:
        value = getattr(value, attribute)
    globals()[name] = value
    return value
