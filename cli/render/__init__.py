"""What the commands print and write: text, the report's HTML, the reward
figures' output, and a spinner.
"""

from ledger import lazy_exports

__all__ = [
    "coverage_lines",
    "plural",
    "render_report",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "coverage_lines": "cli.render.text",
        "plural": "cli.render.text",
        "render_report": "cli.render.html",
    },
)
