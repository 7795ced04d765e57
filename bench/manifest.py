"""A stand-in manifest for ``Ledger.create`` until ``RunManifest`` lands.

Copied from ``tests/conftest.py`` (``MinimalManifest``) so the harness never
imports the tests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ledger.files import publish_json
from ledger.jsonl import encode_rows

__all__ = ["CONFIG_DIGEST", "RUN_ID", "BenchManifest"]

RUN_ID = "0" * 32
CONFIG_DIGEST = "c" * 64


class BenchManifest:
    """The least ``Ledger.create`` needs of a manifest (ID-30 fields)."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.materialized_digest = hashlib.sha256(encode_rows(rows)).hexdigest()
        self.identity: Mapping[str, Any] | None = {"model": "bench"}
        self._fields = {
            "run_id": RUN_ID,
            "created_at": "2026-01-01T00:00:00.000000Z",
            "materialized_digest": self.materialized_digest,
            "config_digest": CONFIG_DIGEST,
            "max_rollout_attempts": 3,
        }

    def model_dump(self, *, mode: str = "json") -> dict[str, Any]:
        """The manifest's fields, as ``RunManifest.model_dump`` gives them."""
        return dict(self._fields)

    def write(self, path: Path) -> None:
        """Publish the manifest and its identity beside the ledger."""
        publish_json(path, self._fields)
        publish_json(path.with_name("identity.json"), self.identity)
