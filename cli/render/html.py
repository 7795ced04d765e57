"""The report's HTML: the context of ``projections.report_context`` through Jinja2.

The template (``cli/templates/report.html.j2``, package data) holds the page:
inline CSS, inline SVG charts made by ``projections``, the audit trails as one
JSON block (``script_json``: no raw ``<`` in it, whatever a row held) and a few
lines of inline script that open them. Nothing loads from the network: the
page's own Content-Security-Policy forbids it. ``serve_report`` serves the page
on 127.0.0.1, made afresh on each load, to GET and HEAD requests that name the
address served (``host_allowed``), with the same policy as a header.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import click

from cli.common import reader
from cli.render.loopback import PAGE_POLICY, SECURITY_HEADERS, host_allowed
from cli.render.progress import working
from cli.render.safe_json import script_json

if TYPE_CHECKING:
    from http.server import ThreadingHTTPServer

__all__ = ["Built", "build_page", "render_report", "report_server", "serve_report"]


def render_report(context: Mapping[str, Any]) -> str:
    """The report page for ``context``, as one self-contained HTML string."""
    import markupsafe

    from cli.render.templates import environment

    env = environment("templates")
    # Every JSON block of the page goes through this filter: escaped for a
    # <script> element (script_json), and not escaped again as HTML text,
    # which a <script> element would not decode.
    env.filters["script_json"] = lambda value: markupsafe.Markup(script_json(value))
    page: str = env.get_template("report.html.j2").render(**context, policy=PAGE_POLICY)
    return page


class Built(NamedTuple):
    """A report page and what ``report --json`` says of it."""

    html: str
    rollouts: int
    complete: int
    verified: bool | None  # None: not checked (--no-verify)
    findings: int
    seq: int
    head: str
    #: Only what came after the last verify's proof was checked: its seq.
    proved_up_to: int | None = None
    checked: str | None = None  # what was checked, in words


def build_page(out: Path | str, *, verify: bool = True, quiet: bool = True) -> Built:
    """The report page of the run at ``out``.

    With ``verify``, each event is not checked again as read: verify's full
    chain check names what does not hold, in the page, as ``verify`` does.
    A spinner shows each step on a terminal's stderr unless ``quiet``.
    """
    import projections

    def step(words: str) -> contextlib.AbstractContextManager[Any]:
        return working(words, quiet=quiet)

    with reader(out, check_head=not verify) as led:
        model = projections.report_model(led, out=str(out), verify=verify, step=step)
        context = model.context
        with working("writing the report", quiet=quiet):
            html = render_report(context)
    checked = context["verify"]
    return Built(
        html=html,
        rollouts=model.rollouts,
        complete=context["headline"]["complete"],
        verified=checked["ok"],
        findings=len(checked["findings"]),
        seq=checked["seq"],
        head=checked["head"],
        proved_up_to=checked["proved_up_to"],
        checked=checked["words"],
    )


def report_server(page: Callable[[], str], port: int) -> ThreadingHTTPServer:
    """A server of ``page()`` bound to 127.0.0.1:PORT (0: any free port), not started.

    It answers GET and HEAD of ``/`` only, and only when ``Host`` names the
    address served (against DNS rebinding); every answer carries the page's
    content security policy and ``nosniff``.
    """
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def _answer(
            self,
            code: int,
            body: bytes,
            *,
            kind: str = "text/plain; charset=utf-8",
            head: bool = False,
            more: tuple[tuple[str, str], ...] = (),
        ) -> None:
            self.send_response(code)
            for name, value in (
                ("Content-Type", kind),
                ("Content-Length", str(len(body))),
                *SECURITY_HEADERS,
                *more,
            ):
                self.send_header(name, value)
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _page(self, *, head: bool) -> None:
            served = server.server_port  # the port bound, when PORT was 0
            if not host_allowed(self.headers.get("Host"), served):
                # Refused before the run is read: a page elsewhere learns nothing.
                text = f"refused: this server answers requests for 127.0.0.1:{served}"
                self._answer(400, f"{text} only\n".encode(), head=head)
                return
            if self.path not in ("/", "/index.html"):
                self._answer(404, b"not found: the report is at /\n", head=head)
                return
            import ledger

            try:
                body = page().encode()
            except ledger.LedgerError as exc:  # the run cannot be read now
                why = ledger.redact_secrets(str(exc)) + "\n"
                self._answer(503, why.encode(), head=head)
                return
            self._answer(200, body, kind="text/html; charset=utf-8", head=head)

        def do_GET(self) -> None:
            self._page(head=False)

        def do_HEAD(self) -> None:
            self._page(head=True)

        def _read_only(self) -> None:
            self.close_connection = True  # its body, if any, is never read
            body = b"only GET and HEAD: the report is read-only\n"
            self._answer(405, body, more=(("Allow", "GET, HEAD"),))

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _read_only

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per load would bury the address

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    return server


def serve_report(page: Callable[[], str], port: int) -> None:
    """Serve ``page()`` at http://127.0.0.1:PORT/ until interrupted (^C)."""
    with report_server(page, port) as server:
        click.echo(
            f"serving the report at http://127.0.0.1:{server.server_port}/ "
            "(made afresh on each load; ^C stops)",
            err=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()
