"""``diff-config``: the gate's configuration comparison, without writing (CLI-11)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cli.common import config_options, load_config, load_global_config, out_argument
from cli.common import reader as open_reader

__all__ = ["diff_config"]


def _shown(identity: dict[str, Any] | None, key: str) -> str:
    import msgspec

    # Library gap: reading a dotted identity key has no public function yet.
    from ledger.normalize import get_path, has_path

    if identity is None or not has_path(identity, key):
        return "(absent)"
    # Identities are credential-safe: a credential reads "<redacted>" (ID-13).
    return msgspec.json.encode(get_path(identity, key)).decode()


def _key_lines(
    title: str, keys: tuple[str, ...], saved: Any, current: Any
) -> list[str]:
    if not keys:
        return [f"{title}: none"]
    return [f"{title}:"] + [
        f"  {key}: saved {_shown(saved, key)}, now {_shown(current, key)}"
        for key in keys
    ]


@click.command("diff-config")
@out_argument
@config_options
@click.option("--source", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def diff_config(
    out: Path, config: Path, global_configs: tuple[Path, ...], source: Path | None
) -> None:
    """Compare the current configuration with the run's (CLI-11).

    The comparison the gate makes on resume (REC-53), writing nothing: the
    semantic keys (a resume refuses) and the operational keys (a resume
    proceeds, with a warning) with saved and current values; credentials are
    shown as <redacted>.

    \b
    Example:
      rollout-ledger diff-config results/rollouts.jsonl --config collection.yaml \\
          --global-config servers.yaml
    """
    from projections import gate, replay

    # Library gap: the current manifest of a run has no public function yet.
    from projections.current import current_manifest

    collection = load_config(config)
    servers = load_global_config(global_configs)
    with open_reader(out) as led:
        state = replay(led)
        current = current_manifest(led.paths, state, collection, servers, source=source)
    verdict = gate(state, current)
    saved_digest = str(state.manifest.get("config_digest"))
    lines = [f"saved config {saved_digest[:12]}, current {current.config_digest[:12]}"]
    if saved_digest == current.config_digest:
        lines.append("no key differs")
    elif verdict.drift is not None:
        lines += _key_lines(
            "semantic", verdict.drift.semantic, state.identity, current.identity
        )
        lines += _key_lines(
            "operational", verdict.drift.operational, state.identity, current.identity
        )
    elif saved_digest != current.config_digest:
        lines.append("the run keeps no saved identity to compare key by key")
    if verdict.refusal is not None:
        keys = ", ".join(verdict.refusal.keys)
        lines.append(f"resume would refuse ({keys}); --allow-unsafe would override")
    elif verdict.adopted:
        lines.append("resume would adopt the current identity")
    else:
        lines.append("resume would proceed")
    for line in lines:
        click.echo(line)
