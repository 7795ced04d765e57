"""What a run evaluated, in a few fields: the header of every page about it.

Read off the run's identity (its collection settings and the servers it
reaches) and manifest: the agent, the model server(s) and model name(s), the
dataset file and digest, ``num_repeats``, the sampling settings, the attempt
cap, and the first and last event times. Credentials never appear: the
identity holds them redacted (ID-13), and every text passes ``redact_secrets``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from ledger import Ledger, redact_secrets
from projections.fold.state import RunState

__all__ = ["Evaluated", "ModelServer", "evaluated"]

#: Sampling settings shown in the header, in this order, when the run has them.
SAMPLING_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "max_output_tokens",
    "max_tokens",
    "seed",
    "reasoning",
)
#: Keys that name a model inside a model server's block, most specific first.
_MODEL_KEYS = ("model", "openai_model", "model_name", "served_model_name")


class ModelServer(msgspec.Struct, frozen=True):
    """One model server a run reaches: its name and the model it serves."""

    name: str
    model: str | None


class Evaluated(msgspec.Struct, frozen=True, kw_only=True):
    """The header of a run: what was evaluated, under what settings."""

    run_id: str
    agent: str | None
    models: tuple[ModelServer, ...]
    dataset: str | None
    dataset_digest: str | None
    num_repeats: int | None
    sampling: dict[str, Any]
    max_attempts: int
    rollouts: int
    first_event_at: str | None
    last_event_at: str | None

    @property
    def model(self) -> str:
        """The policy model(s) in a few words: ``name (model)`` each."""
        return ", ".join(
            f"{m.name} ({m.model})" if m.model else m.name for m in self.models
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json`` and the viewer's API."""
        found: dict[str, Any] = msgspec.to_builtins(self)
        return found


def _block(server: Any) -> Mapping[str, Any]:
    """The innermost settings of a server entry (``{type: {impl: {...}}}``)."""
    while isinstance(server, Mapping) and len(server) == 1:
        (inner,) = server.values()
        if not isinstance(inner, Mapping):
            break
        server = inner
    return server if isinstance(server, Mapping) else {}


def _model_of(block: Mapping[str, Any]) -> str | None:
    for key in _MODEL_KEYS:
        value = block.get(key)
        if isinstance(value, str) and value:
            return redact_secrets(value)
    return None


def _models(agent: str | None, servers: Mapping[str, Any]) -> tuple[ModelServer, ...]:
    """The agent's model server(s), else every server that names a model."""
    names: list[str] = []
    block = _block(servers.get(agent)) if agent else {}
    for key, value in block.items():
        if "model_server" in key and isinstance(value, Mapping):
            name = value.get("name")
            if isinstance(name, str) and name in servers:
                names.append(name)
    if not names:
        names = [n for n in sorted(servers) if _model_of(_block(servers[n]))]
    return tuple(ModelServer(n, _model_of(_block(servers[n]))) for n in names)


def _row_agent(state: RunState) -> str | None:
    """The agent the rows name (an imported run keeps no collection settings)."""
    for by_rollout in state.rollouts.values():
        for rollout in by_rollout.values():
            if rollout.agent:
                return rollout.agent
    return None


def evaluated(
    ledger: Ledger, state: RunState, *, last_event_at: str | None = None
) -> Evaluated:
    """The header of the run ``state`` was replayed from.

    ``last_event_at``: the newest event's time when the caller read it
    already; otherwise it is read (one event, the head).
    """
    identity = state.identity or {}
    collection = identity.get("collection") or {}
    servers = identity.get("servers") or {}
    agent = collection.get("agent_name") or _row_agent(state)
    params = collection.get("responses_create_params") or {}
    sampling = {k: params[k] for k in SAMPLING_KEYS if k in params}
    dataset = collection.get("input_jsonl_fpath")
    manifest = state.manifest or {}
    if last_event_at is None:
        seq, _ = ledger.head()
        last = next(iter(ledger.events(seq)), None) if seq else None
        last_event_at = None if last is None else last.at
    repeats = collection.get("num_repeats")
    return Evaluated(
        run_id=str(manifest.get("run_id") or ""),
        agent=agent if isinstance(agent, str) else None,
        models=_models(agent if isinstance(agent, str) else None, servers),
        dataset=redact_secrets(dataset) if isinstance(dataset, str) else None,
        dataset_digest=manifest.get("materialized_digest"),
        num_repeats=repeats if isinstance(repeats, int) else None,
        sampling=sampling,
        max_attempts=state.cap,
        rollouts=state.expected,
        first_event_at=manifest.get("created_at"),
        last_event_at=last_event_at,
    )
