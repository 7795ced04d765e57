"""The fold and its snapshots: stored events folded into a ``RunState``
(REC-1..REC-16), the snapshots that spare a replay (EV-14, P-8). Pure: reads
the log through ``ledger``, never writes; operations store the snapshots.
"""

from ledger import lazy_exports

__all__ = [
    "Replayed",
    "RunState",
    "copy_state",
    "load_open",
    "load_snapshot",
    "replay",
    "replay_counted",
    "settle",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Replayed": "projections.fold.reading",
        "RunState": "projections.fold.state",
        "copy_state": "projections.fold.snapshot",
        "load_open": "projections.fold.left",
        "load_snapshot": "projections.fold.snapshot",
        "replay": "projections.fold.reading",
        "replay_counted": "projections.fold.reading",
        "settle": "projections.fold.settled",
    },
)
