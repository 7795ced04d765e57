"""The write side of rollout-ledger and its shared vocabulary.

Event types and the event store, the run lock, atomic file publication, the
configuration identity and the manifest, and the row facts. Everything not
listed in ``__all__`` is private and may move.

Beyond api.md: ``Refused`` (a call not allowed as made: a read-only ledger, a
lock not held; exit 3) and ``StorageError`` (the run's files or database
could not be read or written; exit 5) are the two error kinds for misuse and
storage; ``resolve_out`` turns ``OUT`` as a person writes it (a path, a run
URL, a run name in ``ROLLOUT_LEDGER_STORE``, a folder holding one run) into
what ``Ledger.open`` and ``RunLock`` take.

``redact_secrets`` is the one redaction of credential-shaped values in text
(URL passwords, bearer and basic authorization, ``--api-key``-style arguments,
``NAME=secret`` assignments, provider token formats), which the identity, the
row facts and reasons, the published files and every message use (ID-13).
``plural`` says a count with its noun ("1 row", "2 rows") wherever one is
printed.

What the commands call, one function each: ``open_run`` (a run opened
read-only, or as its writer under the lock), ``doctor`` (the environment
checks, a ``DoctorReport``), ``copy_to_files`` and ``copy_into_store`` (a run
copied to its other home, a ``CopiedRun``), ``read_plan_rows`` and
``record_plan_rows`` (a plan file's outcome rows: their reservations
committed first, then the rows and their events), ``identify_row`` (the
rollout a collector's row answers, by the ``_ng_rollout_id`` a plan file
gives it, ``derived_rollout_id`` where the materialized row has none),
``rows_untouched`` (``OUT`` and the sidecar as their writer left them: no
row can have been edited since, so ``status`` checks no digest),
``adopted_inputs`` (the materialized inputs a collector left, which
``create`` given the same bytes adopts, REC-84), ``FollowedFile`` (a
collector's file read as it grows: its complete new lines, a rewrite
refused), ``WorkBoard``, ``WorkerSeat`` and ``WorkerInfo`` (a run on
PostgreSQL's offered work, its workers and a worker's own seat, issue 29),
``server_blocks``,
``misplaced_in_collection`` and ``misplaced_in_servers`` (which of NeMo Gym's
two configuration files a top-level key belongs in); with the values they use,
``RunPaths`` (the files of one run) and ``ImportReport`` (what
``import_legacy_run`` recorded).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ledger import events
from ledger.bounds import (
    MAX_ATTEMPTS,
    MAX_INDEX,
    MAX_SEQ,
    attempt_key,
    bounded,
    rollout_index,
    task_index,
)
from ledger.clock import Clock
from ledger.errors import (
    AlreadyReserved,
    ConcurrencyConflict,
    ConfigError,
    CorruptLedger,
    IdentityMismatch,
    LedgerError,
    LockHeld,
    LockLost,
    RecoveryIncomplete,
    Refused,
    RowError,
    StorageError,
    UnknownEvent,
)
from ledger.files import atomic_replace, publish_json
from ledger.identity.digest import config_identity, identity_digest
from ledger.identity.drift import Drift, classify_key, diff_keys, drift
from ledger.identity.manifest import RunManifest
from ledger.identity.placement import misplaced_in_collection, misplaced_in_servers
from ledger.identity.secrets.literal import credential_paths
from ledger.identity.secrets.patterns import credential_named
from ledger.identity.secrets.redact import credential_safe, redact_secrets
from ledger.identity.servers import server_blocks
from ledger.outputs import check_outputs
from ledger.policy.attempts_cap import max_rollout_attempts
from ledger.policy.judge import JudgeAdmission
from ledger.policy.model import RecoveryPolicy
from ledger.policy.source import creation_policy
from ledger.rows import policy_rules as facts_rules
from ledger.rows.facts import RowFacts
from ledger.rows.failure_kinds import FAILURE_KINDS, is_namespaced, is_registered, side
from ledger.rows.rules import (
    NG_NO_GENERATION_METADATA,
    applied_result_class,
    faults_own_window,
    final_context,
    has_native_partial,
    has_recorded_grade,
    has_saved_generation,
    is_final_agent_timeout,
    is_infrastructure_agent_timeout,
    is_server_fault_call,
    keeps_response,
    keeps_saved_answer,
    kind_is,
    masked_candidate_kind,
    masked_infrastructure_kind,
    masked_kept_answer_kind,
    masked_regrade_kind,
    masked_without_artifact_kind,
    model_calls,
    names_kept_deliverable,
    rollout_id,
    rollout_wallclock,
    route_failure,
    row_facts,
    sandbox_or_tool_fault,
    selected_failure_kind,
)
from ledger.run.ledger import Ledger
from ledger.run.lock import RunLock
from ledger.store.registry import resolve_out

# isort: split
# What the commands call (one library function each) and the values they use.
from ledger.aside import Aside, aside_pays, cpus
from ledger.collector_files.identify import ROLLOUT_ID, derived_rollout_id, identify_row
from ledger.collector_files.rows_seen import rows_untouched
from ledger.collector_files.waiting import Waiting, adopt_advice, group_waiting
from ledger.errors import plural
from ledger.lazy import lazy_exports
from ledger.paths import RunPaths
from ledger.run.create import adopted_inputs, check_new_run
from ledger.run.opening import open_run
from ledger.run.plan_record import read_plan_rows, record_plan_rows

__all__ = [
    "FAILURE_KINDS",
    "MAX_ATTEMPTS",
    "MAX_INDEX",
    "MAX_SEQ",
    "NG_NO_GENERATION_METADATA",
    "ROLLOUT_ID",
    "AlreadyReserved",
    "Aside",
    "AsyncRecorder",
    "Clock",
    "ConcurrencyConflict",
    "ConfigError",
    "CopiedRun",
    "CorruptLedger",
    "DoctorReport",
    "Drift",
    "FollowedFile",
    "FollowedLine",
    "IdentityMismatch",
    "ImportReport",
    "JudgeAdmission",
    "Ledger",
    "LedgerError",
    "LockHeld",
    "LockLost",
    "RecoveryIncomplete",
    "RecoveryPolicy",
    "Refused",
    "RowError",
    "RowFacts",
    "RunLock",
    "RunManifest",
    "RunPaths",
    "StorageError",
    "UnknownEvent",
    "Waiting",
    "WorkBoard",
    "WorkerInfo",
    "WorkerSeat",
    "adopt_advice",
    "adopted_inputs",
    "applied_result_class",
    "aside_pays",
    "atomic_replace",
    "attempt_key",
    "bounded",
    "check_new_run",
    "check_outputs",
    "classify_key",
    "config_identity",
    "copy_into_store",
    "copy_to_files",
    "cpus",
    "creation_policy",
    "credential_named",
    "credential_paths",
    "credential_safe",
    "derived_rollout_id",
    "diff_keys",
    "doctor",
    "drift",
    "events",
    "facts_rules",
    "faults_own_window",
    "final_context",
    "group_waiting",
    "has_native_partial",
    "has_recorded_grade",
    "has_saved_generation",
    "identify_row",
    "identity_digest",
    "import_legacy_run",
    "is_final_agent_timeout",
    "is_infrastructure_agent_timeout",
    "is_namespaced",
    "is_registered",
    "is_server_fault_call",
    "keeps_response",
    "keeps_saved_answer",
    "kind_is",
    "lazy_exports",
    "masked_candidate_kind",
    "masked_infrastructure_kind",
    "masked_kept_answer_kind",
    "masked_regrade_kind",
    "masked_without_artifact_kind",
    "max_rollout_attempts",
    "misplaced_in_collection",
    "misplaced_in_servers",
    "model_calls",
    "names_kept_deliverable",
    "open_run",
    "plural",
    "publish_json",
    "read_plan_rows",
    "record_plan_rows",
    "redact_secrets",
    "resolve_out",
    "rollout_id",
    "rollout_index",
    "rollout_wallclock",
    "route_failure",
    "row_facts",
    "rows_untouched",
    "sandbox_or_tool_fault",
    "selected_failure_kind",
    "server_blocks",
    "side",
    "task_index",
]

#: Names whose modules are imported when first used (P-4, P-6): a command
#: that resumes, records or reads never loads asyncio, the importer of older
#: runs, the environment checks or the copy between homes.
_LAZY = {
    "AsyncRecorder": "ledger.run.async_recorder",
    "CopiedRun": "ledger.run.transfer",
    "DoctorReport": "ledger.doctor.report",
    "FollowedFile": "ledger.collector_files.follow",
    "FollowedLine": "ledger.collector_files.follow",
    "ImportReport": "ledger.legacy.importer",
    "WorkBoard": "ledger.postgres.workers",
    "WorkerInfo": "ledger.postgres.workers",
    "WorkerSeat": "ledger.postgres.seat",
    "copy_into_store": "ledger.run.transfer",
    "copy_to_files": "ledger.run.transfer",
    "doctor": "ledger.doctor.report",
    "import_legacy_run": "ledger.legacy.importer",
}

if TYPE_CHECKING:
    from ledger.collector_files.follow import FollowedFile, FollowedLine
    from ledger.doctor.report import DoctorReport, doctor
    from ledger.legacy.importer import ImportReport, import_legacy_run
    from ledger.postgres.seat import WorkerSeat
    from ledger.postgres.workers import WorkBoard, WorkerInfo
    from ledger.run.async_recorder import AsyncRecorder
    from ledger.run.transfer import CopiedRun, copy_into_store, copy_to_files


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ledger' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
