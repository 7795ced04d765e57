"""``rollout-ledger report``: the run as one HTML page, offline (issue 16).

The page is built by ``cli.render.html.build_page`` from
``projections.report_context``; this module writes it (to a file replaced
only once complete: ``-o FILE``, ``<stem>_report.html`` beside ``OUT`` by
default, or stdout with ``-o -``) or serves it on 127.0.0.1.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from cli.common import echo_json, json_option, out_argument, output_option, quiet_option

__all__ = ["report"]


def _default(out: Path | str) -> Path:
    """``<stem>_report.html`` beside ``OUT`` (a run in a folder)."""
    import ledger

    if isinstance(out, str) and "://" in out:
        raise click.UsageError(
            "a run kept in a database has no folder for its report: give -o FILE "
            "(or -o - for stdout)"
        )
    target = ledger.resolve_out(str(out))
    assert isinstance(target, Path)
    return target.with_name(f"{target.stem}_report.html")


def _write(out: Path | str, path: Path | None, page: bytes) -> None:
    """``page`` to ``path`` (replaced only once written whole), or to stdout.

    ``path`` is checked first: never a file of the run, nor in its ledger folder.
    """
    import ledger

    ledger.check_outputs(out, {"-o": path})
    if path is None:
        click.echo(page, nl=False)
        return
    temporary = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        temporary.write_bytes(page)
        temporary.replace(path)
    except OSError as exc:  # no such folder, no permission, a full disk
        temporary.unlink(missing_ok=True)
        raise ledger.ConfigError(
            f"cannot write -o {path}: {exc.strerror or exc}", key="output", path=path
        ) from None


@click.command()
@out_argument
@output_option(
    "Write to FILE (default: <stem>_report.html beside OUT; - for stdout).",
    path_type=click.Path(
        dir_okay=False, writable=True, allow_dash=True, path_type=Path
    ),
)
@click.option("--no-verify", is_flag=True, help="Skip the integrity check.")
@click.option(
    "--serve",
    "port",
    type=click.IntRange(0, 65535),
    help="Serve the page on 127.0.0.1:PORT instead, made afresh on each load.",
)
@json_option
@quiet_option
def report(
    out: Path | str,
    output: Path | None,
    no_verify: bool,
    port: int | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Write the run as one HTML page that opens from disk, offline.

    The page shows what was evaluated (agent, model, dataset, sampling), how
    many rollouts are complete and the command that moves the rest, the reward
    figures, where every rollout stands (each decision in a sentence), a grid
    of tasks by rollouts whose squares open each rollout's attempts and what
    its row holds (the response, the failure and its message), failures by
    kind and side over time, held rollouts with the approve command, the
    changes made during the run, and the integrity check with the head hash.
    A large run is shown in bands of tasks, its unfinished rollouts in a list
    to filter and page. With --serve the page is served on this machine only,
    until interrupted. To browse every run, live, use rollout-ledger view.

    \b
    Example:
      rollout-ledger report results/rollouts.jsonl \\
          -o report.html
    \f
    Rules: CLI-6, CLI-8, REC-20, REC-41, EV-2.
    """
    from cli.render.html import build_page, serve_report

    if port is not None:
        if output is not None or as_json:
            raise click.UsageError("--serve shows the page itself: no -o, no --json")
        serve_report(lambda: build_page(out, verify=not no_verify).html, port)
        return
    to_stdout = output is not None and str(output) == "-"
    if as_json and to_stdout:
        raise click.UsageError("--json with -o -: stdout would hold both")
    if output is None:
        output = _default(out)
    built = build_page(out, verify=not no_verify, quiet=quiet)
    page = built.html.encode()
    _write(out, None if to_stdout else output, page)
    if as_json:
        echo_json(
            {
                "output": str(output),
                "bytes": len(page),
                "rollouts": built.rollouts,
                "complete": built.complete,
                "verified": built.verified,
                "findings": built.findings,
                "seq": built.seq,
                "verified_up_to": built.proved_up_to,
                "checked": built.checked,
                "head": built.head,
            }
        )
    elif not to_stdout:
        click.echo(f"wrote the report of {built.rollouts} rollouts to {output}")
