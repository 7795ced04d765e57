"""CURVE: what a resume, a status and an import cost at 10k, 100k and 1M rollouts.

Not a target of the table (each row there is one ratio): a section of its
own, side by side at each size, in alternating rounds (the order rotates
from round to round, against drift), each measurement whole and in a fresh
process with its peak RSS (``bench/curve_sides.py``): ours (``resume
--dry-run`` after a kill and after a clean close, planning alone, ``status``,
``import``), real NeMo Gym 0.7.0 as shipped and lean when its venv is given
(``bench/ng070.py``), and the imitation of 0.7.0 (``bench/incumbent.py``) in
both modes. Then, once per size, whether both sides dispatch the same rollouts
(``compare_dispatch.py``). ``bench/curve_report.py`` turns it into ratios.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.curve_data import CurveRun, prepare_size
from bench.curve_sides import SIDES, CurvePoint, Where, dump_imitation, dump_ledger
from bench.ng070 import NO_VENV, VENV_ENV, Incumbent, find_venv, tools_dir
from bench.sizes import Sizes

__all__ = ["CurveResult", "SizeResult", "compare_text", "run_curve"]

Log = Callable[[str], None]
#: 0.7.0 samples a judge_failed rollout again; the ledger re-judges its kept answer.
KNOWN = "0.7.0 samples a judge_failed rollout again where the ledger re-judges it"


@dataclass
class SizeResult:
    """Every round of one size, and the comparison of what both sides dispatch."""

    rollouts: int
    rounds: list[dict[str, CurvePoint]] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    dispatch: list[str] = field(default_factory=list)
    notes: tuple[str, ...] = ()

    def points(self, side: str) -> list[CurvePoint]:
        """The side's points, in round order."""
        return [r[side] for r in self.rounds if side in r]


@dataclass
class CurveResult:
    """The curve at every size measured."""

    sizes: list[SizeResult]
    real: bool  # whether real NeMo Gym 0.7.0 ran
    absent: str = ""  # why nothing was measured

    @property
    def failed(self) -> bool:
        """Whether any measurement failed."""
        return any(s.failures for s in self.sizes)


def _rounds(sizes: Sizes, rollouts: int) -> int:
    return sizes.curve_rounds_1m if rollouts >= 1_000_000 else sizes.curve_rounds


def _round(where: Where, result: SizeResult, log: Log) -> None:
    sides = [s for s in SIDES if s.id not in result.failures | result.skipped]
    shift = where.round % len(sides) if sides else 0
    got: dict[str, CurvePoint] = {}
    for side in sides[shift:] + sides[:shift]:
        try:
            got[side.id] = side.measure(where)
        except Exception:
            result.failures[side.id] = traceback.format_exc()
            log(
                f"curve {result.rollouts} {side.id} FAILED:\n{result.failures[side.id]}"
            )
            continue
        point = got[side.id]
        log(
            f"curve {result.rollouts} round {where.round + 1} {side.id}: "
            f"{point.seconds:.3g} s, {point.peak_mib:.0f} MiB"
        )
    result.rounds.append(got)


def compare_text(summary: dict[str, Any], who: str) -> tuple[str, bool]:
    """``compare_dispatch.py``'s summary in words, and whether only ``KNOWN`` differs.

    Returns the line and whether nothing else differs.
    """
    only_inc, only_led = summary["only_incumbent"], summary["only_ledger"]
    differs = summary["attempt_differs (incumbent, ledger)"]
    rejudged = summary["only_incumbent_all_in_ledger_rejudge"]
    same = only_led == 0 and not differs and rejudged
    text = (
        f"{who} dispatches {summary['incumbent_dispatch']}, the ledger "
        f"{summary['ledger_dispatch']} and re-judges {summary['ledger_rejudge']} "
        f"({summary['ledger_held']} held); {summary['both']} both, "
        f"{summary['same_attempt_on_both']} of them at the same attempt; only "
        f"{who}: {only_inc} ({'all' if rejudged else 'NOT all'} re-judged by the "
        f"ledger); only the ledger: {only_led}"
    )
    if not same:
        text += (
            f"; by history: {json.dumps(summary['only_incumbent_by_history'])}, "
            f"{json.dumps(summary['only_ledger_by_history'])}, attempts "
            f"{json.dumps(differs)}"
        )
    verdict = "the same rollouts" if same else "NOT the same rollouts"
    return f"{verdict}, except that {KNOWN}: {text}", same


def _sorted_lines(path: Path) -> list[str]:
    return sorted(path.read_text().splitlines())


def _compare(where: Where, tools: Path) -> list[str]:
    ledger, imitation = where.scratch / "ledger.tsv", where.scratch / "imitation.tsv"
    dump_ledger(where, ledger)
    dump_imitation(where, imitation)
    real = where.scratch / "real_keys.tsv"
    lines = []
    incumbent, who = imitation, "the imitation of 0.7.0"
    if real.exists():
        same = _sorted_lines(real) == _sorted_lines(imitation)
        lines.append(
            f"the imitation dispatches {'the same' if same else 'NOT the same'} "
            "rollouts at the same attempts as real NeMo Gym 0.7.0 "
            f"({len(_sorted_lines(real))} rows)"
        )
        incumbent, who = real, "real NeMo Gym 0.7.0"
    argv = [sys.executable, str(tools / "compare_dispatch.py")]
    argv += [str(where.run.gen.parent), str(incumbent), str(ledger)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    lines.append(compare_text(json.loads(done.stdout), who)[0])
    return lines


def _size(
    rollouts: int, sizes: Sizes, workdir: Path, incumbent: Incumbent | None, log: Log
) -> SizeResult:
    result = SizeResult(rollouts)
    tools = tools_dir()
    if incumbent is None:
        result.skipped = {s.id: NO_VENV for s in SIDES if s.real}
    try:
        run: CurveRun = prepare_size(rollouts, workdir, tools, log)
    except Exception:
        result.failures["setup"] = traceback.format_exc()
        log(f"curve {rollouts} setup FAILED:\n{result.failures['setup']}")
        return result
    result.notes = run.notes
    scratch = workdir / "curve" / str(rollouts) / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    where = Where(run, tools, scratch, incumbent, sizes, 0)
    for rnd in range(_rounds(sizes, rollouts)):
        _round(Where(run, tools, scratch, incumbent, sizes, rnd), result, log)
    try:
        result.dispatch = _compare(where, tools)
    except Exception:
        result.failures["dispatch"] = traceback.format_exc()
    return result


def run_curve(
    sizes: Sizes, workdir: Path, *, venv: Path | None, log: Log
) -> CurveResult:
    """Every size of ``sizes.curve_sizes``, its rounds and its comparison."""
    tools = tools_dir()
    if not (tools / "gen_run.py").is_file():
        log(f"curve: no tools at {tools}; nothing measured")
        return CurveResult([], real=False, absent="not measured (no tools folder)")
    found = find_venv(venv)
    incumbent = Incumbent(found, tools) if found is not None else None
    named = venv or os.environ.get(VENV_ENV)
    if found is not None:
        log(f"curve: real NeMo Gym 0.7.0 from {found}")
    elif named:
        log(f"curve: no venv/bin/python and x/ under {named}: the imitation only")
    else:
        log(f"curve: no NeMo Gym 0.7.0 venv (--incumbent-venv, {VENV_ENV})")
    results = [
        _size(rollouts, sizes, workdir, incumbent, log)
        for rollouts in sizes.curve_sizes
    ]
    return CurveResult(results, real=incumbent is not None)
