"""Runs on PostgreSQL (scale.md): URLs, schema, store, advisory lock, copies."""
