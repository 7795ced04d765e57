"""Issue 27 (``VIEW``): the viewer's pages of a large run, next to ``status``.

Ours is what ``rollout-ledger view`` answers once the run is read: the runs
list, a filtered and sorted page of rollouts, and one rollout with its rows,
each a request to the server on 127.0.0.1 (HTTP included), after one first
load that folds the run (its time is in the detail). The baseline is
``status`` on the same run: replay, every decision, the coverage, the
figures. Under 1x: a page answers faster than ``status`` reads the run.
"""

from __future__ import annotations

import http.client
import json
import threading
import time

from bench.context import Context, Measured
from cli.serve import make_server

__all__ = ["get_page", "view_ours"]


def get_page(port: int, path: str) -> bytes:
    """``GET path`` from the viewer on 127.0.0.1:``port``; its body (200 only)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
        answer = conn.getresponse()
        body = answer.read()
        if answer.status != 200:
            raise RuntimeError(f"{path}: {answer.status} {body[:200]!r}")
        return body
    finally:
        conn.close()


def view_ours(ctx: Context) -> Measured:
    """Seconds for the runs list, a filtered page and one rollout (warm)."""
    assert ctx.data.resume_run is not None
    server = make_server([ctx.data.resume_run], 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_port
        started = time.perf_counter()
        runs = json.loads(get_page(port, "/api/runs"))["runs"]
        first = time.perf_counter() - started
        run = runs[0]["header"]["run_id"]
        listed = json.loads(get_page(port, f"/api/runs/{run}/rollouts?sort=-attempts"))
        chosen = listed["rollouts"][0]
        kind = next(iter(listed["by_kind"]), "")
        started = time.perf_counter()
        get_page(port, "/")
        get_page(port, f"/runs/{run}?kind={kind}&sort=-reward&page=2")
        get_page(port, f"/runs/{run}/rollouts/{chosen['task']}/{chosen['rollout']}")
        elapsed = time.perf_counter() - started
    finally:
        server.shutdown()
        server.server_close()
    detail = (
        f"{listed['total']} rollouts; the three pages together; the first load "
        f"(fold, decide, figures) {first:.2f} s"
    )
    return Measured(elapsed, detail)
