"""The viewer's pages: Jinja2 templates in ``cli/templates/view/``, escaped.

Every text lands through autoescaping; no page holds inline script or style
(the Content-Security-Policy allows only ``/static/``), so a text a row or
an operator wrote can never run.
"""

from __future__ import annotations

import functools
import os
from typing import Any
from urllib.parse import urlencode

__all__ = ["render"]


def _number(value: Any, places: int = 3) -> str:
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:.{places}f}"
    return str(value)


def _short(digest: Any, size: int = 12) -> str:
    return str(digest)[:size] if digest else "unknown"


def _shown(path: Any) -> str:
    """A path as a person gave it: relative to the current folder when under it."""
    text = str(path)
    if not os.path.isabs(text):
        return text
    relative = os.path.relpath(text)
    return text if relative.startswith("..") else relative


@functools.cache
def _environment() -> Any:
    from cli.render.templates import environment

    env = environment("templates/view")
    env.filters["number"] = _number
    env.filters["short"] = _short
    env.filters["shown"] = _shown
    env.filters["query"] = lambda params: urlencode(params)
    return env


def render(name: str, **context: Any) -> bytes:
    """The page ``name`` made from ``context``, as UTF-8 bytes."""
    import projections

    words = {"describe_reason": projections.describe_reason}
    page: str = _environment().get_template(name).render(**context, **words)
    return page.encode()
