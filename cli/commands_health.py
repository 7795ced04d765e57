"""Commands that check a run and its environment: ``verify`` and ``doctor``."""

from __future__ import annotations

from pathlib import Path

import click

from cli.common import out_argument, reader

__all__ = ["doctor", "verify"]


@click.command()
@out_argument
def verify(out: Path) -> None:
    """Check the chain, rows, refolds and published files (CLI-9).

    Recomputes the chain (EV-2), checks every recorded row against its file
    (bytes present, sha256 equal), refolds twice from seq 1 and compares, and
    compares the published files with fresh projections. Exit 0 when all hold,
    else exit 5 with each finding (first bad seq, changed rows with file and
    line, stale published files, pending repairs).

    \b
    Example:
      rollout-ledger verify results/rollouts.jsonl
    """
    from ledger import CorruptLedger
    from projections import verify as verify_run

    with reader(out, check_head=False) as led:  # the full chain check names it
        findings = verify_run(led)
        seq, digest = led.head()
    if findings:
        for finding in findings:
            click.echo(str(finding))
        raise CorruptLedger(
            f"{len(findings)} findings: the run does not verify", path=out
        )
    click.echo(f"verified: seq {seq}, head {digest.hex()}")
    click.echo("the chain, the rows, two refolds and the published files hold")


def _journal_advice(mode: str | None, wal_ok: bool) -> str:
    if mode is None:
        return (
            "create runs here with --journal-mode wal"
            if wal_ok
            else "create runs here with --journal-mode delete (WAL is unsafe here)"
        )
    if mode == "wal" and not wal_ok:
        return (
            "this run uses WAL where it is unsafe: keep one writer node and no "
            "readers elsewhere, or create new runs with --journal-mode delete"
        )
    return f"{mode} suits this filesystem"


def _doctor_store(url: str) -> None:
    # EV-42's checks are about a filesystem; a run on PostgreSQL has none.
    with reader(url) as led:
        seq = led.head()[0]
        holder = led.lock_holder()
    click.echo(f"store: ok: {url} answers; the run holds {seq} events")
    click.echo(
        "durability: ok: an append returns once the server's commit is flushed "
        "(synchronous_commit = on)"
    )
    lock = f"held by {holder}" if holder else "free"
    click.echo(f"run lock: ok: {lock} (a session advisory lock, SC-4)")
    click.echo("journal mode: postgresql; flock and WAL checks do not apply here")


@click.command()
@out_argument
def doctor(out: Path) -> None:
    """Check flock, WAL safety and free space here (CLI-14).

    EV-42: flock must hold across processes and SQLite's WAL needs shared
    memory some network filesystems lack. Prints each check, the run lock's
    holder (pid, host, start) and whether it is alive, and the journal-mode
    advice. Exit 5 when flock is not enforced here.

    \b
    Example:
      rollout-ledger doctor results/rollouts.jsonl
    """
    from ledger import ConfigError, LedgerError
    from ledger.paths import RunPaths  # library gap: RunPaths is not exported
    from ledger.run.doctor import (
        flock_check,
        free_space_check,
        lock_holder_check,
        wal_check,
    )

    if isinstance(out, str):  # a run on PostgreSQL (SC-1)
        _doctor_store(out)
        return
    paths = RunPaths.of(out)
    if not paths.folder.is_dir():
        raise ConfigError(f"the run folder {paths.folder} does not exist")
    mode = head = None
    if paths.db.exists():
        with reader(out) as led:
            mode, head = led.journal_mode, led.head()[0]
    probe_dir = paths.ledger_dir if paths.ledger_dir.is_dir() else paths.folder
    checks = [
        flock_check(probe_dir),
        wal_check(out, probe_dir, head),
        free_space_check(probe_dir),
        lock_holder_check(paths.lock),
    ]
    for check in checks:
        click.echo(f"{check.name}: {'ok' if check.ok else 'PROBLEM'}: {check.detail}")
    click.echo(
        f"journal mode: {mode or '(no ledger yet)'}; "
        f"{_journal_advice(mode, checks[1].ok)}"
    )
    if not checks[0].ok:
        raise LedgerError("flock is not enforced across processes here")
