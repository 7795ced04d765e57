"""Manifests for the runs the harness builds.

``BenchManifest`` is the least ``Ledger.create`` needs (copied from
``tests/conftest.py``'s ``MinimalManifest`` so the harness never imports the
tests): P-1, P-2 and P-7 append to runs made with it. The runs P-3, P-4 and
P-5 replay and resume carry a real :class:`ledger.RunManifest` of a fixed
NeMo Gym-like configuration (the demo's, ``cli/demo/command.py``), so the resume gate
passes on them as it does on a real run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ledger.files import publish_json
from ledger.jsonl import encode_rows

__all__ = [
    "AGENT_REF",
    "CONFIG_DIGEST",
    "RUN_ID",
    "BenchManifest",
    "collection_config",
    "run_manifest",
    "servers_config",
]

RUN_ID = "0" * 32
CONFIG_DIGEST = "c" * 64
#: The agent every row of a built run names (the configuration defines it).
AGENT_REF = {"type": "responses_api_agents", "name": "math_agent"}


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


def collection_config() -> dict[str, Any]:
    """The collection configuration (``ng_collect_rollouts``' own settings)."""
    return {
        "agent_name": "math_agent",
        "input_jsonl_fpath": "data/problems.jsonl",
        "output_jsonl_fpath": "rollouts.jsonl",
        "num_repeats": 4,
        "num_samples_in_parallel": 64,
        "responses_create_params": {
            "temperature": 0.6,
            "top_p": 0.95,
            "max_output_tokens": 4096,
        },
    }


def servers_config() -> dict[str, Any]:
    """The merged global configuration: the servers the rows' agent reaches."""
    return {
        "policy_base_url": "http://127.0.0.1:8000/v1",
        "policy_api_key": "sk-bench-not-a-real-key",
        "policy_model_name": "bench/policy",
        "policy_model": {
            "responses_api_models": {
                "vllm_model": {
                    "entrypoint": "app.py",
                    "host": "127.0.0.1",
                    "port": 40001,
                    "base_url": "${policy_base_url}",
                    "api_key": "${policy_api_key}",
                    "model": "${policy_model_name}",
                }
            }
        },
        "judge_model": {
            "responses_api_models": {
                "openai_model": {
                    "entrypoint": "app.py",
                    "openai_base_url": "http://127.0.0.1:8001/v1",
                    "openai_api_key": "sk-bench-judge",
                    "openai_model": "bench/judge",
                    "request_timeout_s": 120,
                }
            }
        },
        "math_with_judge": {
            "resources_servers": {
                "math_with_judge": {
                    "entrypoint": "app.py",
                    "judge_model_server": {
                        "type": "responses_api_models",
                        "name": "judge_model",
                    },
                    "should_use_judge": True,
                }
            }
        },
        "math_agent": {
            "responses_api_agents": {
                "simple_agent": {
                    "entrypoint": "app.py",
                    "resources_server": {
                        "type": "resources_servers",
                        "name": "math_with_judge",
                    },
                    "model_server": {
                        "type": "responses_api_models",
                        "name": "policy_model",
                    },
                }
            }
        },
    }


def run_manifest(rows: list[dict[str, Any]], *, seed: int) -> Any:
    """A real ``RunManifest`` of the fixed configuration (deterministic for a seed)."""
    from ledger import RunManifest
    from ledger.clock import Clock

    return RunManifest.create(
        None,
        rows,
        collection_config(),
        servers_config(),
        max_rollout_attempts=3,
        clock=Clock(seed=seed),
    )
