"""The cost curve as Markdown: the figures per size, the ratios and the limits.

Ratios are paired per round (both sides of one round), then their median and
min-max, as the targets' are. A ratio's limit holds from 100k rollouts on
(P-4 is stated at 100k and 1M); at 10k it is shown, not judged. The absolute
limits (P-8, P-9, status) are stated at 1M.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.curve import CurveResult, SizeResult
from bench.curve_sides import SIDES, CurvePoint

__all__ = ["RATIOS", "curve_lines"]

_JUDGED_FROM, _ABSOLUTE_AT = 100_000, 1_000_000


@dataclass(frozen=True)
class Ratio:
    """ours / a baseline, per round: each a side and what of it is compared."""

    what: str
    ours: tuple[str, str]  # (side id, "seconds" | "plan_s" | "peak_mib")
    baseline: tuple[str, str]
    limit: float | None


@dataclass(frozen=True)
class Limit:
    """An absolute limit on one of our figures, at 1M rollouts."""

    what: str
    side: str
    field: str
    limit: float
    unit: str


RATIOS: tuple[Ratio, ...] = (
    Ratio(
        "resume --dry-run after a kill (P-4) / real 0.7.0 as shipped, whole commands",
        ("resume-kill", "seconds"),
        ("real-shipped", "seconds"),
        0.1,
    ),
    Ratio(
        "resume --dry-run after a clean close (P-4) / real 0.7.0 as shipped, "
        "whole commands",
        ("resume-close", "seconds"),
        ("real-shipped", "seconds"),
        0.1,
    ),
    Ratio(
        "resume --dry-run with no snapshot at all / real 0.7.0 as shipped (worst "
        "case, shown)",
        ("resume-nosnap", "seconds"),
        ("real-shipped", "seconds"),
        None,
    ),
    Ratio(
        "planning alone after a kill / real 0.7.0 lean, planning alone",
        ("plan-kill", "seconds"),
        ("real-lean", "plan_s"),
        0.2,
    ),
    Ratio(
        "peak RSS, resume --dry-run after a kill (P-4) / real 0.7.0 lean",
        ("resume-kill", "peak_mib"),
        ("real-lean", "peak_mib"),
        0.1,
    ),
)

LIMITS: tuple[Limit, ...] = (
    Limit("resume --dry-run with a snapshot (P-8)", "resume-close", "seconds", 3, "s"),
    Limit(
        "resume --dry-run after a kill, half the plan done (P-8)",
        "resume-kill",
        "seconds",
        3,
        "s",
    ),
    Limit("resume, recording its release (P-8)", "resume-real", "seconds", 3, "s"),
    Limit(
        "resume after a kill, recording its release (P-8, issue 30)",
        "resume-real-kill",
        "seconds",
        3,
        "s",
    ),
    Limit("import, peak RSS (P-9)", "import", "peak_mib", 500, "MiB"),
    Limit("status with a snapshot", "status", "seconds", 1, "s"),
    # Issue 30.
    Limit("import (issue 30)", "import", "seconds", 30, "s"),
    Limit("import, peak RSS (issue 30)", "import", "peak_mib", 500, "MiB"),
    Limit("resume --dry-run with no snapshot", "resume-nosnap", "seconds", 15, "s"),
    Limit("verify, every check, every byte", "verify", "seconds", 20, "s"),
    Limit("report, the first after a verify", "report-first", "seconds", 15, "s"),
    Limit("report of a log unmoved since the last", "report-kept", "seconds", 15, "s"),
    Limit("report --no-verify, nothing kept", "report-noverify", "seconds", 5, "s"),
    Limit("the viewer's runs page, cold", "view-list", "seconds", 1, "s"),
    Limit(
        "the viewer's filtered page and one rollout, the run read",
        "view-pages",
        "seconds",
        1,
        "s",
    ),
)


def _label(rollouts: int) -> str:
    for scale, suffix in ((1_000_000, "M"), (1000, "k")):
        if rollouts >= scale and rollouts % scale == 0:
            return f"{rollouts // scale}{suffix}"
    return str(rollouts)


def _spread(values: Sequence[float], fmt: str) -> str:
    median = statistics.median(values)
    if len(values) == 1:
        return format(median, fmt)
    return f"{median:{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def _cell(size: SizeResult, side: str) -> str:
    if side in size.failures:
        return "FAILED: " + size.failures[side].strip().splitlines()[-1]
    if side in size.skipped:
        return size.skipped[side]
    points = size.points(side)
    if not points:
        return "FAILED: setup" if "setup" in size.failures else "-"
    text = f"{_spread([p.seconds for p in points], '.3g')} s"
    plans = [p.plan_s for p in points if p.plan_s is not None]
    if plans:
        text += f" (planning alone {_spread(plans, '.3g')} s)"
    return f"{text}; {max(p.peak_mib for p in points):.0f} MiB"


def _figures(result: CurveResult) -> list[str]:
    heads = [_label(s.rollouts) for s in result.sizes]
    lines = [
        "| measurement | " + " | ".join(heads) + " |",
        "|---|" + "---|" * len(heads),
    ]
    for side in SIDES:
        cells = [_cell(size, side.id) for size in result.sizes]
        lines.append(f"| {side.label} | " + " | ".join(cells) + " |")
    return lines


def _value(point: CurvePoint, name: str) -> float | None:
    value = getattr(point, name)
    return None if value is None else float(value)


def paired(size: SizeResult, ratio: Ratio) -> list[float]:
    """The ratio of every round where both sides were measured."""
    out = []
    for got in size.rounds:
        if ratio.ours[0] in got and ratio.baseline[0] in got:
            ours = _value(got[ratio.ours[0]], ratio.ours[1])
            base = _value(got[ratio.baseline[0]], ratio.baseline[1])
            if ours is not None and base:
                out.append(ours / base)
    return out


def _verdict(value: float | None, limit: float | None, judged: bool) -> str:
    if value is None or limit is None:
        return "-"
    if not judged:
        return "(shown)"
    return "yes" if value <= limit else "NO"


def _ratio_rows(result: CurveResult) -> list[str]:
    rows = []
    for ratio in RATIOS:
        for size in result.sizes:
            values = paired(size, ratio)
            shown = f"{_spread(values, '.3g')}x" if values else _missing(size, ratio)
            median = statistics.median(values) if values else None
            judged = size.rollouts >= _JUDGED_FROM
            limit = f"<= {ratio.limit:g}x" if ratio.limit is not None else "-"
            verdict = _verdict(median, ratio.limit, judged)
            rows.append(
                f"| {ratio.what} | {_label(size.rollouts)} | {shown} | {limit} "
                f"| {verdict} |"
            )
    return rows


def _missing(size: SizeResult, ratio: Ratio) -> str:
    for side in (ratio.ours[0], ratio.baseline[0]):
        if side in size.skipped:
            return size.skipped[side]
    return "-"


def _limit_rows(result: CurveResult) -> list[str]:
    rows = []
    for limit in LIMITS:
        for size in result.sizes:
            points = size.points(limit.side)
            values = [float(getattr(p, limit.field)) for p in points]
            if not values:
                continue
            figure = (
                max(values) if limit.field == "peak_mib" else statistics.median(values)
            )
            judged = size.rollouts >= _ABSOLUTE_AT
            verdict = _verdict(figure, limit.limit, judged)
            rows.append(
                f"| {limit.what} | {_label(size.rollouts)} | {figure:.3g} {limit.unit} "
                f"| <= {limit.limit:g} {limit.unit} | {verdict} |"
            )
    return rows


def _rounds(result: CurveResult) -> list[str]:
    lines = []
    for size in result.sizes:
        for side in SIDES:
            points = size.points(side.id)
            if not points:
                continue
            each = ", ".join(
                f"{p.seconds:.3g} s / {p.peak_mib:.0f} MiB" for p in points
            )
            detail = f" ({points[-1].detail})" if points[-1].detail else ""
            lines.append(f"- {_label(size.rollouts)} {side.id}: {each}{detail}")
    return lines


def curve_lines(result: CurveResult) -> list[str]:
    """The curve's section of ``RESULTS.md`` (also printed)."""
    lines = ["## Cost curve (CURVE)", ""]
    if result.absent:
        return [*lines, result.absent, ""]
    baseline = "real NeMo Gym 0.7.0" if result.real else "no 0.7.0 (no venv given)"
    lines += [
        f"Side by side per size, against {baseline} (the imitation of 0.7.0 only",
        "tells which rollouts it dispatches, below);",
        "every figure a whole measurement in a fresh process: median (min-max)",
        "over rounds, and the largest peak RSS. Whole commands include the",
        "interpreter's start and imports; planning alone is the open and the",
        "dry-run resume (ours) or 0.7.0's own planning from its configuration to",
        "its first dispatch. Ratios are paired per round; limits are judged from",
        "100k rollouts on (ratios) and at 1M (absolute figures).",
        "",
        *_figures(result),
        "",
        "| ratio or figure | rollouts | median (min-max) | limit | met |",
        "|---|---|---|---|---|",
        *_ratio_rows(result),
        *_limit_rows(result),
        "",
        "Same rollouts dispatched:",
        "",
    ]
    for size in result.sizes:
        failed = size.failures.get("dispatch", "").strip().splitlines()[-1:]
        for line in size.dispatch or [f"not compared {' '.join(failed)}".strip()]:
            lines.append(f"- {_label(size.rollouts)}: {line}")
    lines += ["", "Rounds (time / peak RSS):", "", *_rounds(result), ""]
    lines += ["Data:", ""]
    for size in result.sizes:
        lines += [f"- {_label(size.rollouts)}: {note}" for note in size.notes]
    return [*lines, ""]
