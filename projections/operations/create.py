"""``create_run`` (CLI-2): start a run and publish its files, for every caller.

The ``create`` command and the demo both start runs here, so a new run has the
same files whoever made it: the materialized inputs, the log with
``run_created``, and every published file (manifest, identity, coverage and
the two logs) rendered from that log. The run lock is held throughout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from ledger import (
    Clock,
    Ledger,
    RecoveryPolicy,
    RunLock,
    RunManifest,
    adopted_inputs,
    check_new_run,
    creation_policy,
    read_plan_rows,
)
from projections.operations.keep import replay_kept
from projections.operations.publishing import publish

__all__ = ["CreatedRun", "create_run", "with_agent"]


class CreatedRun(msgspec.Struct, frozen=True, kw_only=True):
    """What a new run holds: its id, size, cap and configuration digest."""

    run_id: str
    rollouts: int
    tasks: int
    cap: int
    config_digest: str
    journal_mode: str
    #: Nothing was written: what ``create`` would start (its run id a sample).
    dry_run: bool = False


def with_agent(rows: Iterable[Any], config: Mapping[str, Any]) -> list[Any]:
    """CLI-2: a row without ``agent_ref`` takes the collection's ``agent_name``.

    Such a row is copied with the reference added; the others are kept as
    given (a row that is not a mapping is refused later, with its key).
    """
    agent = config.get("agent_name")
    if not isinstance(agent, str):
        return list(rows)
    return [
        {**row, "agent_ref": {"name": agent}}
        if isinstance(row, dict) and "agent_ref" not in row
        else row
        for row in rows
    ]


def create_run(
    out: Path | str,
    inputs: Path | str | Iterable[Mapping[str, Any]],
    config: Mapping[str, Any],
    global_config: Mapping[str, Any],
    *,
    source: Path | str | None = None,
    max_attempts: int | None = None,
    policy_file: Path | str | None = None,
    journal_mode: str = "wal",
    clock: Clock | None = None,
    dry_run: bool = False,
    materialized: bytes | None = None,
) -> CreatedRun:
    """Start the run at ``out`` from ``inputs`` (a JSON Lines file, or the rows).

    ``config`` and ``global_config`` are plain data with their interpolations
    unresolved (ID-2). The policy is ``policy_file``, else the owning
    launcher's, else the defaults (REC-61); ``max_attempts`` defaults to the
    environment's cap, else 3. Refuses a run that exists. ``dry_run`` makes
    every check ``create`` makes and writes nothing (no lock, no file).
    ``materialized`` are the bytes of ``inputs`` (rows) to write as they are:
    a dataset expanded as NeMo Gym writes it (``expand_dataset``).
    """
    given = read_plan_rows(inputs)[0] if isinstance(inputs, str | Path) else inputs
    clock = clock if clock is not None else Clock()

    def prepared() -> tuple[
        bytes | None, list[Mapping[str, Any]], RecoveryPolicy, RunManifest
    ]:
        # What the run's first event holds, checked alike for a dry run.
        adopted = materialized or adopted_inputs(out, inputs)
        # REC-84: adopted inputs are kept byte for byte, so their rows as they are.
        rows = list(given) if adopted is not None else with_agent(given, config)
        policy = creation_policy(out, policy_file=policy_file)
        manifest = RunManifest.create(
            source,
            rows,
            config,
            global_config,
            max_rollout_attempts=max_attempts,
            run_dir=out.parent if isinstance(out, Path) else None,
            clock=clock,
            materialized_bytes=adopted,
        )
        return adopted, rows, policy, manifest

    if dry_run:
        adopted, rows, _, manifest = prepared()
        entries = check_new_run(out, rows, materialized=adopted).entries
        return CreatedRun(
            run_id=manifest.run_id,
            rollouts=len(entries),
            tasks=len({entry[0] for entry in entries}),
            cap=manifest.max_rollout_attempts,
            config_digest=manifest.config_digest,
            journal_mode=journal_mode,
            dry_run=True,
        )
    with RunLock(out) as lock:
        adopted, rows, policy, manifest = prepared()
        with Ledger.create(
            out,
            manifest,
            rows,
            lock=lock,
            policy=policy,
            clock=clock,
            journal_mode=journal_mode,
            materialized=adopted,
        ) as led:
            state = replay_kept(led)
            publish(led, state)
    return CreatedRun(
        run_id=state.run_id,
        rollouts=state.expected,
        tasks=len(state.rollouts),
        cap=state.cap,
        config_digest=manifest.config_digest,
        journal_mode=journal_mode,
    )
