"""``rollout-ledger view``: a read-only server on 127.0.0.1 over every run found,
each view at its own URL with a JSON twin, live while a writer works.
"""

from cli.serve.app import handler_for
from cli.serve.guard import host_allowed
from cli.serve.server import make_server, serve

__all__ = ["handler_for", "host_allowed", "make_server", "serve"]
