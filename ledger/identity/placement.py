"""Which file of NeMo Gym's two a top-level key belongs in (CLI-2, ID-4).

A NeMo Gym user has two kinds of configuration: server configurations (the
files ``ng_run "+config_paths=[...]"`` takes, and ``env.yaml``), whose
top-level keys are server blocks (ID-4), and the collection settings
``ng_collect_rollouts`` takes. ``misplaced_in_collection`` and
``misplaced_in_servers`` name the first key of one that belongs in the other,
and what it is, so the caller can say where it goes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger.identity.servers import server_blocks

__all__ = [
    "COLLECTION_ONLY_KEYS",
    "SERVERS_ONLY_KEYS",
    "misplaced_in_collection",
    "misplaced_in_servers",
]

#: Top-level keys that are collection settings (RolloutCollectionConfig's
#: fields) and never a server's: in a server configuration they are misplaced.
#: ``responses_create_params`` and ``rollout_collection_driver`` are not among
#: them: real server and benchmark configurations carry them
#: (legal_agent_bench, gdpval).
COLLECTION_ONLY_KEYS: frozenset[str] = frozenset(
    {
        "agent_name",
        "input_jsonl_fpath",
        "output_jsonl_fpath",
        "limit",
        "num_repeats",
        "num_repeats_add_seed",
        "num_samples_in_parallel",
        "prompt_config",
        "interleave_repeats",
        "agent_map",
        "fan_out",
        "resume_from_cache",
        "require_complete",
        "retry_terminal_timeouts",
        "retry_invalid_judge_responses",
        "route_failures_to_sidecar",
        "dispatch_budget_s",
        "drain_margin_s",
        "dispatch_longest_first",
        "max_resident_rollout_tasks",
        "retain_results_in_memory",
        "count_failure_classes_as_zero",
        "count_missing_rollouts_as_zero",
    }
)
#: Top-level keys of a server configuration that a collection configuration
#: never holds (ng_run's list of files).
SERVERS_ONLY_KEYS = frozenset({"config_paths"})


def misplaced_in_collection(config: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first key of a collection configuration that is a server's, and
    what it is (``"a server block (responses_api_models)"``), or ``None``."""
    blocks = server_blocks(config)
    for key in config:
        kinds = sorted(blocks.get(key, ()))
        if kinds:
            return key, f"a server block ({', '.join(kinds)})"
        if key in SERVERS_ONLY_KEYS:
            return key, "a server configuration's list of files"
    return None


def misplaced_in_servers(config: Mapping[str, Any]) -> str | None:
    """The first key of a server configuration that is a collection setting."""
    return next((key for key in config if key in COLLECTION_ONLY_KEYS), None)
