"""The operations that change a run: create, resume, record a plan file,
import and adopt, approve / policy / budget / extend, the ``run`` loop and its
rounds, a PostgreSQL run's coordinator and workers, publish, and the snapshots
a writer keeps. Uses the read rooms.
"""

from ledger import lazy_exports

__all__ = [
    "Approval",
    "CoordinatorReport",
    "CreatedRun",
    "ImportResult",
    "Launcher",
    "Resume",
    "RoundProgress",
    "RoundReport",
    "WorkerReport",
    "approve_held",
    "coordinate",
    "create_run",
    "expand_dataset",
    "import_run",
    "next_round_files",
    "note_commands",
    "publish",
    "record_outcomes",
    "replan",
    "replay_kept",
    "resume",
    "resume_with_plan_file",
    "run_rounds",
    "set_policy",
    "status",
    "work_batches",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "note_commands": "projections.operations.keep",
        "Approval": "projections.operations.operator",
        "CoordinatorReport": "projections.operations.coordinator",
        "CreatedRun": "projections.operations.create",
        "WorkerReport": "projections.operations.work",
        "coordinate": "projections.operations.coordinator",
        "work_batches": "projections.operations.work",
        "ImportResult": "projections.operations.importing",
        "Launcher": "projections.operations.run_loop",
        "Resume": "projections.operations.resuming",
        "RoundProgress": "projections.operations.run_loop",
        "RoundReport": "projections.operations.run_loop",
        "approve_held": "projections.operations.operator",
        "create_run": "projections.operations.create",
        "expand_dataset": "projections.operations.dataset",
        "import_run": "projections.operations.importing",
        "next_round_files": "projections.operations.round_files",
        "publish": "projections.operations.publishing",
        "record_outcomes": "projections.operations.plan_file",
        "replan": "projections.operations.release",
        "replay_kept": "projections.operations.keep",
        "resume": "projections.operations.resuming",
        "resume_with_plan_file": "projections.operations.plan_file",
        "run_rounds": "projections.operations.run_loop",
        "set_policy": "projections.operations.settings",
        "status": "projections.operations.publishing",
    },
)
