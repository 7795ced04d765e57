"""The read side of rollout-ledger: pure folds of the event log into views."""
