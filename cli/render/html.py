"""The report's HTML: the context of ``projections.report_context`` through Jinja2.

The template (``cli/templates/report.html.j2``, package data) holds the page:
inline CSS, inline SVG charts made by ``projections``, the audit trails as one
JSON block and a few lines of inline script that open them. Nothing loads
from the network: the page's own Content-Security-Policy forbids it.
``serve_report`` serves the page on 127.0.0.1, made afresh on each load.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import click

from cli.common import reader
from cli.render.progress import working

__all__ = ["Built", "build_page", "render_report", "serve_report"]


def render_report(context: Mapping[str, Any]) -> str:
    """The report page for ``context``, as one self-contained HTML string."""
    import jinja2
    import msgspec

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("cli", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # Inside <script>: "</" must not close the element, whatever a row held.
    trails = msgspec.json.encode(context["trails"]).decode().replace("</", "<\\/")
    page = env.get_template("report.html.j2").render(**context, trails_json=trails)
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


def build_page(out: Path | str, *, verify: bool = True, quiet: bool = True) -> Built:
    """The report page of the run at ``out``.

    With ``verify``, each event is not checked again as read: verify's full
    chain check names what does not hold, in the page, as ``verify`` does.
    A spinner shows each step on a terminal's stderr unless ``quiet``.
    """
    import projections

    with reader(out, check_head=not verify) as led:
        with working("reading the run", quiet=quiet):
            state = projections.replay(led)
            decisions = projections.decide_all(state)
        verification = None
        if verify:
            with working("verifying", quiet=quiet):
                verification = projections.verify_run(led)
        with working("writing the report", quiet=quiet):
            metrics = projections.reward_metrics(led, state, decisions=decisions)
            context = projections.report_context(
                state,
                led.events(1),
                decisions,
                out=str(out),
                verification=verification,
                metrics=metrics.to_dict(),
            )
            html = render_report(context)
    checked = context["verify"]
    return Built(
        html=html,
        rollouts=state.expected,
        complete=context["headline"]["complete"],
        verified=checked["ok"],
        findings=len(checked["findings"]),
        seq=checked["seq"],
        head=checked["head"],
    )


def serve_report(page: Callable[[], str], port: int) -> None:
    """Serve ``page()`` at http://127.0.0.1:PORT/ until interrupted (^C)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path not in ("/", "/index.html"):
                self.send_error(404)
                return
            import ledger

            try:
                body = page().encode()
            except ledger.LedgerError as exc:  # the run cannot be read now
                self.send_error(503, explain=ledger.redact_secrets(str(exc)))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per load would bury the address

    with ThreadingHTTPServer(("127.0.0.1", port), Handler) as server:
        click.echo(
            f"serving the report at http://127.0.0.1:{server.server_port}/ "
            "(made afresh on each load; ^C stops)",
            err=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()
