"""One run's write path: ``Ledger``, the lock, the writer and its index, the
recorders, a plan file's rows recorded, and a run copied between homes.
"""

from ledger.lazy import lazy_exports

__all__ = [
    "AsyncRecorder",
    "Ledger",
    "Recorder",
    "RunLock",
    "WriteIndex",
    "open_run",
    "record_plan_rows",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AsyncRecorder": "ledger.run.async_recorder",
        "Ledger": "ledger.run.ledger",
        "Recorder": "ledger.run.recorder",
        "RunLock": "ledger.run.lock",
        "WriteIndex": "ledger.run.write_index",
        "open_run": "ledger.run.opening",
        "record_plan_rows": "ledger.run.plan_record",
    },
)
