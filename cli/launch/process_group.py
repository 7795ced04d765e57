"""Whether a process group still has a live process, and when a process began.

Read from ``/proc`` on Linux: a group is alive while any process in it is not
a zombie (an exited worker whose new parent has not reaped it yet writes
nothing more). Elsewhere ``killpg(pgid, 0)`` answers, zombies included.
"""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

__all__ = ["group_alive", "start_time"]

_PROC = Path("/proc")


def _stat_fields(pid: int | str) -> list[str] | None:
    """``/proc/<pid>/stat`` after the command name: state is [0], pgrp [2]."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot), or ``None``."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20:
        return None
    with suppress(ValueError):
        return int(fields[19])  # field 22 of proc(5)
    return None


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` runs (one not yet a zombie)."""
    if not _PROC.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False  # no process at all: no need to read /proc
    except PermissionError:
        pass
    wanted = str(pgid)
    for entry in os.scandir(_PROC):
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(entry.name)
        if fields is not None and fields[2:3] == [wanted] and fields[0] != "Z":
            return True
    return False
