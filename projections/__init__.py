"""The read side of rollout-ledger, and the operations on top of it.

Seven pure rooms read the log: ``fold`` (events into a ``RunState``, and its
snapshots), ``decisions`` (REC-20, the gate, coverage, the plan), ``views``
(status, history, results, verify), ``figures`` (the reward figures),
``words``, ``report`` and ``browse`` (the viewer's and compare's values).
One room, ``operations``, holds what changes a run.
``__all__`` is the public API (api.md and ``docs/api.md``): each command
calls one of these names and renders what it returns; each room's docstring
says what it holds. Everything not in ``__all__`` is private and may move.
"""

from typing import TYPE_CHECKING

from ledger.lazy import lazy_exports

if TYPE_CHECKING:
    from projections.browse.comparison import Comparison, compare_runs
    from projections.browse.detail import (
        RolloutDetail,
        failure_messages,
        rollout_detail,
    )
    from projections.browse.header import Evaluated, evaluated
    from projections.browse.listing import (
        RolloutPage,
        RolloutQuery,
        entry_counts,
        query_rollouts,
        rollout_entries,
    )
    from projections.browse.runs import RunCard, find_runs, run_card, writer_of
    from projections.decisions.completion import (
        Coverage,
        check_complete,
        coverage,
        excluded_sidecar_lines,
    )
    from projections.decisions.config_changes import ConfigDiff, KeyDiff, config_diff
    from projections.decisions.drift_gate import GateVerdict, gate
    from projections.decisions.plan import HeldItem, Plan, RejudgeItem
    from projections.decisions.rules import Decision, decide, decide_all
    from projections.figures.in_words import metrics_lines
    from projections.figures.metrics import (
        PassAtK,
        RewardMetrics,
        TaskMean,
        reward_metrics,
    )
    from projections.figures.nemo_gym import (
        AggregateMetrics,
        MeasuredRows,
        measured_rows,
    )
    from projections.fold.reading import replay
    from projections.fold.state import RunState
    from projections.operations.coordinator import CoordinatorReport, coordinate
    from projections.operations.create import CreatedRun, create_run
    from projections.operations.dataset import (
        MAX_EXPANDED_BYTES,
        MAX_EXPANDED_ROLLOUTS,
        Expanded,
        expand_dataset,
    )
    from projections.operations.importing import (
        ImportResult,
        StoreImport,
        import_into_store,
        import_run,
    )
    from projections.operations.keep import note_commands, verify_kept
    from projections.operations.operator import (
        Approval,
        OperatorResult,
        approve,
        approve_held,
        held_attempts,
    )
    from projections.operations.plan_file import (
        RecordedOutcomes,
        record_outcomes,
        resume_with_plan_file,
    )
    from projections.operations.publishing import publish, status
    from projections.operations.recorded import Recorded, Refusal
    from projections.operations.release import replan
    from projections.operations.resuming import Resume, resume
    from projections.operations.round_files import (
        RoundFiles,
        RoundRecorder,
        next_round_files,
    )
    from projections.operations.run_loop import (
        Collector,
        CollectorExit,
        Launcher,
        RoundProgress,
        RoundReport,
        RunCheck,
        run_rounds,
    )
    from projections.operations.settings import (
        extend_attempts,
        reset_budget,
        set_policy,
    )
    from projections.operations.work import WorkerReport, work_batches
    from projections.report.context import report_context
    from projections.report.kept import ReportModel, report_model
    from projections.views.audit_trail import History, HistoryEntry, history
    from projections.views.checks import Finding, Verification, verify, verify_run
    from projections.views.export import AuditExport, audit_export
    from projections.views.next_steps import HeldChoices, NextSteps, held_choices
    from projections.views.proof import integrity, last_proof_words, read_proof
    from projections.views.results import (
        ChangedRow,
        ResultRows,
        SelectedRow,
        changed_rows,
        result_rows,
        selected_results,
    )
    from projections.views.status import RunStatus, adopt_note, check_run
    from projections.views.tables import TABLE_COLUMNS, table_records
    from projections.views.workers import workers_seen
    from projections.words.describe import (
        GLOSSARY,
        GLOSSARY_SECTIONS,
        REASON_LABELS,
        RULE_WORDS,
        describe_decision,
        describe_kind,
        describe_reason,
        describe_rollout,
        describe_rule,
    )

