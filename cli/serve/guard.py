"""What every page served on this machine sends and checks (issue 27).

A request whose ``Host`` is not the address being served is refused: a page
of another site that rebinds its name to 127.0.0.1 (DNS rebinding) cannot
read a run. Every answer carries a Content-Security-Policy that lets the
page load its own script and style only, and fetch nothing elsewhere.
"""

from __future__ import annotations

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


def host_allowed(host: str | None, port: int) -> bool:
    """Whether a request's ``Host`` names the address served (loopback, ``port``)."""
    if not host:
        return False
    return host.strip().lower() in {
        f"127.0.0.1:{port}",
        f"localhost:{port}",
        f"[::1]:{port}",
    }
