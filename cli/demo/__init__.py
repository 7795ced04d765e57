"""``rollout-ledger demo``: ``run`` around a simulated collector, and the
Python API example's collector and simulation.
"""

from cli.demo.command import demo

__all__ = ["demo"]
