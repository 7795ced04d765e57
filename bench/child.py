"""Run one measurement in a fresh ``spawn`` child and read its peak RSS.

A spawned child imports only what its measurement needs, so its peak RSS
(the child's ``VmHWM``, or a subprocess's ``ru_maxrss``, whichever is larger)
belongs to that measurement alone.
"""

from __future__ import annotations

import multiprocessing
import resource
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from bench.context import Context, Measured, NotMeasured, Sample

__all__ = ["Failed", "Measure", "Pending", "measure_in_child"]

Measure = Callable[[Context], Measured]


class Pending(str):
    """Why a side is not measured yet (from :class:`NotMeasured`)."""


class Failed(str):
    """A measurement that raised: the child's traceback."""


def _own_peak_kib() -> int:
    # Linux carries ru_maxrss across fork and exec, so a spawned child's own
    # ru_maxrss starts at its parent's peak; VmHWM is the child's image alone.
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _peak_rss_mib() -> float:
    # A subprocess's ru_maxrss (P-6) is an upper bound: it includes this
    # child's size at the fork, for the same reason.
    ran = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(_own_peak_kib(), ran) / 1024  # KiB


def _child_main(conn: Connection, measure: Measure, ctx: Context) -> None:
    reply: tuple[str, Any]
    try:
        value, detail = measure(ctx)
        reply = ("ok", Sample(value, _peak_rss_mib(), detail))
    except NotMeasured as exc:
        reply = ("pending", str(exc))
    except BaseException:
        reply = ("failed", traceback.format_exc())
    conn.send(reply)
    conn.close()


def measure_in_child(measure: Measure, ctx: Context) -> Sample | Pending | Failed:
    """``measure(ctx)`` in a fresh spawned process."""
    spawn = multiprocessing.get_context("spawn")
    receiver, sender = spawn.Pipe(duplex=False)
    process = spawn.Process(target=_child_main, args=(sender, measure, ctx))
    process.start()
    sender.close()
    try:
        status, payload = receiver.recv()
    except EOFError:
        status, payload = "failed", "the measuring child died without a reply"
    finally:
        receiver.close()
        process.join()
    if status == "ok":
        return Sample(*payload)
    if status == "pending":
        return Pending(payload)
    return Failed(f"{payload}(exit code {process.exitcode})")
