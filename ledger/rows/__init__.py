"""Collector rows (rows.md): the facts read from a row, and the failure kinds."""
