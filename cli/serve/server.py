"""The viewer's HTTP server: the standard library's, threaded, on loopback.

Why not a framework: the viewer answers GET on a handful of routes, on one
machine, to one person; ``http.server``'s threaded server does that with no
dependency, and the pages are Jinja2 templates the report already uses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from http.server import ThreadingHTTPServer
from pathlib import Path

import click

from cli.serve.app import Site, handler_for
from cli.serve.runs import RunSet

__all__ = ["make_server", "serve"]


def make_server(places: Sequence[Path | str], port: int) -> ThreadingHTTPServer:
    """A server of the runs under ``places`` on 127.0.0.1:``port`` (0: any free)."""
    site = Site(RunSet(places))
    holder: list[ThreadingHTTPServer] = []
    handler = handler_for(site, lambda: holder[0].server_port)
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    holder.append(server)
    return server


def serve(places: Sequence[Path | str], port: int, *, as_json: bool = False) -> None:
    """Serve until interrupted (^C), after printing the address.

    ``as_json``: the address as one JSON document on stdout (``--json``).
    """
    with make_server(places, port) as server:
        runs = len(Site(RunSet(places)).runs.scan())
        url = f"http://127.0.0.1:{server.server_port}/"
        if as_json:
            import msgspec

            document = {"runs": runs, "schema_version": 1, "url": url}
            click.echo(msgspec.json.encode(document).decode())
        click.echo(
            f"serving {runs} run{'s' if runs != 1 else ''} at {url} "
            "(read-only; ^C stops)",
            err=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()
