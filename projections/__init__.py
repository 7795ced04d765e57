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

from projections.actions import OperatorResult, approve, held_attempts
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
from projections.decide import Decision, decide, decide_all
from projections.gate import GateVerdict, gate
from projections.history import History, HistoryEntry, history
from projections.importing import import_run
from projections.metrics import PassAtK, RewardMetrics, TaskMean, reward_metrics
from projections.metrics_text import metrics_lines
from projections.plan import HeldItem, Plan, RejudgeItem
from projections.publish import publish
from projections.replan import replan
from projections.replay import replay
from projections.report import report_context
from projections.results import selected_results
from projections.resume import Resume, resume
from projections.settings_actions import extend_attempts, reset_budget, set_policy
from projections.state import RunState
from projections.verify import Finding, verify
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

# isort: split
# What the commands call (one library function each) and the values returned.
from projections.actions import Approval, approve_held
from projections.create import CreatedRun, create_run
from projections.dataset import Expanded, expand_dataset
from projections.export import AuditExport, audit_export
from projections.importing import ImportResult, StoreImport, import_into_store
from projections.plan_file import (
    RecordedOutcomes,
    record_outcomes,
    resume_with_plan_file,
)
from projections.results import ChangedRow, ResultRows, changed_rows, result_rows
from projections.round_files import Recorded, Refusal, RoundFiles
from projections.run_loop import (
    Collector,
    CollectorExit,
    Launcher,
    RoundReport,
    RunCheck,
    run_rounds,
)
from projections.status import RunStatus, adopt_note, check_run, status
from projections.verify import Verification, verify_run

__all__ = [
    "GLOSSARY",
    "GLOSSARY_SECTIONS",
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
