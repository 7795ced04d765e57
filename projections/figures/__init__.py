"""The reward figures (issue 16): exact sums, the figures of the selected
results, their words, and NeMo Gym's aggregate file. Pure.
"""

from ledger import lazy_exports

__all__ = [
    "AggregateMetrics",
    "MeasuredRows",
    "PassAtK",
    "RewardMetrics",
    "TaskMean",
    "measured_rows",
    "metrics_lines",
    "reward_metrics",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AggregateMetrics": "projections.figures.nemo_gym",
        "MeasuredRows": "projections.figures.nemo_gym",
        "PassAtK": "projections.figures.metrics",
        "RewardMetrics": "projections.figures.metrics",
        "TaskMean": "projections.figures.metrics",
        "measured_rows": "projections.figures.nemo_gym",
        "metrics_lines": "projections.figures.in_words",
        "reward_metrics": "projections.figures.metrics",
    },
)
