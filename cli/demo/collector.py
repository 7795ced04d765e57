"""The smallest collector through the Python API (the README's example, complete).

``rollout-ledger demo`` runs a collector that knows nothing of the ledger
(``cli/examples/simulated_collector.py``) under ``rollout-ledger run``. This one
is the other way in: a collector that calls the library itself. Run as
``python -m cli.demo.collector DIR --seed S [--die-in-wave K]`` on a folder
the demo created. It takes the run lock, opens the ledger as a writer (which
repairs what a killed predecessor left, EV-12), resumes (replay, gate, plan),
and then sends the plan through an ``AsyncRecorder``: every attempt is reserved
durably before its (simulated) request is sent, and every outcome row is
recorded after it. Re-judgments are admitted before the (simulated) judge call
and saved after.

``--die-in-wave K`` makes the process stop mid-wave, with attempts reserved and
not recorded, and wait to be killed with SIGKILL, as a real collector dies of a
walltime limit or an OOM.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

import projections
from cli.demo.simulation import judge_again, simulate
from ledger import AsyncRecorder, Ledger, RunLock
from projections import Plan

WAVE = 32  # rows sent at once, like NeMo Gym's num_samples_in_parallel


def load_configs(folder: Path) -> tuple[Any, Any]:
    """The collection and server configurations, loaded without resolving (CLI-2)."""
    return OmegaConf.load(folder / "collection.yaml"), OmegaConf.load(
        folder / "servers.yaml"
    )


async def run_one(rec: AsyncRecorder, row: dict[str, Any], seed: int) -> None:
    """Reserve, "call the agent", record: the three steps of every attempt."""
    await rec.reserve(row)  # durable before the request is sent
    await asyncio.sleep(0)  # the agent call would happen here
    await rec.record(simulate(row, seed=seed))  # the row is written, then its event


async def rejudge_one(rec: AsyncRecorder, item: Any, judge: str, seed: int) -> None:
    """Admit a re-judgment before the judge call; save its row after."""
    admission = await rec.admit_judgment(item.task, item.rollout, item.attempt, judge)
    await rec.save_judgment(
        admission, judge_again(item.task, item.rollout, item.attempt, seed=seed)
    )


async def die_mid_wave(
    rec: AsyncRecorder, wave: list[dict[str, Any]], seed: int
) -> None:
    """Reserve a wave, record half of it, then wait for SIGKILL."""
    await asyncio.gather(*(rec.reserve(row) for row in wave))
    await asyncio.gather(*(rec.record(simulate(row, seed=seed)) for row in wave[::2]))
    print("dying mid-wave", flush=True)
    time.sleep(3600)  # the demo kills this process with SIGKILL now


async def collect(
    led: Ledger, plan: Plan, judge: str, *, seed: int, die_in: int | None
) -> None:
    """Send the plan's dispatch rows in waves, then its re-judgments."""
    rec = led.recorder()
    waves = [plan.dispatch[i : i + WAVE] for i in range(0, len(plan.dispatch), WAVE)]
    for number, wave in enumerate(waves):
        if number == die_in:
            await die_mid_wave(rec, wave, seed)
        await asyncio.gather(*(run_one(rec, row, seed) for row in wave))
        print(f"wave {number} recorded", flush=True)
    await asyncio.gather(
        *(rejudge_one(rec, item, judge, seed) for item in plan.rejudge)
    )


def main(argv: list[str] | None = None) -> int:
    """Resume the demo run in ``DIR`` once and send its plan."""
    parser = argparse.ArgumentParser(prog="python -m cli.demo.collector")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--die-in-wave", type=int, default=None)
    args = parser.parse_args(argv)
    config, servers = load_configs(args.folder)
    out = args.folder / "rollouts.jsonl"
    with RunLock(out) as lock, Ledger.open(out, lock=lock) as led:
        result = projections.resume(led, config, servers, reason="demo collector")
        counts = result.plan.counts
        print(
            f"plan: dispatch {len(result.plan.dispatch)}, rejudge "
            f"{len(result.plan.rejudge)}, held {counts.get('held', 0)}",
            flush=True,
        )
        for warning in result.verdict.warnings:
            print(f"warning: {warning}", flush=True)
        judge = str(result.state.manifest["config_digest"])
        asyncio.run(
            collect(led, result.plan, judge, seed=args.seed, die_in=args.die_in_wave)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
