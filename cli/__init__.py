"""The rollout-ledger command line: a thin click shell over the library."""

from cli.main import main

__all__ = ["main"]
