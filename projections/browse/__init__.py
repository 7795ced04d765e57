"""What ``rollout-ledger view`` and ``compare`` show, as values: the header of
what a run evaluated, the runs under a folder, a run's rollouts filtered, sorted
and paged, one rollout's attempts with their rows, two runs compared. Pure.
"""

from ledger import lazy_exports

__all__ = [
    "Comparison",
    "Evaluated",
    "ModelServer",
    "RolloutDetail",
    "RolloutPage",
    "RolloutQuery",
    "RunCard",
    "compare_runs",
    "entry_counts",
    "evaluated",
    "failure_messages",
    "find_runs",
    "query_rollouts",
    "rollout_detail",
    "rollout_entries",
    "run_card",
    "writer_of",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Comparison": "projections.browse.comparison",
        "compare_runs": "projections.browse.comparison",
        "Evaluated": "projections.browse.header",
        "ModelServer": "projections.browse.header",
        "RolloutDetail": "projections.browse.detail",
        "RolloutPage": "projections.browse.listing",
        "RolloutQuery": "projections.browse.listing",
        "RunCard": "projections.browse.runs",
        "entry_counts": "projections.browse.listing",
        "evaluated": "projections.browse.header",
        "failure_messages": "projections.browse.detail",
        "find_runs": "projections.browse.runs",
        "query_rollouts": "projections.browse.listing",
        "rollout_detail": "projections.browse.detail",
        "rollout_entries": "projections.browse.listing",
        "run_card": "projections.browse.runs",
        "writer_of": "projections.browse.runs",
    },
)
