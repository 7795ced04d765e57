"""The figures as a table, and ``RESULTS.md`` with the machine and the command."""

from __future__ import annotations

import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from bench.runner import Outcome, Side
from bench.targets import RATE

__all__ = ["KEPT_MARKER", "kept_notes", "machine", "results_markdown", "table"]

_HEADER = (
    "| target | what (ours / baseline) | ours: median (min-max) "
    "| baseline: median (min-max) | ratio ours/baseline: median (min-max) "
    "| target | peak RSS ours / baseline | met |"
)


_METHOD = (
    "Each round measures both sides, each in a fresh spawned child process, the",
    "side that goes first alternating; the ratio is paired per round (ours /",
    "baseline of the same round), then its median and min-max over rounds.",
    "Rates are events per second (higher is better); times are wall seconds",
    "(lower is better). Peak RSS is the largest peak resident set (`VmHWM`) of",
    "any round's child, imports included (for P-6, the `--help` subprocess's",
    "`ru_maxrss`, an upper bound: see `bench/child.py`). A figure, never a",
    "timed test.",
)


def _number(value: float, unit: str) -> tuple[float, str]:
    if unit == RATE:
        for scale, suffix in ((1e6, "M"), (1e3, "k")):
            if value >= scale:
                return value / scale, f"{suffix} ev/s"
        return value, " ev/s"
    return (value * 1e3, " ms") if value < 1 else (value, " s")


def fmt(value: float, unit: str) -> str:
    """A value in its unit: ``4.41k ev/s``, ``12.3 ms``, ``1.52 s``."""
    number, suffix = _number(value, unit)
    return f"{number:.3g}{suffix}"


def _stat(values: Sequence[float], unit: str) -> str:
    # The median's scale for all three numbers: "4.41k (4.10k-5.60k) ev/s".
    number, suffix = _number(statistics.median(values), unit)
    scale = statistics.median(values) / number if number else 1.0
    low, high = min(values) / scale, max(values) / scale
    head, _, unit_text = suffix.partition(" ")
    return f"{_g(number)}{head} ({_g(low)}{head}-{_g(high)}{head}) {unit_text}"


def _g(number: float) -> str:
    # Three significant digits, never an exponent (a max may pass the median's scale).
    return f"{number:.3g}" if number < 1000 else f"{number:.0f}"


def _side(side: Side, unit: str) -> str:
    if side.pending:
        return side.pending
    if side.failure:
        return "FAILED: " + side.failure.strip().splitlines()[-1]
    values = side.values()
    return _stat(values, unit) if values else "-"


def _ratio(outcome: Outcome) -> str:
    median = outcome.median_ratio()
    if median is None:
        return "-"
    low, high = min(outcome.ratios), max(outcome.ratios)
    return f"{median:.3g}x ({low:.3g}-{high:.3g})"


def _rss(outcome: Outcome) -> str:
    ours, base = outcome.ours.peak_rss(), outcome.baseline.peak_rss()
    show = ["-" if v is None else f"{v:.0f}" for v in (ours, base)]
    return f"{show[0]} / {show[1]} MiB"


def met(outcome: Outcome) -> bool | None:
    """Whether the target holds (ratio and RSS limits); ``None``: not measured."""
    median = outcome.median_ratio()
    target = outcome.target
    if median is None or target.judged_in is not None:
        return None
    ok = median >= target.threshold if target.at_least else median <= target.threshold
    ours, base = outcome.ours.peak_rss(), outcome.baseline.peak_rss()
    if target.rss_max_mib is not None and ours is not None:
        ok = ok and ours <= target.rss_max_mib
    if target.rss_ratio_max is not None and ours is not None and base is not None:
        ok = ok and ours <= target.rss_ratio_max * base
    return ok


def _row(outcome: Outcome) -> str:
    target = outcome.target
    verdict = {None: "-", True: "yes", False: "NO"}[met(outcome)]
    cells = (
        target.id,
        target.what,
        _side(outcome.ours, target.unit),
        _side(outcome.baseline, target.unit),
        _ratio(outcome),
        target.threshold_text(),
        _rss(outcome),
        verdict,
    )
    return "| " + " | ".join(cells) + " |"


