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

from bench.datasets import prepare
from bench.report import kept_notes, results_markdown, table
from bench.runner import Runner, run_targets
from bench.sizes import sizes_for
from bench.targets import select

__all__ = ["main"]

TINY_ENV = "ROLLOUT_LEDGER_BENCH_TINY"
SEED = 20260101


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Measure quality.md's performance targets (P-1..P-7) as ratios "
        "against baselines run side by side, in alternating rounds.",
    )
    parser.add_argument("--quick", action="store_true", help="smaller data (< 2 min)")
    parser.add_argument("--only", help="comma-separated target ids, e.g. P-1,P-2")
    parser.add_argument(
        "--rounds", type=int, help="rounds per target (default by mode)"
    )
    parser.add_argument("--out", type=Path, help="write the results there (Markdown)")
    parser.add_argument(
        "--workdir", type=Path, help="scratch folder (default: a temp dir)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    # Tests only: everything shrunk so a run takes seconds (also env TINY_ENV=1).
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    return parser


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _command(argv: Sequence[str]) -> str:
    return shlex.join(["python", "-m", "bench", *argv])


def main(argv: Sequence[str] | None = None) -> int:
    """Run the harness; the exit status is 1 when a measurement failed."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    tiny = args.tiny or bool(os.environ.get(TINY_ENV))
    sizes = sizes_for(quick=args.quick, tiny=tiny, rounds=args.rounds)
    try:
        targets = select(args.only)
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
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(table(outcomes))
    if args.out is not None:
        previous = args.out.read_text() if args.out.is_file() else ""
        text = results_markdown(
            outcomes,
            mode=sizes.mode,
            command=_command(argv),
            notes=notes,
            seconds=time.perf_counter() - started,
            kept=kept_notes(previous),
        )
        args.out.write_text(text)
        _log(f"wrote {args.out}")
    failed = any(o.ours.failure or o.baseline.failure for o in outcomes)
    return 1 if failed else 0
