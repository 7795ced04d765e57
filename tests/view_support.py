"""A ``rollout-ledger view`` server in a thread, and requests to it (issue 27)."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from tests.internals import make_server

PAYLOAD = "<!--<script>document.title='pwned'</script>"


class Answer(NamedTuple):
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode()


class Served(NamedTuple):
    port: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str, *, host: str | None = None, method: str = "GET") -> Answer:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            headers = {"Host": host or f"127.0.0.1:{self.port}"}
            conn.request(method, path, headers=headers)
            found = conn.getresponse()
            return Answer(found.status, dict(found.getheaders()), found.read())
        finally:
            conn.close()


@contextmanager
def serving(places: Sequence[Path | str]) -> Iterator[Served]:
    """The viewer of ``places`` on a free port, stopped on exit."""
    server = make_server(places, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Served(server.server_port)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
