"""The Jinja2 environment every page of ours is made with: autoescaped, strict.

The report (``cli/templates/``) and the viewer (``cli/templates/view/``) both
load their templates from the package, escape every value for HTML, and fail
on a name a template uses that the page does not give.
"""

from __future__ import annotations

from typing import Any

__all__ = ["environment"]


def environment(folder: str) -> Any:
    """A Jinja2 environment over ``cli/<folder>`` (package data)."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("cli", folder),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