def table(outcomes: Sequence[Outcome]) -> str:
    """A Markdown table: one row per target."""
    rule = "|" + "---|" * 8
    return "\n".join([_HEADER, rule, *(_row(o) for o in outcomes)])


def _details(outcomes: Sequence[Outcome]) -> list[str]:
    lines = []
    shown: set[int] = set()  # a group's baseline is shared: listed once
    for outcome in outcomes:
        unit = outcome.target.unit
        for name, side in (("ours", outcome.ours), ("baseline", outcome.baseline)):
            if not side.samples or id(side) in shown:
                continue
            shown.add(id(side))
            rounds = ", ".join(fmt(v, unit) for v in side.values())
            detail = side.samples[-1].detail
            lines.append(f"- {outcome.target.id} {name}: {rounds} ({detail})")
    return lines


def _pending(outcomes: Sequence[Outcome]) -> list[str]:
    lines = []
    for outcome in outcomes:
        target = outcome.target
        for side, fn in (
            (outcome.ours, target.ours),
            (outcome.baseline, target.baseline),
        ):
            if side.pending:
                name = f"{fn.__module__}.{fn.__name__}"
                lines.append(f"- {target.id}: {side.pending}; fill in `{name}`")
    return lines


def _output(*argv: str) -> str:
    try:
        run = subprocess.run(argv, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return f"({argv[0]} unavailable)"
    return run.stdout.rstrip()


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def interpreter(executable: str | None = None) -> str:
    """The interpreter as the report names it: relative to the repository when
    inside it (``.venv/bin/python``), else by its file name alone, never an
    absolute path of the machine (issue 30)."""
    path = Path(sys.executable if executable is None else executable)
    root = Path(__file__).resolve().parents[1]
    try:
        return path.absolute().relative_to(root).as_posix()
    except ValueError:
        return path.name


def machine() -> list[str]:
    """The machine and software the figures were measured on."""
    return [
        f"- `nproc`: {_output('nproc')} ({_cpu()})",
        f"- Python {platform.python_version()} ({interpreter()}), "
        f"SQLite {sqlite3.sqlite_version}, msgspec {msgspec.__version__}",
        f"- {platform.system()} {platform.release()}, "
        f"scratch under `{tempfile.gettempdir()}` unless `--workdir`",
        "- load average (1, 5, 15 min) when the run ended: "
        + ", ".join(f"{load:.2f}" for load in os.getloadavg())
        + " (other work on a shared host shows here)",
        "- `free -h`:",
        "",
        "```",
        _output("free", "-h"),
        "```",
    ]


def _figures(outcomes: Sequence[Outcome], pending: Sequence[str]) -> list[str]:
    return [
        "## Figures",
        "",
        *_METHOD,
        "",
        table(outcomes),
        "",
        *(["## Not measured yet", "", *pending, ""] if pending else []),
        "## Rounds",
        "",
        *_details(outcomes),
        "",
    ]


#: Everything after this line of an existing ``RESULTS.md`` is written by hand
#: (what was profiled and fixed) and kept when the harness rewrites the file.
KEPT_MARKER = "<!-- Kept by the harness: everything below is written by hand. -->"


def kept_notes(previous: str) -> str:
    """The hand-written part of an earlier ``RESULTS.md`` (marker included), or ''."""
    _, marker, rest = previous.partition(KEPT_MARKER)
    return marker + rest if marker else ""


def results_markdown(
    outcomes: Sequence[Outcome],
    *,
    mode: str,
    command: str,
    notes: Sequence[str],
    seconds: float,
    kept: str = "",
    sections: Sequence[str] = (),
) -> str:
    """The whole ``RESULTS.md``; ``sections`` after the figures' rounds, ``kept``
    (see :func:`kept_notes`) last."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    pending = _pending(outcomes)
    lines = [
        "# Benchmark results (quality.md, P-1..P-9)",
        "",
        f"Mode **{mode}**, measured {stamp}, harness wall time {seconds:.0f} s.",
        "",
        "Command (from the repository root):",
        "",
        "```",
        command,
        "```",
        "",
        *(_figures(outcomes, pending) if outcomes else []),
        *sections,
        "## Data",
        "",
        *(f"- {note}" for note in notes),
        "",
        "## Machine",
        "",
        *machine(),
        "",
    ]
    text = "\n".join(lines)
    return f"{text}\n{kept.rstrip()}\n" if kept else text