__all__ = [
    "GLOSSARY",
    "GLOSSARY_SECTIONS",
    "MAX_EXPANDED_BYTES",
    "MAX_EXPANDED_ROLLOUTS",
    "REASON_LABELS",
    "RULE_WORDS",
    "TABLE_COLUMNS",
    "AggregateMetrics",
    "Approval",
    "AuditExport",
    "ChangedRow",
    "Collector",
    "CollectorExit",
    "Comparison",
    "ConfigDiff",
    "CoordinatorReport",
    "Coverage",
    "CreatedRun",
    "Decision",
    "Evaluated",
    "Expanded",
    "Finding",
    "GateVerdict",
    "HeldChoices",
    "HeldItem",
    "History",
    "HistoryEntry",
    "ImportResult",
    "KeyDiff",
    "Launcher",
    "MeasuredRows",
    "NextSteps",
    "OperatorResult",
    "PassAtK",
    "Plan",
    "Recorded",
    "RecordedOutcomes",
    "Refusal",
    "RejudgeItem",
    "ReportModel",
    "ResultRows",
    "Resume",
    "RewardMetrics",
    "RolloutDetail",
    "RolloutPage",
    "RolloutQuery",
    "RoundFiles",
    "RoundProgress",
    "RoundRecorder",
    "RoundReport",
    "RunCard",
    "RunCheck",
    "RunState",
    "RunStatus",
    "SelectedRow",
    "StoreImport",
    "TaskMean",
    "Verification",
    "WorkerReport",
    "adopt_note",
    "approve",
    "approve_held",
    "audit_export",
    "changed_rows",
    "check_complete",
    "check_run",
    "compare_runs",
    "config_diff",
    "coordinate",
    "coverage",
    "create_run",
    "decide",
    "decide_all",
    "describe_decision",
    "describe_kind",
    "describe_reason",
    "describe_rollout",
    "describe_rule",
    "entry_counts",
    "evaluated",
    "excluded_sidecar_lines",
    "expand_dataset",
    "extend_attempts",
    "failure_messages",
    "find_runs",
    "gate",
    "held_attempts",
    "held_choices",
    "history",
    "import_into_store",
    "import_run",
    "integrity",
    "last_proof_words",
    "measured_rows",
    "metrics_lines",
    "next_round_files",
    "note_commands",
    "publish",
    "query_rollouts",
    "read_proof",
    "record_outcomes",
    "replan",
    "replay",
    "report_context",
    "report_model",
    "reset_budget",
    "result_rows",
    "resume",
    "resume_with_plan_file",
    "reward_metrics",
    "rollout_detail",
    "rollout_entries",
    "run_card",
    "run_rounds",
    "selected_results",
    "set_policy",
    "status",
    "table_records",
    "verify",
    "verify_kept",
    "verify_run",
    "work_batches",
    "workers_seen",
    "writer_of",
]

