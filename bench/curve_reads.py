"""The curve's reads of a large run (issue 30): verify, the report, the viewer.

Each a whole measurement on the run closed cleanly (``closed/``), and
self-contained whatever the order of the round (it rotates): what it needs
first (a verify's proof, a kept page model) is made untimed before it.

- ``verify``: ``verify OUT`` (every check, every byte).
- ``report-first``: the first report after a verify: the proof's tail checked,
  the page's values computed (the kept model removed first).
- ``report-kept``: a report of a log that did not move since the last one:
  the proof's tail checked, the kept values read.
- ``report-noverify``: ``report --no-verify`` with nothing kept.
- ``view-list``: the viewer's runs page, cold (a fresh server process).
- ``view-pages``: once the run is read, a filtered page and one rollout (the
  time of the two; the first load of the run is in the detail).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from bench.commands import CommandRun, run_cli
from bench.context import Context, Measured
from bench.view_time import get_page

if TYPE_CHECKING:
    from bench.curve_sides import CurvePoint, Where

__all__ = [
    "report_first",
    "report_kept",
    "report_noverify",
    "verify_closed",
    "view_list",
    "view_pages",
]

_KEPT = "report_model.msgpack"


def _page(where: Where) -> Path:
    return where.scratch / "page.html"


def _point(done: CommandRun, detail: str = "") -> CurvePoint:
    from bench.curve_sides import CurvePoint

    return CurvePoint(done.wall_s, done.peak_mib, detail)


def _kept(out: Path) -> Path:
    return out.parent / f"{out.stem}_ledger" / _KEPT


def verify_closed(where: Where) -> CurvePoint:
    """``verify OUT``, whole."""
    out = where.run.closed
    done = run_cli(["verify", str(out), "-q"])
    return _point(done)


def report_first(where: Where) -> CurvePoint:
    """The first report after a verify (nothing kept)."""
    out = where.run.closed
    run_cli(["verify", str(out), "-q"])
    _kept(out).unlink(missing_ok=True)
    done = run_cli(["report", str(out), "-q", "-o", str(_page(where))])
    return _point(done, "after a verify; the page's values computed")


def report_kept(where: Where) -> CurvePoint:
    """A report of a log that did not move since the last report."""
    out = where.run.closed
    run_cli(["report", str(out), "-q", "-o", str(_page(where))])
    done = run_cli(["report", str(out), "-q", "-o", str(_page(where))])
    return _point(done, "the log unmoved since the last report")


def report_noverify(where: Where) -> CurvePoint:
    """``report --no-verify`` with nothing kept."""
    out = where.run.closed
    _kept(out).unlink(missing_ok=True)
    done = run_cli(["report", str(out), "-q", "--no-verify", "-o", str(_page(where))])
    return _point(done, "nothing kept: the page's values computed")


def _viewer(out: Path, pages: bool, ctx: Context) -> Measured:
    # In a spawned child: a fresh server, as `rollout-ledger view` starts one.
    import json
    import threading
    import time

    from cli.serve import make_server

    server = make_server([out], 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_port
        started = time.perf_counter()
        get_page(port, "/")
        listed = time.perf_counter() - started
        if not pages:
            return Measured(listed, "the runs page, cold")
        run = json.loads(get_page(port, "/api/runs"))["runs"][0]["id"]
        started = time.perf_counter()
        get_page(port, f"/api/runs/{run}")  # waits for the run's fold
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        get_page(port, f"/runs/{run}?kind=transient&sort=-reward&page=2")
        filtered = time.perf_counter() - started
        started = time.perf_counter()
        get_page(port, f"/runs/{run}/rollouts/7/2")
        one = time.perf_counter() - started
    finally:
        server.shutdown()
        server.server_close()
    detail = (
        f"filtered page {filtered:.3f} s, one rollout {one:.3f} s; the run's first "
        f"load (fold, decide, figures) {loaded:.2f} s after the runs page"
    )
    return Measured(filtered + one, detail)


def view_list(where: Where) -> CurvePoint:
    """The viewer's runs page, cold."""
    from bench.curve_sides import in_child

    fn = functools.partial(_viewer, where.run.closed, False)
    return in_child(fn, where)


def view_pages(where: Where) -> CurvePoint:
    """A filtered page and one rollout, once the run is read."""
    from bench.curve_sides import in_child

    fn = functools.partial(_viewer, where.run.closed, True)
    return in_child(fn, where)
