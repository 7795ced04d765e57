"""The report's HTML: the context of ``projections.report_context`` through Jinja2.

The template (``cli/templates/report.html.j2``, package data) holds the page:
inline CSS, inline SVG charts made by ``projections``, the audit trails as one
JSON block and a few lines of inline script that open them. Nothing loads
from the network: the page's own Content-Security-Policy forbids it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["render_report"]


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