#: Every public name and the module that defines it, imported when first used
#: (P-4, P-6): a resume loads the modules it runs, not the report's, the
#: history's or the importer's.
_LAZY = {
    "note_commands": "projections.operations.keep",
    "held_choices": "projections.views.next_steps",
    "NextSteps": "projections.views.next_steps",
    "HeldChoices": "projections.views.next_steps",
    "Comparison": "projections.browse.comparison",
    "compare_runs": "projections.browse.comparison",
    "RunCard": "projections.browse.runs",
    "find_runs": "projections.browse.runs",
    "run_card": "projections.browse.runs",
    "writer_of": "projections.browse.runs",
    "RolloutQuery": "projections.browse.listing",
    "RolloutPage": "projections.browse.listing",
    "rollout_entries": "projections.browse.listing",
    "query_rollouts": "projections.browse.listing",
    "entry_counts": "projections.browse.listing",
    "RolloutDetail": "projections.browse.detail",
    "rollout_detail": "projections.browse.detail",
    "failure_messages": "projections.browse.detail",
    "Evaluated": "projections.browse.header",
    "evaluated": "projections.browse.header",
    "AggregateMetrics": "projections.figures.nemo_gym",
    "Approval": "projections.operations.operator",
    "AuditExport": "projections.views.export",
    "ChangedRow": "projections.views.results",
    "Collector": "projections.operations.run_loop",
    "CoordinatorReport": "projections.operations.coordinator",
    "WorkerReport": "projections.operations.work",
    "coordinate": "projections.operations.coordinator",
    "work_batches": "projections.operations.work",
    "CollectorExit": "projections.operations.run_loop",
    "ConfigDiff": "projections.decisions.config_changes",
    "Coverage": "projections.decisions.completion",
    "CreatedRun": "projections.operations.create",
    "Decision": "projections.decisions.rules",
    "Expanded": "projections.operations.dataset",
    "Finding": "projections.views.checks",
    "GLOSSARY": "projections.words.describe",
    "GLOSSARY_SECTIONS": "projections.words.describe",
    "GateVerdict": "projections.decisions.drift_gate",
    "HeldItem": "projections.decisions.plan",
    "History": "projections.views.audit_trail",
    "HistoryEntry": "projections.views.audit_trail",
    "ImportResult": "projections.operations.importing",
    "KeyDiff": "projections.decisions.config_changes",
    "Launcher": "projections.operations.run_loop",
    "MeasuredRows": "projections.figures.nemo_gym",
    "OperatorResult": "projections.operations.operator",
    "PassAtK": "projections.figures.metrics",
    "Plan": "projections.decisions.plan",
    "REASON_LABELS": "projections.words.describe",
    "RULE_WORDS": "projections.words.describe",
    "Recorded": "projections.operations.recorded",
    "RecordedOutcomes": "projections.operations.plan_file",
    "Refusal": "projections.operations.recorded",
    "RejudgeItem": "projections.decisions.plan",
    "ResultRows": "projections.views.results",
    "Resume": "projections.operations.resuming",
    "RewardMetrics": "projections.figures.metrics",
    "RoundFiles": "projections.operations.round_files",
    "RoundRecorder": "projections.operations.round_files",
    "RoundProgress": "projections.operations.run_loop",
    "RoundReport": "projections.operations.run_loop",
    "RunCheck": "projections.operations.run_loop",
    "RunState": "projections.fold.state",
    "RunStatus": "projections.views.status",
    "SelectedRow": "projections.views.results",
    "TABLE_COLUMNS": "projections.views.tables",
    "StoreImport": "projections.operations.importing",
    "TaskMean": "projections.figures.metrics",
    "Verification": "projections.views.checks",
    "adopt_note": "projections.views.status",
    "approve": "projections.operations.operator",
    "approve_held": "projections.operations.operator",
    "audit_export": "projections.views.export",
    "changed_rows": "projections.views.results",
    "check_complete": "projections.decisions.completion",
    "check_run": "projections.views.status",
    "config_diff": "projections.decisions.config_changes",
    "coverage": "projections.decisions.completion",
    "create_run": "projections.operations.create",
    "decide": "projections.decisions.rules",
    "decide_all": "projections.decisions.rules",
    "describe_decision": "projections.words.describe",
    "describe_kind": "projections.words.describe",
    "describe_reason": "projections.words.describe",
    "describe_rollout": "projections.words.describe",
    "describe_rule": "projections.words.describe",
    "excluded_sidecar_lines": "projections.decisions.completion",
    "expand_dataset": "projections.operations.dataset",
    "MAX_EXPANDED_BYTES": "projections.operations.dataset",
    "MAX_EXPANDED_ROLLOUTS": "projections.operations.dataset",
    "extend_attempts": "projections.operations.settings",
    "gate": "projections.decisions.drift_gate",
    "held_attempts": "projections.operations.operator",
    "history": "projections.views.audit_trail",
    "import_into_store": "projections.operations.importing",
    "import_run": "projections.operations.importing",
    "next_round_files": "projections.operations.round_files",
    "measured_rows": "projections.figures.nemo_gym",
    "metrics_lines": "projections.figures.in_words",
    "publish": "projections.operations.publishing",
    "record_outcomes": "projections.operations.plan_file",
    "replan": "projections.operations.release",
    "replay": "projections.fold.reading",
    "report_context": "projections.report.context",
    "report_model": "projections.report.kept",
    "ReportModel": "projections.report.kept",
    "reset_budget": "projections.operations.settings",
    "result_rows": "projections.views.results",
    "resume": "projections.operations.resuming",
    "resume_with_plan_file": "projections.operations.plan_file",
    "reward_metrics": "projections.figures.metrics",
    "run_rounds": "projections.operations.run_loop",
    "selected_results": "projections.views.results",
    "set_policy": "projections.operations.settings",
    "status": "projections.operations.publishing",
    "table_records": "projections.views.tables",
    "workers_seen": "projections.views.workers",
    "verify": "projections.views.checks",
    "verify_run": "projections.views.checks",
    "verify_kept": "projections.operations.keep",
    "integrity": "projections.views.proof",
    "last_proof_words": "projections.views.proof",
    "read_proof": "projections.views.proof",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
