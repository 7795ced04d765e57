"""The rollout-ledger command line: a thin click shell over the library."""

from cli.launch import early_signals

early_signals.install()  # before the rest is imported: `run`'s SIGTERM from the start

from cli.main import main  # noqa: E402

__all__ = ["main"]
