"""What every answer of the viewer sends, and the ``Host`` it accepts (issue 27).

A request whose ``Host`` is not the address being served is refused
(``cli.render.loopback.host_allowed``, which ``report --serve`` uses too): a
page of another site that rebinds its name to 127.0.0.1 cannot read a run.
Every answer carries a Content-Security-Policy that lets a page load its own
script and style only (the viewer's pages hold no inline code), and fetch
nothing elsewhere.
"""

from __future__ import annotations

from cli.render.loopback import host_allowed

__all__ = ["HEADERS", "host_allowed"]

#: Sent with every answer of the viewer.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; "
        "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
