"""The collector's files: following them, matching each row to its rollout,
what a crash left to repair, rows waiting to be adopted, and whether rows moved.
Uses the store and the events; never the commands above it.
"""

from ledger.lazy import lazy_exports

__all__ = [
    "FollowedFile",
    "PendingRepair",
    "Unrecorded",
    "Waiting",
    "adopt_advice",
    "derived_rollout_id",
    "group_waiting",
    "identify_row",
    "rows_untouched",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "FollowedFile": "ledger.collector_files.follow",
        "PendingRepair": "ledger.collector_files.repair",
        "Unrecorded": "ledger.collector_files.repair",
        "Waiting": "ledger.collector_files.waiting",
        "adopt_advice": "ledger.collector_files.waiting",
        "derived_rollout_id": "ledger.collector_files.identify",
        "group_waiting": "ledger.collector_files.waiting",
        "identify_row": "ledger.collector_files.identify",
        "rows_untouched": "ledger.collector_files.rows_seen",
    },
)
