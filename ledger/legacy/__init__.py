"""Importing a run saved without a ledger (REC-70..REC-74)."""
