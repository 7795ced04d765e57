"""``doctor``'s environment checks for one run (EV-42): a second process reads
what the first wrote, and the advice in words.
"""

from ledger.lazy import lazy_exports

__all__ = [
    "DoctorReport",
    "doctor",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "DoctorReport": "ledger.doctor.report",
        "doctor": "ledger.doctor.report",
    },
)
