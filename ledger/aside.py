"""Work handed to a second process while this one goes on (issue 30).

Reading a large log is one core's work; a command that must read it twice
for two independent answers (``verify``'s chain and rows beside its refolds,
a dry-run resume's rows waiting to be adopted beside its replay) hands one of
them to a fresh interpreter (``spawn``: whatever threads this one runs) and
takes its answer when it needs it. The answer is the same either way: a
second process that cannot start, dies, or gives no answer (``None``) leaves
the work to ``fallback``, done here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

__all__ = ["ASIDE_FROM", "Aside", "aside_pays", "cpus"]

T = TypeVar("T")


#: A log at least this long is worth reading in a second process; below it,
#: starting an interpreter costs more than it saves.
ASIDE_FROM = 50_000


def cpus() -> int:
    """The CPUs this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


def aside_pays(events: int) -> bool:
    """Whether reading a log of ``events`` in a second process pays: a second
    CPU to run it, and a log long enough (``ASIDE_FROM``)."""
    return events >= ASIDE_FROM and cpus() > 1


class Aside(Generic[T]):
    """``fn(*args)`` running in a second process (``fn`` importable by name)."""

    def __init__(self, fn: Callable[..., T | None], *args: Any) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self._pool: ProcessPoolExecutor | None = None
        self._future: Future[T | None] | None = None
        try:
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(1, mp_context=context)
            self._future = self._pool.submit(fn, *args)
        except (OSError, RuntimeError, ValueError):  # no process to be had
            self.close()

    def result(self, fallback: Callable[[], T]) -> T:
        """The second process's answer, or ``fallback()`` where it gave none."""
        try:
            found = None if self._future is None else self._future.result()
        except (OSError, RuntimeError, EOFError, ImportError):  # a process lost
            found = None
        finally:
            self.close()
        return fallback() if found is None else found

    def close(self) -> None:
        """Let the second process go (its answer, if any, is dropped)."""
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
