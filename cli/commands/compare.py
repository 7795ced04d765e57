"""``rollout-ledger compare``: two runs side by side, as the viewer's compare page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cli.common import echo_json, json_option, reader

__all__ = ["compare"]

#: Per-task differences and changed decisions shown in the text.
SHOWN = 10
_CLASS_WORDS = {
    "semantic": "changes results",
    "operational": "operational only",
}


def _number(value: float | None) -> str:
    return "none" if value is None else f"{value:.3f}"


def _run_lines(name: str, run: Any) -> list[str]:
    header = run.header
    sampling = ", ".join(f"{k} {v}" for k, v in header.sampling.items()) or "not set"
    digest = (header.dataset_digest or "")[:12] or "unknown"
    return [
        f"{name}: {run.out}",
        f"  agent {header.agent or 'not named'}, model {header.model or 'not named'}",
        f"  dataset {header.dataset or 'not named'} "
        f"(digest {digest}), sampling {sampling}",
        f"  {run.complete} of {run.expected} rollouts complete; mean reward "
        f"{_number(run.mean)} ± {_number(run.standard_error)} over {run.n}",
    ]


def compare_lines(found: Any) -> list[str]:
    """What ``compare`` prints, and the viewer's compare page shows, in words."""
    lines = _run_lines("A", found.a) + _run_lines("B", found.b)
    diff = found.difference
    if diff.value is None:
        lines.append(f"difference of means (B - A): none ({diff.why_none})")
    else:
        low, high = diff.interval_95
        how = f"paired by task, {diff.tasks} tasks" if diff.tasks else diff.method
        lines.append(
            f"difference of means (B - A): {diff.value:+.3f} ± "
            f"{diff.standard_error:.3f} (95% interval {low:+.3f} to {high:+.3f}; {how})"
        )
    shown = [t for t in found.tasks if t.difference is not None][:SHOWN]
    if shown:
        lines.append("largest per-task differences (B - A):")
        lines += [
            f"  task {t.task}: {_number(t.mean_a)} -> {_number(t.mean_b)} "
            f"({t.difference:+.3f})"
            for t in shown
        ]
    if found.decisions_differ:
        lines.append(f"{found.decisions_differ} rollouts are decided differently:")
        lines += [
            f"  task {d.task} rollout {d.rollout}: {d.a} in A, {d.b} in B"
            for d in found.decisions[:SHOWN]
        ]
        if found.decisions_differ > SHOWN:
            lines.append(
                f"  ... and {found.decisions_differ - SHOWN} more (--json lists them)"
            )
    else:
        lines.append("every rollout both runs have is decided the same")
    if not found.comparable:
        lines.append("configuration: a run keeps no identity to compare key by key")
    elif not found.keys:
        lines.append("configuration: no key differs")
    else:
        lines.append("configuration keys that differ:")
        lines += [
            f"  {k.key} ({_CLASS_WORDS.get(k.key_class, k.key_class)}): {k.a} -> {k.b}"
            for k in found.keys
        ]
    return lines


@click.command()
@click.argument("out_a", metavar="OUT_A", type=click.Path(path_type=Path))
@click.argument("out_b", metavar="OUT_B", type=click.Path(path_type=Path))
@json_option
def compare(out_a: Path, out_b: Path, as_json: bool) -> None:
    """Compare run OUT_B with run OUT_A: figures, the difference, what differs.

    Prints what each run evaluated and its reward figures, the difference of
    the mean rewards (B minus A) with its 95% interval (paired by task where
    both runs have the task, otherwise unpaired), the tasks whose mean moved
    most, the rollouts both runs have that are decided differently, and the
    configuration keys whose values differ. Reads both runs; writes nothing.

    \b
    Example:
      rollout-ledger compare old/rollouts.jsonl \\
          new/rollouts.jsonl
    """
    import projections

    with reader(out_a) as a, reader(out_b) as b:
        found = projections.compare_runs(a, b, out_a=str(out_a), out_b=str(out_b))
    if as_json:
        echo_json({"compare": found.to_dict()})
        return
    for line in compare_lines(found):
        click.echo(line)
