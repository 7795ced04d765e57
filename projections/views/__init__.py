"""The views people read: status, history, results (and their tables), the
audit export, verify, the published files' bytes, refused lines, the workers
of a run on PostgreSQL. Pure: they read, never write.
"""

from ledger import lazy_exports

__all__ = [
    "TABLE_COLUMNS",
    "AuditExport",
    "ChangedRow",
    "Finding",
    "HeldChoices",
    "History",
    "HistoryEntry",
    "NextSteps",
    "ResultRows",
    "RunStatus",
    "SelectedRow",
    "Verification",
    "WorkerSeen",
    "check_run",
    "field_value",
    "held_choices",
    "history",
    "read_status",
    "rendered_files",
    "result_rows",
    "selected_results",
    "table_records",
    "verify",
    "verify_run",
    "workers_seen",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "held_choices": "projections.views.next_steps",
        "NextSteps": "projections.views.next_steps",
        "HeldChoices": "projections.views.next_steps",
        "AuditExport": "projections.views.export",
        "ChangedRow": "projections.views.results",
        "Finding": "projections.views.checks",
        "History": "projections.views.audit_trail",
        "HistoryEntry": "projections.views.audit_trail",
        "ResultRows": "projections.views.results",
        "RunStatus": "projections.views.status",
        "SelectedRow": "projections.views.results",
        "TABLE_COLUMNS": "projections.views.tables",
        "Verification": "projections.views.checks",
        "check_run": "projections.views.status",
        "field_value": "projections.views.tables",
        "history": "projections.views.audit_trail",
        "read_status": "projections.views.status",
        "rendered_files": "projections.views.published",
        "result_rows": "projections.views.results",
        "selected_results": "projections.views.results",
        "table_records": "projections.views.tables",
        "verify": "projections.views.checks",
        "verify_run": "projections.views.checks",
        "WorkerSeen": "projections.views.workers",
        "workers_seen": "projections.views.workers",
    },
)
