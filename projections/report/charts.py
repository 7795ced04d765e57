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
    "CHAR_WIDTH",
    "COLORS",
    "PER_TASK_TABLE",
    "SIDES",
    "SIDE_COLORS",
    "bands_svg",
    "coverage_svg",
    "failures_svg",
    "per_task_svg",
    "text_width",
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
_FONT_SIZE = 11
_FONT = f'font-family="sans-serif" font-size="{_FONT_SIZE}"'
#: A label's width per character, from above (a digit of an 11 px sans-serif
#: font is about 7 px wide): the charts keep labels off the bars with it.
CHAR_WIDTH = 7.0
_GAP = 6  # between a label and what it names


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


def text_width(text: str) -> float:
    """The width a label of the charts' font takes, estimated from above."""
    return CHAR_WIDTH * len(text)


def _text(x: float, y: float, text: str, anchor: str = "start") -> str:
    end = "" if anchor == "start" else f' text-anchor="{anchor}"'
    return f'<text x="{x:.2f}" y="{y:.2f}"{end} {_FONT}>{escape(text)}</text>'


def _count_ticks(top: int) -> list[int]:
    """0, the largest count, and a round middle when there is room for one."""
    middle = round(top / 2)
    return [0, middle, top] if 0 < middle < top and top >= 4 else [0, top]


class _Frame:
    """A chart's plot area with its axes: the y title above it, the count
    ticks in their own column left of it (as wide as the widest), the x ticks
    and the x title in their own rows below it. No label lies over a bar.

    ``first_x`` and ``last_x``: the x tick labels centred on the plot's ends,
    which the margins make room for.
    """

    def __init__(
        self,
        width: int,
        plot_height: int,
        top: int,
        y_title: str,
        *,
        first_x: str = "",
        last_x: str = "",
    ) -> None:
        self.top_count = top
        self.ticks = _count_ticks(top)
        widest = max(text_width(str(t)) for t in self.ticks)
        self.left = max(widest + 2 * _GAP, text_width(first_x) / 2 + 1)
        self.right = width - text_width(last_x) / 2 - 1
        self.plot_top = float(2 * _FONT_SIZE + _GAP)  # the y title, then half a tick
        self.bottom = self.plot_top + plot_height
        self.tick_row = self.bottom + _GAP + _FONT_SIZE + 2  # below the "0" tick
        self.title_row = self.tick_row + _GAP + _FONT_SIZE
        self.width = width
        self.height = int(self.title_row + _FONT_SIZE / 2) + 1
        self.y_title = y_title

    def y(self, count: float) -> float:
        """The y of a count on the axis."""
        return self.bottom - (self.bottom - self.plot_top) * count / (
            self.top_count or 1
        )

    def axes(
        self, x_ticks: Sequence[tuple[float, str, str]], x_title: str
    ) -> list[str]:
        """The axes, their ticks (x as ``(x, label, anchor)``) and their titles."""
        body = [
            f'<path d="M{self.left:.2f} {self.plot_top:.2f}V{self.bottom:.2f}'
            f'H{self.right:.2f}" fill="none" stroke="#444" stroke-width="1"/>',
            _text(0, _FONT_SIZE, self.y_title),
        ]
        for count in self.ticks:
            y = self.y(count)
            body.append(
                f'<path d="M{self.left - _GAP / 2:.2f} {y:.2f}H{self.left:.2f}" '
                'stroke="#444" stroke-width="1"/>'
            )
            body.append(_text(self.left - _GAP, y + _FONT_SIZE / 3, str(count), "end"))
        for x, label, anchor in x_ticks:
            body.append(
                f'<path d="M{x:.2f} {self.bottom:.2f}V{self.bottom + _GAP / 2:.2f}" '
                'stroke="#444" stroke-width="1"/>'
            )
            body.append(_text(x, self.tick_row, label, anchor))
        middle = (self.left + self.right) / 2
        body.append(_text(middle, self.title_row, x_title, "middle"))
        return body


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.3g} h"


def failures_svg(
    times: Sequence[tuple[str, str]], width: int = 640, bins: int = 30
) -> str:
    """Failure outcomes over time, per side, stacked in ``bins`` columns.

    The y axis counts failures per column (0 to the tallest), the x axis is
    time (the first and last failure, and how long a column is).
    """
    if not times:
        return _svg(width, 24, [_text(0, 16, "no failures")], "no failures")
    stamps = [_when(at) for at, _ in times]
    low, high = min(stamps), max(stamps)
    span = (high - low) or 1.0
    columns: list[Counter[str]] = [Counter() for _ in range(bins)]
    for stamp, (_, named) in zip(stamps, times, strict=True):
        columns[min(int((stamp - low) / span * bins), bins - 1)][named] += 1
    top = max(sum(c.values()) for c in columns) or 1
    frame = _Frame(width, 110, top, "failures")
    step = (frame.right - frame.left) / bins
    body = []
    for i, column in enumerate(columns):
        y = frame.bottom
        for named in SIDES:
            n = column.get(named, 0)
            if not n:
                continue
            h = frame.bottom - frame.y(n)
            y -= h
            body.append(
                f'<rect x="{frame.left + i * step + 1:.2f}" y="{y:.2f}" '
                f'width="{step - 2:.2f}" height="{h:.2f}" fill="{SIDE_COLORS[named]}">'
                f"<title>{n} {named}</title></rect>"
            )
    first = times[0][0][:19].replace("T", " ")
    last = max(times)[0][:19].replace("T", " ")
    if high > low:
        ticks = [(frame.left, first, "start"), (frame.right, last, "end")]
        title = f"time (one column: {_duration(span / bins)})"
    else:
        ticks = [(frame.left, first, "start")]
        title = "time (every failure in the same second)"
    body += frame.axes(ticks, title)
    return _svg(frame.width, frame.height, body, "failures over time by side")


def per_task_svg(metrics: Mapping[str, Any] | None, width: int = 640) -> str:
    """A histogram of the per-task mean rewards (20 columns), or ``""``.

    The x axis is the mean reward (its ends and quarters), the y axis the
    number of tasks in a column (0 to the tallest).
    """
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
    top = max(counts) or 1
    labels = [f"{low + span * q / 4:.3g}" for q in range(5)]
    frame = _Frame(width, 100, top, "tasks", first_x=labels[0], last_x=labels[-1])
    step = (frame.right - frame.left) / bins
    body = []
    for i, n in enumerate(counts):
        y = frame.y(n)
        start, end = low + span * i / bins, low + span * (i + 1) / bins
        body.append(
            f'<rect x="{frame.left + i * step + 1:.2f}" y="{y:.2f}" '
            f'width="{step - 2:.2f}" height="{frame.bottom - y:.2f}" fill="#2e8540">'
            f"<title>{n} {'task' if n == 1 else 'tasks'} with a mean reward from "
            f"{start:.3g} to {end:.3g}</title></rect>"
        )
    quarter = (frame.right - frame.left) / 4
    ticks = [
        (frame.left + quarter * q, label, "middle") for q, label in enumerate(labels)
    ]
    body += frame.axes(ticks, "mean reward of a task")
    return _svg(frame.width, frame.height, body, "tasks by mean reward")
