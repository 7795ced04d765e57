"""The report's charts as inline SVG strings, made here: no script, no network.

Each function takes plain counts and returns one ``<svg>`` element (text is
escaped). Colours are ``COLORS`` (one per decision) and ``SIDE_COLORS``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from html import escape
from typing import Any

__all__ = [
    "COLORS",
    "PER_TASK_TABLE",
    "SIDES",
    "SIDE_COLORS",
    "bands_svg",
    "coverage_svg",
    "failures_svg",
    "per_task_svg",
]

COLORS = {
    "complete": "#2e8540",
    "omitted": "#9aa5b1",
    "pending": "#d9dde3",
    "retry": "#f0a202",
    "rejudge": "#7b61ff",
    "held": "#1f77b4",
    "terminal": "#c0392b",
    "exhausted": "#6d2f1f",
}
SIDES = ("model", "infrastructure", "unknown")
SIDE_COLORS = {"model": "#8e44ad", "infrastructure": "#e67e22", "unknown": "#7f8c8d"}
#: Up to this many tasks, the per-task means are a table, not a histogram.
PER_TASK_TABLE = 20
_FONT = 'font-family="sans-serif" font-size="11"'


def _svg(
    width: int, height: int, body: list[str], label: str, *, stretch: bool = False
) -> str:
    size = (
        f'width="100%" height="{height}" preserveAspectRatio="none"'
        if stretch
        else f'width="{width}" height="{height}"'
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" {size} '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}">'
        + "".join(body)
        + "</svg>"
    )


def coverage_svg(counts: Mapping[str, int], width: int = 640) -> str:
    """One stacked bar: each decision's share of the rollouts."""
    total = sum(counts.values()) or 1
    x = 0.0
    body = []
    for value, color in COLORS.items():
        n = counts.get(value, 0)
        if not n:
            continue
        w = width * n / total
        body.append(
            f'<rect x="{x:.2f}" y="0" width="{w:.2f}" height="22" fill="{color}">'
            f"<title>{escape(value)}: {n}</title></rect>"
        )
        x += w
    return _svg(width, 22, body, "rollouts by decision", stretch=True)


def bands_svg(bands: Sequence[Mapping[str, Any]], width: int = 640) -> str:
    """One bar per band of tasks, split by decision (a large run's grid)."""
    row = 4
    height = max(row * len(bands), row)
    body = []
    for i, band in enumerate(bands):
        counts: Counter[str] = band["counts"]
        total = sum(counts.values()) or 1
        x = 0.0
        for value, color in COLORS.items():
            n = counts.get(value, 0)
            if not n:
                continue
            w = width * n / total
            body.append(
                f'<rect x="{x:.2f}" y="{i * row}" width="{w:.2f}" height="{row}" '
                f'fill="{color}"/>'
            )
            x += w
        body.append(
            f"<title>tasks {band['first']} to {band['last']}</title>" if i == 0 else ""
        )
    return _svg(width, height, body, "tasks in bands, by decision", stretch=True)


def _when(at: str) -> float:
    try:
        return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def failures_svg(
    times: Sequence[tuple[str, str]], width: int = 640, bins: int = 30
) -> str:
    """Failure outcomes over time, per side, stacked in ``bins`` columns."""
    height, axis = 140, 18
    if not times:
        return _svg(width, 24, [f'<text x="0" y="16" {_FONT}>no failures</text>'], "")
    stamps = [_when(at) for at, _ in times]
    low, high = min(stamps), max(stamps)
    span = (high - low) or 1.0
    columns: list[Counter[str]] = [Counter() for _ in range(bins)]
    for stamp, (_, named) in zip(stamps, times, strict=True):
        columns[min(int((stamp - low) / span * bins), bins - 1)][named] += 1
    top = max(sum(c.values()) for c in columns) or 1
    step = width / bins
    body = []
    for i, column in enumerate(columns):
        y = float(height - axis)
        for named in SIDES:
            n = column.get(named, 0)
            if not n:
                continue
            h = (height - axis - 4) * n / top
            y -= h
            body.append(
                f'<rect x="{i * step + 1:.2f}" y="{y:.2f}" width="{step - 2:.2f}" '
                f'height="{h:.2f}" fill="{SIDE_COLORS[named]}">'
                f"<title>{n} {named}</title></rect>"
            )
    first = escape(times[0][0][:19].replace("T", " "))
    last = escape(max(times)[0][:19].replace("T", " "))
    body.append(f'<text x="0" y="{height - 4}" {_FONT}>{first}</text>')
    body.append(
        f'<text x="{width}" y="{height - 4}" text-anchor="end" {_FONT}>{last}</text>'
    )
    body.append(f'<text x="0" y="10" {_FONT}>{top} at most per column</text>')
    return _svg(width, height, body, "failures over time by side")


def per_task_svg(metrics: Mapping[str, Any] | None, width: int = 640) -> str:
    """A histogram of the per-task mean rewards (20 columns), or ``""``."""
    if not metrics:
        return ""
    means = [t["mean"] for t in metrics.get("per_task", {}).get("tasks", [])]
    if len(means) <= PER_TASK_TABLE:  # a table shows them (the template)
        return ""
    low, high = min(means), max(means)
    span = (high - low) or 1.0
    bins = 20
    counts = [0] * bins
    for m in means:
        counts[min(int((m - low) / span * bins), bins - 1)] += 1
    height, axis = 120, 18
    top = max(counts) or 1
    step = width / bins
    body = []
    for i, n in enumerate(counts):
        h = (height - axis - 4) * n / top
        body.append(
            f'<rect x="{i * step + 1:.2f}" y="{height - axis - h:.2f}" '
            f'width="{step - 2:.2f}" height="{h:.2f}" fill="#2e8540">'
            f"<title>{n} tasks</title></rect>"
        )
    body.append(f'<text x="0" y="{height - 4}" {_FONT}>{low:g}</text>')
    body.append(
        f'<text x="{width}" y="{height - 4}" text-anchor="end" {_FONT}>{high:g}</text>'
    )
    return _svg(width, height, body, "tasks by mean reward")
