"""``python -m bench``: prepare the data, run every target's rounds, report."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.curve import CurveResult, run_curve
from bench.curve_report import curve_lines
from bench.datasets import prepare
from bench.ng070 import VENV_ENV
from bench.report import kept_notes, results_markdown, table
from bench.runner import Runner, run_targets
from bench.sizes import sizes_for
from bench.targets import Target, select

__all__ = ["main"]

TINY_ENV = "ROLLOUT_LEDGER_BENCH_TINY"
SEED = 20260101
CURVE = "CURVE"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Measure quality.md's performance targets (P-1..P-9) as ratios "
        "against baselines run side by side, in alternating rounds, and the cost "
        f"curve ({CURVE}) of resume, status and import at 10k, 100k and 1M "
        "rollouts against NeMo Gym 0.7.0.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smaller data (a few minutes)"
    )
    parser.add_argument(
        "--only", help=f"comma-separated target ids, e.g. P-1,P-2 (or {CURVE})"
    )
    parser.add_argument(
        "--rounds", type=int, help="rounds per target (default by mode)"
    )
    parser.add_argument("--out", type=Path, help="write the results there (Markdown)")
    parser.add_argument(
        "--workdir", type=Path, help="scratch folder (default: a temp dir)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument(
        "--incumbent-venv",
        type=Path,
        help="a folder holding NeMo Gym 0.7.0's venv/ and its unpacked wheel x/: "
        f"the curve measures the real 0.7.0 too (also env {VENV_ENV})",
    )
    parser.add_argument(
        "--curve-sizes",
        help="rollouts of the curve's runs, comma-separated "
        "(default: 10000,100000,1000000; quick: 10000)",
    )
    parser.add_argument(
        "--curve-rounds", type=int, help="rounds at every size of the curve"
    )
    # Tests only: everything shrunk so a run takes seconds (also env TINY_ENV=1).
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    return parser


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


#: What the report names a path given to these options by (issue 30: no
#: absolute path of the machine in what is committed).
_PLACEHOLDERS = {"--incumbent-venv": "NG", "--out": "FILE", "--workdir": "DIR"}


def command_line(argv: Sequence[str]) -> str:
    shown, hide = [], None
    for arg in argv:
        option, sep, _ = arg.partition("=")
        if hide is not None:
            shown.append(hide)
            hide = None
        elif sep and option in _PLACEHOLDERS:
            shown.append(f"{option}={_PLACEHOLDERS[option]}")
        else:
            shown.append(arg)
            hide = _PLACEHOLDERS.get(arg)
    return shlex.join(["python", "-m", "bench", *shown])


def _chosen(only: str | None) -> tuple[tuple[Target, ...], bool]:
    """The targets ``--only`` names, and whether it names the curve (none: all)."""
    if not only:
        return select(None), True
    names = [name.strip() for name in only.split(",") if name.strip()]
    rest = [name for name in names if name.upper() != CURVE]
    return (select(",".join(rest)) if rest else ()), len(rest) < len(names)


def _curve_sizes(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    return tuple(int(part.replace("_", "")) for part in text.split(",") if part)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the harness; the exit status is 1 when a measurement failed."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    tiny = args.tiny or bool(os.environ.get(TINY_ENV))
    try:
        sizes = sizes_for(
            quick=args.quick,
            tiny=tiny,
            rounds=args.rounds,
            curve_sizes=_curve_sizes(args.curve_sizes),
            curve_rounds=args.curve_rounds,
        )
        targets, curve = _chosen(args.only)
    except ValueError as exc:
        _parser().error(str(exc))
    started = time.perf_counter()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="rollout-ledger-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    _log(f"mode {sizes.mode}, scratch {workdir}")
    try:
        data, notes = prepare(targets, sizes, workdir, seed=SEED, log=_log)
        runner = Runner(sizes, data, workdir, SEED, _log)
        outcomes = run_targets(runner, targets)
        curved = (
            run_curve(sizes, workdir, venv=args.incumbent_venv, log=_log)
            if curve
            else None
        )
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    section = curve_lines(curved) if curved is not None else []
    if outcomes:
        print(table(outcomes))
    if section:
        print("\n" + "\n".join(section))
    if args.out is not None:
        previous = args.out.read_text() if args.out.is_file() else ""
        text = results_markdown(
            outcomes,
            mode=sizes.mode,
            command=command_line(argv),
            notes=notes,
            seconds=time.perf_counter() - started,
            kept=kept_notes(previous),
            sections=section,
        )
        args.out.write_text(text)
        _log(f"wrote {args.out}")
    failed = any(o.ours.failure or o.baseline.failure for o in outcomes)
    return 1 if failed or _failed(curved) else 0


def _failed(curved: CurveResult | None) -> bool:
    return curved is not None and curved.failed
