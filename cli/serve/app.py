"""``rollout-ledger view``'s server: every page and its JSON twin (issue 27).

Routes (GET and HEAD only; anything else is refused, as is a foreign Host):

- ``/``, ``/api/runs``: the runs;
- ``/runs/ID``, ``/api/runs/ID``: one run; ``/api/runs/ID/rollouts?...`` its
  rollouts filtered, sorted and paged (``/runs/ID?fragment=rollouts``: the
  list's HTML, which the page's script swaps in while a writer works);
- ``/runs/ID/rollouts/T/R``, ``/api/runs/ID/rollouts/T/R``: one rollout
  (``?fragment=1``: the panel beside the list);
- ``/compare/A/B``, ``/api/compare/A/B``: two runs side by side;
- ``/static/view.js``, ``/static/view.css``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import click

from cli.serve.guard import HEADERS, host_allowed
from cli.serve.pages import render
from cli.serve.runs import Folded, RunSet

__all__ = ["SCHEMA_VERSION", "handler_for"]

SCHEMA_VERSION = 1
_STATIC = {"/static/view.js": "text/javascript", "/static/view.css": "text/css"}
_ROLLOUT = re.compile(r"/runs/([0-9a-zA-Z_-]{1,64})/rollouts/(\d{1,12})/(\d{1,12})")
_RUN = re.compile(r"/runs/([0-9a-zA-Z_-]{1,64})(/rollouts)?")
_COMPARE = re.compile(r"/compare/([0-9a-zA-Z_-]{1,64})/([0-9a-zA-Z_-]{1,64})")


class _Answer(Exception):
    """An answer other than a page: its status and plain words."""

    def __init__(self, status: HTTPStatus, words: str) -> None:
        super().__init__(words)
        self.status = status


def _json(value: Any) -> bytes:
    import msgspec

    return msgspec.json.encode({"schema_version": SCHEMA_VERSION, **value})


def _run(runs: RunSet, run_id: str) -> Folded:
    found = runs.by_id(run_id)
    if found is None:
        raise _Answer(HTTPStatus.NOT_FOUND, f"no run {run_id} under the folders served")
    return found


def _run_document(folded: Folded) -> dict[str, Any]:
    return {
        "run": {"id": folded.key, **folded.card.to_dict()},
        "coverage": folded.coverage.to_dict(),
        "metrics": folded.metrics.to_dict(),
        "figures": folded.lines,
        "integrity": folded.integrity,
        "workers": folded.workers,
    }


class Site:
    """Every route, as a function of the path and its query."""

    def __init__(self, runs: RunSet) -> None:
        self.runs = runs

    def answer(self, path: str, params: dict[str, str]) -> tuple[str, bytes]:
        """The content type and body for ``path``; ``_Answer`` otherwise."""
        api = path.startswith("/api/")
        route = path[4:] if api else path
        if route in ("/", "/runs") and not (api and route == "/"):
            runs = self.runs.listed()
            if api:
                listed = [{"id": r.key, **r.card.to_dict()} for r in runs]
                return "application/json", _json({"runs": listed})
            return "text/html", render("runs.html.j2", runs=runs)
        if (found := _ROLLOUT.fullmatch(route)) is not None:
            return self._rollout(api, found, params)
        if (found := _RUN.fullmatch(route)) is not None:
            return self._run(api, found, params)
        if (found := _COMPARE.fullmatch(route)) is not None:
            return self._compare(api, found[1], found[2])
        if route == "/compare" and params.get("a") and params.get("b"):
            return self._compare(api, params["a"][:64], params["b"][:64])
        raise _Answer(HTTPStatus.NOT_FOUND, f"nothing at {path}")

    def _run(
        self, api: bool, found: re.Match[str], params: dict[str, str]
    ) -> tuple[str, bytes]:
        import projections

        folded = _run(self.runs, found[1])
        asked = projections.RolloutQuery.of(params)
        said = self.runs.messages(folded) if asked.q else None
        page = projections.query_rollouts(folded.entries, asked, said, folded.counts)
        if api:
            document = page.to_dict() if found[2] else _run_document(folded)
            return "application/json", _json(document)
        if found[2]:
            raise _Answer(
                HTTPStatus.NOT_FOUND, "the rollouts are listed on the run's page"
            )
        name = "list.html.j2" if params.get("fragment") == "rollouts" else "run.html.j2"
        cover = folded.coverage
        page_html = render(name, run=folded, page=page, asked=asked, coverage=cover)
        return "text/html", page_html

    def _rollout(
        self, api: bool, found: re.Match[str], params: dict[str, str]
    ) -> tuple[str, bytes]:
        folded = _run(self.runs, found[1])
        task, rollout = int(found[2]), int(found[3])
        try:
            detail = self.runs.detail(folded, task, rollout)
        except KeyError:
            raise _Answer(
                HTTPStatus.NOT_FOUND, f"run {found[1]} has no rollout {task}/{rollout}"
            ) from None
        if api:
            return "application/json", _json({"rollout": detail.to_dict()})
        name = "panel.html.j2" if params.get("fragment") else "rollout.html.j2"
        return "text/html", render(name, run=folded, detail=detail)

    def _compare(self, api: bool, first: str, second: str) -> tuple[str, bytes]:
        import ledger
        import projections

        a, b = _run(self.runs, first), _run(self.runs, second)
        with ledger.open_run(a.target) as one, ledger.open_run(b.target) as other:
            found = projections.compare_runs(
                one,
                other,
                out_a=str(a.target),
                out_b=str(b.target),
                folded=((a.state, a.decisions), (b.state, b.decisions)),
            )
        if api:
            return "application/json", _json({"compare": found.to_dict()})
        return "text/html", render("compare.html.j2", a=a, b=b, compare=found.to_dict())


def _static(path: str) -> bytes:
    name = path.rsplit("/", 1)[1]
    return resources.files("cli").joinpath("templates", "view", name).read_bytes()


def handler_for(site: Site, port: Callable[[], int]) -> type[BaseHTTPRequestHandler]:
    """The request handler serving ``site``; ``port()`` is the port served."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "rollout-ledger"
        sys_version = ""

        def do_GET(self) -> None:
            self._serve(head=False)

        def do_HEAD(self) -> None:
            self._serve(head=True)

        def _refuse(self) -> None:
            self._send(HTTPStatus.METHOD_NOT_ALLOWED, "text/plain", b"read-only\n")

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse

        def _serve(self, *, head: bool) -> None:
            import ledger

            if not host_allowed(self.headers.get("Host"), port()):
                words = b"refused: this server answers only its own address\n"
                self._send(HTTPStatus.BAD_REQUEST, "text/plain", words)
                return
            split = urlsplit(self.path)
            params = dict(parse_qsl(split.query))
            try:
                if split.path in _STATIC:
                    kind, body = _STATIC[split.path], _static(split.path)
                else:
                    kind, body = site.answer(split.path, params)
            except _Answer as exc:
                self._send(exc.status, "text/plain", f"{exc}\n".encode())
                return
            except ledger.LedgerError as exc:  # a run that cannot be read now
                said = ledger.redact_secrets(str(exc)).encode()
                self._send(HTTPStatus.SERVICE_UNAVAILABLE, "text/plain", said)
                return
            except Exception as exc:  # a bug: one line, the page says so
                why = ledger.redact_secrets(f"{type(exc).__name__}: {exc}")
                click.echo(f"rollout-ledger view: {split.path}: {why}", err=True)
                words = b"the viewer failed on this page; its terminal says why\n"
                self._send(HTTPStatus.INTERNAL_SERVER_ERROR, "text/plain", words)
                return
            self._send(HTTPStatus.OK, kind, b"" if head else body, length=len(body))

        def _send(
            self, status: HTTPStatus, kind: str, body: bytes, *, length: int = -1
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", f"{kind}; charset=utf-8")
            self.send_header(
                "Content-Length", str(length if length >= 0 else len(body))
            )
            for name, value in HEADERS.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the address stays the last line printed

    return Handler
