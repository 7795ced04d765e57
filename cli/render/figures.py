"""The reward figures on the command line: the counting options and their output.

``status`` and ``results`` take NeMo Gym 0.7.0's two counting options
(``counting_options``); ``status`` shows the figures first (``metrics_text``)
and in ``--json`` (``metrics_json``); ``results --metrics`` never overwrites the
aggregate metrics file NeMo Gym wrote beside the run (``keep_collector_metrics``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from projections import RunStatus

__all__ = [
    "counting_options",
    "keep_collector_metrics",
    "metrics_json",
    "metrics_text",
]


def counting_options(command: Any) -> Any:
    """NeMo Gym 0.7.0's two counting options, for the reward figures."""
    command = click.option(
        "--count-missing-rollouts-as-zero",
        "missing_as_zero",
        is_flag=True,
        help="Count a rollout with no row at all as a reward of 0 in the figures.",
    )(command)
    return click.option(
        "--count-failure-classes-as-zero",
        "failures_as_zero",
        is_flag=True,
        help="Count an unfinished rollout whose newest row is a failure as a "
        "reward of 0 in the figures.",
    )(command)


def keep_collector_metrics(out: Path | str, metrics: Path | None) -> None:
    """Refuse to overwrite the aggregate metrics file NeMo Gym wrote beside OUT."""
    import ledger

    if metrics is None or "://" in str(out):
        return
    own = Path(out).with_name(f"{Path(out).stem}_aggregate_metrics.json")
    if own.exists() and own.resolve() == metrics.resolve():
        raise ledger.ConfigError(
            f"--metrics {metrics} is the aggregate metrics file NeMo Gym wrote for "
            "this run; it stays as NeMo Gym left it: name another file",
            key="metrics",
            path=metrics,
        )


def metrics_json(found: RunStatus) -> dict[str, Any] | None:
    """``status --json``'s ``metrics``: the figures, the options beside them."""
    if found.metrics is None:
        return None
    figures = found.metrics.to_dict()
    figures.pop("schema_version")  # the document's own is at its top
    return figures


def metrics_text(found: RunStatus) -> list[str]:
    """``status``'s first lines: the completion and the reward figures."""
    from projections import metrics_lines

    return [] if found.metrics is None else metrics_lines(found.metrics)
