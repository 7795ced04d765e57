"""``run``'s collector: started from ``-- COMMAND``, its process group followed
and stopped, and the signals ``run`` takes from its first instant.
Imports nothing here: ``early_signals`` must install before the library loads.
"""

from importlib import import_module
from typing import Any

__all__ = ["ProcessLauncher", "dies_with_parent"]

_TABLE = {
    "ProcessLauncher": "cli.launch.collector",
    "dies_with_parent": "cli.launch.collector",
}


def __getattr__(name: str) -> Any:
    if name not in _TABLE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_TABLE[name]), name)
