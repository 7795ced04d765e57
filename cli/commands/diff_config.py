"""``diff-config``: the gate's configuration comparison, without writing (CLI-11)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cli.common import (
    config_options,
    echo_json,
    json_option,
    load_config,
    load_global_config,
    option_file,
    out_argument,
)
from cli.common import reader as open_reader

if TYPE_CHECKING:
    from projections import ConfigDiff, GateVerdict, KeyDiff

__all__ = ["diff_config"]


def _key_lines(title: str, keys: list[KeyDiff]) -> list[str]:
    if not keys:
        return [f"{title}: none"]
    return [f"{title}:"] + [
        f"  {k.key}: saved {k.saved}, now {k.current}" for k in keys
    ]


@click.command("diff-config")
@out_argument
@config_options
@click.option("--source", type=option_file, help="The dataset the rows came from.")
@json_option
def diff_config(
    out: Path | str,
    config: Path,
    global_configs: tuple[Path, ...],
    source: Path | None,
    as_json: bool,
) -> None:
    """Compare the current configuration with the run's.

    The comparison resume makes before it runs anything, writing nothing: the
    semantic keys (a resume refuses) and the operational keys (a resume
    proceeds, with a warning) with saved and current values; credentials are
    shown as <redacted>. Exits 3 when resume would refuse, 0 otherwise.

    \b
    Example:
      rollout-ledger diff-config results/rollouts.jsonl \\
          --config collection.yaml \\
          --global-config servers.yaml
    \f
    Rules: CLI-11, REC-53.
    """
    import ledger
    import projections

    collection = load_config(config)
    servers = load_global_config(global_configs)
    with open_reader(out) as led:
        diff = projections.config_diff(led, collection, servers, source=source)
    verdict = diff.verdict
    would = _would(verdict)
    if as_json:
        echo_json(_document(diff, would))
    else:
        for line in _lines(diff, would):
            click.echo(line)
    if verdict.refusal is not None:  # a script can branch on it: exit 3
        raise click.exceptions.Exit(ledger.IdentityMismatch.exit_code)


def _would(verdict: GateVerdict) -> str:
    """What resume would do: refuse, adopt (the current identity) or proceed."""
    if verdict.refusal is not None:
        return "refuse"
    return "adopt" if verdict.adopted else "proceed"


def _document(diff: ConfigDiff, would: str) -> dict[str, Any]:
    refusal = diff.verdict.refusal
    return {
        "saved_digest": diff.saved_digest,
        "current_digest": diff.current_digest,
        "comparable": diff.comparable,
        "keys": [
            {"key": k.key, "class": k.key_class, "saved": k.saved, "current": k.current}
            for k in diff.keys
        ],
        "resume": would,
        "refused_keys": [] if refusal is None else list(refusal.keys),
    }


def _lines(diff: ConfigDiff, would: str) -> list[str]:
    verdict = diff.verdict
    lines = [
        f"saved config {diff.saved_digest[:12]}, current {diff.current_digest[:12]}"
    ]
    if diff.saved_digest == diff.current_digest:
        lines.append("no key differs")
    elif diff.comparable:
        for title in ("semantic", "operational"):
            lines += _key_lines(title, [k for k in diff.keys if k.key_class == title])
    else:
        lines.append("the run keeps no saved identity to compare key by key")
    if verdict.refusal is not None:
        keys = ", ".join(verdict.refusal.keys)
        lines.append(f"resume would refuse ({keys}); --allow-unsafe would override")
    elif would == "adopt":
        lines.append("resume would adopt the current identity")
    else:
        lines.append("resume would proceed")
    return lines
