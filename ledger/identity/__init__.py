"""Configuration identity, credentials, drift and the manifest (identity.md)."""
