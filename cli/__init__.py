"""The rollout-ledger command line."""
