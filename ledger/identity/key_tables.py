"""The word tables of configuration identity, as data in one module (ID-11, ID-21).

Every rule that looks at a key's name reads its words from here: which names are
credentials (ID-11), which interpolations are connection references (ID-5), which
settings are a server's placement (ID-7) or name a file (ID-9), which settings
reference another server (ID-3), and which dotted keys are operational rather
than semantic (ID-21). Words are compared after
:func:`ledger.identity.key_words.key_words`;
a "segment" is compared in the ``_``-joined word form of
:func:`ledger.identity.key_words.segment_form` (``baseUrl`` is ``base_url``).
"""

from __future__ import annotations

__all__ = [
    "CREDENTIAL_FRAGMENTS",
    "ENVIRONMENT_KIND",
    "FILE_SUFFIXES",
    "FILE_VALUE_MAX_BYTES",
    "OPERATIONAL_FIRST_WORDS",
    "OPERATIONAL_LAST_WORDS",
    "OPERATIONAL_SEGMENTS",
    "OPERATIONAL_WORDS",
    "PLACEMENT_KEYS",
    "REDACTED",
    "REFERENCE_KEYS",
    "ROUTE_KEYS",
    "ROUTE_KINDS",
    "RUNTIME_NAMES",
    "RUNTIME_SUFFIXES",
    "SERVER_KINDS",
    "TOKEN_QUALIFIERS",
]

#: The fixed marker every credential is replaced by (ID-10).
REDACTED = "<redacted>"

# --- ID-11: credential-named keys -------------------------------------------

#: A key is credential-named when its normalized form contains one of these.
CREDENTIAL_FRAGMENTS: tuple[str, ...] = (
    "apikey",
    "password",
    "passwd",
    "secret",
    "credential",
    "privatekey",
    "accesskey",
    "authorization",
    "cookie",
)

#: A last word ``token`` preceded by one of these names a vocabulary token or a
#: rate (``eos_token``, ``input_cost_per_token``), not a credential.
TOKEN_QUALIFIERS: frozenset[str] = frozenset(
    {
        "eos",
        "bos",
        "pad",
        "unk",
        "sep",
        "cls",
        "mask",
        "stop",
        "start",
        "end",
        "special",
        "abstention",
        "image",
        "video",
        "audio",
        "think",
        "reasoning",
        "tool",
        "eot",
        "placeholder",
        "separator",
        "per",
        "max",
        "num",
    }
)

# --- ID-5: connection references --------------------------------------------

#: Interpolated names (or last dotted segments) that are runtime settings.
RUNTIME_NAMES: frozenset[str] = frozenset({"host", "port", "base_url"})
#: ... and the endings that make a name one.
RUNTIME_SUFFIXES: tuple[str, ...] = ("_host", "_port", "_base_url", "_url", "_endpoint")

# --- ID-3, ID-4, ID-7: servers -------------------------------------------------

#: The kinds a server block maps to implementations (ID-4).
SERVER_KINDS: frozenset[str] = frozenset(
    {
        "responses_api_models",
        "resources_servers",
        "responses_api_agents",
        "environment_servers",
    }
)
#: Settings whose ``{name: <server>}`` mapping references another server (ID-3).
REFERENCE_KEYS: frozenset[str] = frozenset(
    {
        "model_server",
        "resources_server",
        "judge_model_server",
        "agent_server",
        "environment_server",
    }
)
#: The reference settings and server kinds that route rows (ID-41): an
#: environment server referencing a reached server this way is reached too,
#: since rows go through it. A shared ``model_server`` routes nothing.
ROUTE_KEYS: frozenset[str] = frozenset({"agent_server", "environment_server"})
ROUTE_KINDS: frozenset[str] = frozenset({"responses_api_agents", "environment_servers"})
#: The kind whose servers rows are routed through (ID-41).
ENVIRONMENT_KIND = "environment_servers"
#: A server block's placement, filled afresh by the launcher on every start (ID-7).
PLACEMENT_KEYS: frozenset[str] = frozenset({"host", "port"})

# --- ID-9: file-valued settings -------------------------------------------------

#: Key endings of settings whose value may name a file.
FILE_SUFFIXES: tuple[str, ...] = ("_fpath", "_path", "_file")
#: Files up to this size are digested; larger ones are recorded by size.
FILE_VALUE_MAX_BYTES = 16 * 1024 * 1024

# --- ID-21: operational settings --------------------------------------------------

#: Any word of any segment: timeouts and deadlines, retries, concurrency, health.
OPERATIONAL_WORDS: frozenset[str] = frozenset(
    {
        "timeout",
        "timeouts",
        "deadline",
        "retry",
        "retries",
        "backoff",
        "concurrency",
        "health",
        "healthcheck",
        "readiness",
    }
)
#: The last word of any segment: transport and paths.
OPERATIONAL_LAST_WORDS: frozenset[str] = frozenset(
    {"host", "port", "url", "endpoint", "ports", "dir"}
)
#: The first word of any segment: tracking (``logprobs`` is one word, so stays).
OPERATIONAL_FIRST_WORDS: frozenset[str] = frozenset(
    {"log", "logs", "logging", "wandb", "mlflow"}
)
#: Whole segments: transport, concurrency, tracking and collection control.
OPERATIONAL_SEGMENTS: frozenset[str] = frozenset(
    {
        # transport
        "host",
        "port",
        "base_url",
        "endpoint",
        "proxy",
        "use_absolute_ip",
        "head_server",
        "disallowed_ports",
        "ray_head_node_address",
        "tensor_parallel_size",
        # concurrency
        "num_samples_in_parallel",
        "num_workers",
        "max_resident_rollout_tasks",
        # tracking
        "verbose",
        "upload_rollouts",
        "disable_aggregation",
        "observability_enabled",
        "dry_run",
        # collection control
        "resume_from_cache",
        "allow_unsafe_resume",
        "retry_terminal_timeouts",
        "dispatch_budget_s",
        "drain_margin_s",
        "dispatch_longest_first",
        "require_complete",
        "retain_results_in_memory",
        "output_jsonl_fpath",
        "input_jsonl_fpath",
    }
)
