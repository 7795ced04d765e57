"""The shared failure-kind vocabulary and its classifier (ROW-22, ROW-34).

A kind says what went wrong and nothing else. Which side of the evaluation it
falls on (the evaluation's infrastructure or the evaluated model) is decided
here, once, by :func:`side`; every rule and projection that compares kinds goes
through :func:`kind_is` and its alias table, so a producer's retained routing
name (``timeout_exceeded``) and the shared name (``agent_timeout``) never drift.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from ledger.policy.model import RecoveryPolicy

__all__ = [
    "FAILURE_KINDS",
    "KIND_ALIASES",
    "STAGES",
    "Side",
    "canonical_kind",
    "is_namespaced",
    "is_registered",
    "is_transport_kind",
    "kind_is",
    "side",
]

Side = Literal["evaluation", "model"]

#: Where an episode failed; admission precedes seed (rows.md, `_ng_failure_record`).
STAGES: Final = ("admission", "seed", "agent", "verification", "cleanup")

# ROW-34: the registered vocabulary and the side each kind falls on.
_EVALUATION_KINDS: Final = (
    "transport_unreachable",
    "transport_peer_drop",
    "transport_timeout",
    "transport_local_resource",
    "agent_request_failed",
    "agent_run_error",
    "environment_server_failed",
    "protocol_violation",
    "judge_failed",
    "judge_unparseable",
    "verifier_error",
    "provider_unavailable",
    "provider_quota_exhausted",
    "session_lost",
    "session_expired",
    "session_release_failed",
    "cancelled",
    "kill_shaped",
    "shutdown",
    "persistence_failed",
    "cohort_incomplete",
)
_MODEL_KINDS: Final = ("agent_timeout", "agent_command_not_allowed")
# ROW-34: decided by the stage it happened in (agent OOM is the model's, seed OOM ours).
_OOM: Final = "provider_oom_killed"

_EVALUATION: Final[Side] = "evaluation"
_MODEL: Final[Side] = "model"
_SIDES: Final[Mapping[str, Side]] = MappingProxyType(
    dict.fromkeys(_EVALUATION_KINDS, _EVALUATION) | dict.fromkeys(_MODEL_KINDS, _MODEL)
)

#: The shared, registered failure kinds (ROW-34).
FAILURE_KINDS: Final = frozenset({*_SIDES, _OOM})

#: ROW-22: retained producer routing names and the shared name each one means.
KIND_ALIASES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "timeout_exceeded": "agent_timeout",
        "judge_invalid": "judge_unparseable",
        "remote_agent_error": "agent_run_error",
    }
)

# `fullmatch`, not `match`: `$` would also accept a trailing newline.
_NAMESPACED = re.compile(r"[a-z][a-z0-9_]*:[a-z][a-z0-9_]*")


def is_registered(kind: object) -> bool:
    """Whether ``kind`` is a shared name; ``timeout_exceeded`` is not."""
    return isinstance(kind, str) and kind in FAILURE_KINDS


def is_namespaced(kind: object) -> bool:
    """Whether ``kind`` is an environment's own ``<server>:<kind>`` name."""
    return isinstance(kind, str) and _NAMESPACED.fullmatch(kind) is not None


def canonical_kind(kind: object) -> str | None:
    """The shared name ``kind`` stands for (ROW-22); ``None`` when it is no string."""
    if not isinstance(kind, str):
        return None
    return KIND_ALIASES.get(kind, kind)


def kind_is(kind: object, *wanted: str) -> bool:
    """Whether ``kind`` names one of ``wanted``, matching aliases alike (ROW-22)."""
    own = canonical_kind(kind)
    return own is not None and any(own == canonical_kind(w) for w in wanted)


def is_transport_kind(kind: object) -> bool:
    """Whether ``kind`` is a ``transport_*`` kind (never a namespaced name)."""
    own = canonical_kind(kind)
    return own is not None and own.startswith("transport_") and ":" not in own


def side(
    kind: object,
    stage: object = None,
    *,
    policy: RecoveryPolicy | None = None,
    result_class: object = None,
) -> Side | None:
    """The side ``kind`` falls on: ``evaluation``, ``model`` or ``None`` (ROW-34).

    Order: a class applied on the row (``result_class``, ROW-50) decides first:
    ``evaluation`` or ``model`` is the answer and any other class (``unknown``,
    or a value this version does not know) makes it ``None``, the conservative
    reading (REC-62). Then only registered kinds have a side (aliases resolved,
    ROW-22): the policy's ``side_overrides`` move a kind at any stage, and
    ``provider_oom_killed`` is ``model`` at stage ``agent``, ``evaluation`` at
    any other known stage and ``None`` when the stage is unknown.
    """
    if result_class is not None:
        return _applied(result_class)
    own = canonical_kind(kind)
    if own is None or own not in FAILURE_KINDS:
        return None
    if policy is not None and own in policy.side_overrides:
        return policy.side_overrides[own]
    if own == _OOM:
        return _oom_side(stage)
    return _SIDES[own]


def _applied(result_class: Any) -> Side | None:
    # REC-62: an explicit class wins; an unknown one stays unknown.
    if result_class == "evaluation":
        return "evaluation"
    if result_class == "model":
        return "model"
    return None


def _oom_side(stage: object) -> Side | None:
    # ROW-34: agent OOM stays model-side, OOM at any other known stage is ours.
    if stage == "agent":
        return "model"
    if isinstance(stage, str) and stage in STAGES:
        return "evaluation"
    return None
