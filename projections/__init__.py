"""The read side of rollout-ledger: pure folds of the event log into views.

``replay`` folds events into a ``RunState``; ``decide`` applies REC-20 to one
rollout; ``coverage`` and ``check_complete`` summarize; ``gate`` and ``resume``
check and plan; ``replan`` releases what the decisions allow; ``publish``,
``verify``, ``history`` (with its ``History`` and ``HistoryEntry`` values) and
``selected_results`` serve the command line, as do ``reward_metrics`` (a
``RewardMetrics``: the reward figures, in words by ``metrics_lines``;
``AggregateMetrics``: NeMo Gym's file of them),
``config_diff`` and the operator actions (``approve``, ``reset_budget``,
``extend_attempts``, ``set_policy``). ``GLOSSARY``, ``describe_decision``,
``describe_rollout``, ``describe_kind``, ``describe_rule`` and
``REASON_LABELS`` (a coverage reason in a few words; ``projections.words``)
say them in plain words; ``report_context`` gathers
what the HTML report shows. Everything not in ``__all__`` is private and may
move.

Each command calls one of these and renders what it returns: ``create_run``
(a ``CreatedRun``), ``resume_with_plan_file`` (a ``Resume``, its plan written
as a plan file), ``record_outcomes`` (``RecordedOutcomes``), ``status`` (a
``RunStatus``), ``check_run`` (the ``Coverage`` of a complete run),
``history``, ``verify_run`` (a ``Verification``), ``approve_held`` (an
``Approval``), ``reset_budget``, ``extend_attempts``, ``set_policy``,
``config_diff``, ``result_rows`` (``ResultRows``; ``measured_rows`` adds
the reward figures' file, ``MeasuredRows``), ``audit_export`` (an
``AuditExport``), ``import_run`` (an ``ImportResult``) and
``import_into_store`` (a ``StoreImport``); ``run_rounds`` (a ``RoundReport``
per round: the ``run`` command's loop around a ``Launcher``'s collector).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from projections.actions import (
        Approval,
        OperatorResult,
        approve,
        approve_held,
        held_attempts,
    )
    from projections.aggregate import (
        AggregateMetrics,
        MeasuredRows,
        measured_rows,
    )
    from projections.config_diff import ConfigDiff, KeyDiff, config_diff
    from projections.coverage import (
        Coverage,
        check_complete,
        coverage,
        excluded_sidecar_lines,
    )
    from projections.create import CreatedRun, create_run
    from projections.dataset import (
        MAX_EXPANDED_BYTES,
        MAX_EXPANDED_ROLLOUTS,
        Expanded,
        expand_dataset,
    )
    from projections.decide import Decision, decide, decide_all
    from projections.export import AuditExport, audit_export
    from projections.gate import GateVerdict, gate
    from projections.history import History, HistoryEntry, history
    from projections.importing import (
        ImportResult,
        StoreImport,
        import_into_store,
        import_run,
    )
    from projections.metrics import PassAtK, RewardMetrics, TaskMean, reward_metrics
    from projections.metrics_text import metrics_lines
    from projections.plan import HeldItem, Plan, RejudgeItem
    from projections.plan_file import (
        RecordedOutcomes,
        record_outcomes,
        resume_with_plan_file,
    )
    from projections.publish import publish
    from projections.replan import replan
    from projections.replay import replay
    from projections.report import report_context
    from projections.results import (
        ChangedRow,
        ResultRows,
        changed_rows,
        result_rows,
        selected_results,
    )
    from projections.resume import Resume, resume
    from projections.round_files import Recorded, Refusal, RoundFiles
    from projections.run_loop import (
        Collector,
        CollectorExit,
        Launcher,
        RoundReport,
        RunCheck,
        run_rounds,
    )
    from projections.settings_actions import extend_attempts, reset_budget, set_policy
    from projections.state import RunState
    from projections.status import RunStatus, adopt_note, check_run, status
    from projections.verify import Finding, Verification, verify, verify_run
    from projections.words import (
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
    "AggregateMetrics",
    "Approval",
    "AuditExport",
    "ChangedRow",
    "Collector",
    "CollectorExit",
    "ConfigDiff",
    "Coverage",
    "CreatedRun",
    "Decision",
    "Expanded",
    "Finding",
    "GateVerdict",
    "HeldItem",
    "History",
    "HistoryEntry",
    "ImportResult",
    "KeyDiff",
    "Launcher",
    "MeasuredRows",
    "OperatorResult",
    "PassAtK",
    "Plan",
    "Recorded",
    "RecordedOutcomes",
    "Refusal",
    "RejudgeItem",
    "ResultRows",
    "Resume",
    "RewardMetrics",
    "RoundFiles",
    "RoundReport",
    "RunCheck",
    "RunState",
    "RunStatus",
    "StoreImport",
    "TaskMean",
    "Verification",
    "adopt_note",
    "approve",
    "approve_held",
    "audit_export",
    "changed_rows",
    "check_complete",
    "check_run",
    "config_diff",
    "coverage",
    "create_run",
    "decide",
    "decide_all",
    "describe_decision",
    "describe_kind",
    "describe_reason",
    "describe_rollout",
    "describe_rule",
    "excluded_sidecar_lines",
    "expand_dataset",
    "extend_attempts",
    "gate",
    "held_attempts",
    "history",
    "import_into_store",
    "import_run",
    "measured_rows",
    "metrics_lines",
    "publish",
    "record_outcomes",
    "replan",
    "replay",
    "report_context",
    "reset_budget",
    "result_rows",
    "resume",
    "resume_with_plan_file",
    "reward_metrics",
    "run_rounds",
    "selected_results",
    "set_policy",
    "status",
    "verify",
    "verify_run",
]

#: Every public name and the module that defines it, imported when first used
#: (P-4, P-6): a resume loads the modules it runs, not the report's, the
#: history's or the importer's.
_LAZY = {
    "AggregateMetrics": "projections.aggregate",
    "Approval": "projections.actions",
    "AuditExport": "projections.export",
    "ChangedRow": "projections.results",
    "Collector": "projections.run_loop",
    "CollectorExit": "projections.run_loop",
    "ConfigDiff": "projections.config_diff",
    "Coverage": "projections.coverage",
    "CreatedRun": "projections.create",
    "Decision": "projections.decide",
    "Expanded": "projections.dataset",
    "Finding": "projections.verify",
    "GLOSSARY": "projections.words",
    "GLOSSARY_SECTIONS": "projections.words",
    "GateVerdict": "projections.gate",
    "HeldItem": "projections.plan",
    "History": "projections.history",
    "HistoryEntry": "projections.history",
    "ImportResult": "projections.importing",
    "KeyDiff": "projections.config_diff",
    "Launcher": "projections.run_loop",
    "MeasuredRows": "projections.aggregate",
    "OperatorResult": "projections.actions",
    "PassAtK": "projections.metrics",
    "Plan": "projections.plan",
    "REASON_LABELS": "projections.words",
    "RULE_WORDS": "projections.words",
    "Recorded": "projections.round_files",
    "RecordedOutcomes": "projections.plan_file",
    "Refusal": "projections.round_files",
    "RejudgeItem": "projections.plan",
    "ResultRows": "projections.results",
    "Resume": "projections.resume",
    "RewardMetrics": "projections.metrics",
    "RoundFiles": "projections.round_files",
    "RoundReport": "projections.run_loop",
    "RunCheck": "projections.run_loop",
    "RunState": "projections.state",
    "RunStatus": "projections.status",
    "StoreImport": "projections.importing",
    "TaskMean": "projections.metrics",
    "Verification": "projections.verify",
    "adopt_note": "projections.status",
    "approve": "projections.actions",
    "approve_held": "projections.actions",
    "audit_export": "projections.export",
    "changed_rows": "projections.results",
    "check_complete": "projections.coverage",
    "check_run": "projections.status",
    "config_diff": "projections.config_diff",
    "coverage": "projections.coverage",
    "create_run": "projections.create",
    "decide": "projections.decide",
    "decide_all": "projections.decide",
    "describe_decision": "projections.words",
    "describe_kind": "projections.words",
    "describe_reason": "projections.words",
    "describe_rollout": "projections.words",
    "describe_rule": "projections.words",
    "excluded_sidecar_lines": "projections.coverage",
    "expand_dataset": "projections.dataset",
    "MAX_EXPANDED_BYTES": "projections.dataset",
    "MAX_EXPANDED_ROLLOUTS": "projections.dataset",
    "extend_attempts": "projections.settings_actions",
    "gate": "projections.gate",
    "held_attempts": "projections.actions",
    "history": "projections.history",
    "import_into_store": "projections.importing",
    "import_run": "projections.importing",
    "measured_rows": "projections.aggregate",
    "metrics_lines": "projections.metrics_text",
    "publish": "projections.publish",
    "record_outcomes": "projections.plan_file",
    "replan": "projections.replan",
    "replay": "projections.replay",
    "report_context": "projections.report",
    "reset_budget": "projections.settings_actions",
    "result_rows": "projections.results",
    "resume": "projections.resume",
    "resume_with_plan_file": "projections.plan_file",
    "reward_metrics": "projections.metrics",
    "run_rounds": "projections.run_loop",
    "selected_results": "projections.results",
    "set_policy": "projections.settings_actions",
    "status": "projections.status",
    "verify": "projections.verify",
    "verify_run": "projections.verify",
}


# A name that is also a module's (``coverage``, ``resume``...) is bound here,
# before the module's own import would bind the package attribute to it.
from projections.config_diff import config_diff  # noqa: E402
from projections.coverage import coverage  # noqa: E402
from projections.decide import decide  # noqa: E402
from projections.gate import gate  # noqa: E402
from projections.history import history  # noqa: E402
from projections.publish import publish  # noqa: E402
from projections.replan import replan  # noqa: E402
from projections.replay import replay  # noqa: E402
from projections.resume import resume  # noqa: E402
from projections.status import status  # noqa: E402
from projections.verify import verify  # noqa: E402


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'projections' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
