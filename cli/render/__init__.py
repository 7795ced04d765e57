"""What the commands print and write: text, the report's HTML, the reward
figures' output, a spinner, and the help's layout. Only the text is exported
here: the HTML loads Jinja2, which ``--help`` must not (P-6).
"""

from cli.render.text import coverage_lines, plural

__all__ = ["coverage_lines", "plural"]
