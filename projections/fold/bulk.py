"""Building a state in bulk, the cyclic garbage collector paused (P-3, P-5)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic GC off while a state is built in bulk (P-3, P-5).

    Folding or loading a state creates hundreds of thousands of lists and
    dicts that all live on; each full collection would walk them again, and
    none of them is garbage. Reference counting still frees everything else.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
