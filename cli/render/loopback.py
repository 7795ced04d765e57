"""What a page served on 127.0.0.1 checks and sends: ``report --serve`` and
the viewer share it.

A server bound to loopback is still reachable from a web page the browser
loaded elsewhere, through DNS rebinding: a name the attacker controls resolves
to 127.0.0.1, and the browser sends that name as ``Host``. ``host_allowed``
answers only the names of the address being served, so such a request is
refused before anything of the run is read. ``SECURITY_HEADERS`` go with every
answer: the content security policy of a page that loads nothing from the
network, and no content sniffing.
"""

from __future__ import annotations

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "PAGE_POLICY",
    "SECURITY_HEADERS",
    "host_allowed",
]

#: The names a browser on this machine uses for 127.0.0.1.
_LOOPBACK_NAMES = ("127.0.0.1", "localhost")

#: What a page may load: its own inline styles, scripts and ``data:`` images,
#: nothing from the network, no form posts, no ``<base>``. It is the page's
#: ``<meta>`` policy too (a file opened from disk has no headers).
PAGE_POLICY = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
    "script-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
)
#: The header's policy adds what a ``<meta>`` policy cannot say: no framing.
CONTENT_SECURITY_POLICY = PAGE_POLICY + "; frame-ancestors 'none'"
SECURITY_HEADERS = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
)


def host_allowed(host_header: str | None, port: int) -> bool:
    """Whether ``Host`` names the address served: 127.0.0.1 or localhost, PORT.

    The port must be the one served (a browser leaves it out only for port
    80); no other name, no missing header.
    """
    if host_header is None:
        return False
    name, colon, given = host_header.strip().lower().rpartition(":")
    if not colon:
        name, given = given, "80"
    return name in _LOOPBACK_NAMES and given == str(port)
