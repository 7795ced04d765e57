"""What ``rollout-ledger view`` and ``compare`` show, as values: the header of
what a run evaluated, the runs under a folder, a run's rollouts filtered, sorted
and paged, one rollout's attempts with their rows, two runs compared. Pure.
"""

from ledger import lazy_exports

__all__ = ["Evaluated", "ModelServer", "evaluated"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Evaluated": "projections.browse.header",
        "ModelServer": "projections.browse.header",
        "evaluated": "projections.browse.header",
    },
)
