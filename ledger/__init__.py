"""The write side of rollout-ledger: events, store, lock, files, rows, identity."""
