"""``rollout-ledger demo``: ``run`` around a simulated collector, and the
Python API example's collector and simulation.
"""

from ledger import lazy_exports

__all__ = [
    "demo",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "demo": "cli.demo.command",
    },
)
