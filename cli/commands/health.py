"""Commands that check a run and its environment: ``verify`` and ``doctor``."""

from __future__ import annotations

from pathlib import Path

import click

from cli.common import (
    count,
    echo_json,
    json_option,
    out_argument,
    quiet_option,
    reader,
)
from cli.render.progress import working
from cli.render.text import plural

__all__ = ["doctor", "verify"]


@click.command()
@out_argument
@click.option(
    "--jobs",
    metavar="N",
    type=count(1),
    help="1 checks everything in this process; 2 or more checks the log and its "
    "rows in a second process beside the refolds (default: 2 for a run in files "
    "of 50,000 events or more, where two CPUs are free). The findings are the "
    "same either way.",
)
@json_option
@quiet_option
def verify(out: Path | str, jobs: int | None, as_json: bool, quiet: bool) -> None:
    """Check the log, its rows and the published files.

    Recomputes the hash chain of the event log, checks every recorded row
    against its file (bytes present, sha256 equal), refolds twice from seq 1
    and compares, and compares the published files with fresh projections.
    Exit 0 when all hold, else exit 5 with each finding (first bad seq,
    changed rows with file and line, stale published files, pending repairs).
    Rows another collector appended since (NeMo Gym's own --resume, say) are
    not damage: they are listed as waiting, with the import command that
    adopts them.

    \b
    Example:
      rollout-ledger verify results/rollouts.jsonl
    \f
    Rules: CLI-9, EV-2.
    """
    import msgspec

    import ledger
    import projections

    # the full chain check names it
    with working("verifying", quiet=quiet), reader(out, check_head=False) as led:
        found, kept = projections.verify_kept(led, jobs=jobs)
        in_files = led.folder is not None
    if as_json:  # the document, then exit 5 when a finding stands
        echo_json(
            {
                "verified": not found.findings,
                "seq": found.seq,
                "head": found.head.hex(),
                "findings": [msgspec.to_builtins(f) for f in found.findings],
                "waiting": found.waiting,
                "proof": None if kept is None else str(kept),
            }
        )
    elif found.findings:
        for finding in found.findings:
            click.echo(str(finding))
        if found.waiting is not None:
            click.echo(f"waiting to be adopted (not damage): {found.waiting}")
    if found.findings:
        raise ledger.CorruptLedger(
            f"{plural(len(found.findings), 'finding')}: the run does not verify",
            path=out,
        )
    if as_json:
        return
    click.echo(f"verified: seq {found.seq}, head {found.head.hex()}")
    click.echo("the chain, the rows, two refolds and the published files hold")
    if kept is not None:
        click.echo(
            "kept what was proved: reports, status and the viewer now check only "
            "what comes after it"
        )
    elif in_files:
        click.echo(
            "could not keep what was proved (the ledger folder is not writable): "
            "reports check the run whole"
        )
    if found.waiting is not None:
        click.echo(f"waiting to be adopted (not damage): {found.waiting}")


@click.command()
@out_argument
@json_option
@quiet_option
def doctor(out: Path | str, as_json: bool, quiet: bool) -> None:
    """Check locking, SQLite and free space here.

    The run lock (flock) must hold across processes, and SQLite's WAL journal
    needs shared memory some network filesystems lack. Prints each check, who
    holds the run lock (pid, host, start) and whether that process is alive,
    and the journal mode to create runs with. Exit 5 when flock does not hold
    across processes.

    \b
    Example:
      rollout-ledger doctor results/rollouts.jsonl
    \f
    Rules: CLI-14, EV-42.
    """
    import ledger

    with working("checking", quiet=quiet):
        report = ledger.doctor(out)
    if as_json:  # the document, then exit 5 when flock is not enforced
        checks = [
            {"name": c.name, "ok": c.ok, "detail": c.detail} for c in report.checks
        ]
        echo_json(
            {
                "checks": checks,
                "journal_mode": report.journal_mode,
                "advice": report.advice,
                "flock_enforced": report.flock_enforced,
            }
        )
    else:
        for check in report.checks:
            state = "ok" if check.ok else "PROBLEM"
            click.echo(f"{check.name}: {state}: {check.detail}")
        journal = report.journal_mode or "(no ledger yet)"
        click.echo(f"journal mode: {journal}; {report.advice}")
    if not report.flock_enforced:
        raise ledger.StorageError("flock is not enforced across processes here")
