"""Runs kept in this process's memory (``memory://NAME``): fast tests."""

from ledger.lazy import lazy_exports

__all__ = [
    "MemoryHome",
    "is_memory_url",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "MemoryHome": "ledger.store.memory.runs",
        "is_memory_url": "ledger.store.memory.runs",
    },
)
