"""The log and its stores: the store port, SQLite, the hash chain, a run's files."""
