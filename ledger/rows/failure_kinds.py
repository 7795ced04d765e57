"""The shared failure-kind vocabulary, what each kind means, and its classifier.

A kind says what went wrong and nothing else. Everything the rules know about
a registered kind (its side, whether it is the collector's own lifecycle,
whether it is material in time, whether it is regraded by default, ...) is one
row of :data:`KIND_INFO`, so a new kind with behaviour is one line here: the
classifier, the policy-dependent rules (``ledger.facts_rules``), REC-20's
classification and the policy's defaults all read this table. Every rule that
compares kinds goes through :func:`kind_info` or :func:`kind_is` and the alias
table (ROW-22), so a producer's retained routing name (``timeout_exceeded``)
and the shared name (``agent_timeout``) never drift.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, Protocol

__all__ = [
    "DEFAULT_REGRADE_KINDS",
    "FAILURE_KINDS",
    "KIND_ALIASES",
    "KIND_INFO",
    "STAGES",
    "KindInfo",
    "Side",
    "SideOverrides",
    "canonical_kind",
    "is_namespaced",
    "is_registered",
    "is_transport_kind",
    "kind_info",
    "kind_is",
    "side",
]

Side = Literal["evaluation", "model"]

#: Where an episode failed; admission precedes seed (rows.md, `_ng_failure_record`).
STAGES: Final = ("admission", "seed", "agent", "verification", "cleanup")


@dataclass(frozen=True, slots=True)
class KindInfo:
    """What the rules know of one registered failure kind (one row of KIND_INFO)."""

    #: ROW-34: the side the kind falls on (before the policy's ``side_overrides``).
    side: Side
    _: KW_ONLY
    #: ROW-34: when set, the stage decides: a stage listed here takes its side,
    #: any other known stage takes ``side``, an unknown stage has none. Left
    #: out of the hash (a mapping has none); equal rows still hash equal.
    stage_sides: Mapping[str, Side] | None = field(default=None, hash=False)
    #: REC-4, REC-20.5e: the collector's own lifecycle; free when no answer is kept.
    lifecycle: bool = False
    #: ROW-31: evidence of this kind can be time spent on our side (a timeout or
    #: a cancellation never is: a slow model is not infrastructure's time).
    material_in_time: bool = True
    #: REC-60, ROW-40, ROW-43: in the default ``regrade_kinds``.
    regraded_by_default: bool = False
    #: ROW-33: of the sandbox, session, provider or tool-server families.
    sandbox_family: bool = False
    #: ROW-37: a route failure (the request may or may not have reached the agent).
    route: bool = False
    #: ROW-35, ROW-36, REC-15: the agent ran out of its own deadline.
    agent_deadline: bool = False


_EVALUATION: Final[Side] = "evaluation"
_MODEL: Final[Side] = "model"

# ROW-34 and the rules that name kinds: one row per registered kind. A new kind
# goes here, with the attributes its behaviour needs, and nowhere else.
KIND_INFO: Final[Mapping[str, KindInfo]] = MappingProxyType(
    {
        "transport_unreachable": KindInfo(_EVALUATION),
        "transport_peer_drop": KindInfo(_EVALUATION),
        "transport_timeout": KindInfo(_EVALUATION, material_in_time=False),
        "transport_local_resource": KindInfo(_EVALUATION),
        "agent_request_failed": KindInfo(_EVALUATION, route=True),
        "agent_run_error": KindInfo(_EVALUATION),
        "environment_server_failed": KindInfo(_EVALUATION, sandbox_family=True),
        "protocol_violation": KindInfo(_EVALUATION),
        "judge_failed": KindInfo(_EVALUATION, regraded_by_default=True),
        "judge_unparseable": KindInfo(_EVALUATION, regraded_by_default=True),
        "verifier_error": KindInfo(_EVALUATION),
        "provider_unavailable": KindInfo(_EVALUATION, sandbox_family=True),
        "provider_quota_exhausted": KindInfo(_EVALUATION, sandbox_family=True),
        # ROW-34: agent OOM stays model-side, OOM at any other known stage is ours.
        "provider_oom_killed": KindInfo(
            _EVALUATION,
            stage_sides=MappingProxyType({"agent": _MODEL}),
            sandbox_family=True,
        ),
        "session_lost": KindInfo(_EVALUATION, sandbox_family=True),
        "session_expired": KindInfo(_EVALUATION, sandbox_family=True),
        "session_release_failed": KindInfo(_EVALUATION, sandbox_family=True),
        "cancelled": KindInfo(_EVALUATION, lifecycle=True, material_in_time=False),
        "kill_shaped": KindInfo(_EVALUATION, lifecycle=True),
        "shutdown": KindInfo(_EVALUATION, lifecycle=True),
        "persistence_failed": KindInfo(_EVALUATION),
        "cohort_incomplete": KindInfo(_EVALUATION),
        "agent_timeout": KindInfo(_MODEL, agent_deadline=True),
        "agent_command_not_allowed": KindInfo(_MODEL),
    }
)

#: The shared, registered failure kinds (ROW-34).
FAILURE_KINDS: Final = frozenset(KIND_INFO)

#: REC-60: the policy's default ``regrade_kinds``, sorted as the policy keeps them.
DEFAULT_REGRADE_KINDS: Final = tuple(
    sorted(kind for kind, info in KIND_INFO.items() if info.regraded_by_default)
)

#: ROW-22: retained producer routing names and the shared name each one means.
KIND_ALIASES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "timeout_exceeded": "agent_timeout",
        "judge_invalid": "judge_unparseable",
        "remote_agent_error": "agent_run_error",
    }
)


class SideOverrides(Protocol):
    """What :func:`side` reads of a recovery policy: its ``side_overrides``."""

    @property
    def side_overrides(self) -> Mapping[str, Side]:
        """ROW-34, REC-80: kinds and producer classes moved to a side."""
        ...


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


def kind_info(kind: object) -> KindInfo | None:
    """The table row of the registered kind ``kind`` names, aliases resolved (ROW-22).

    ``None`` for an unregistered or namespaced name, or for no string.
    """
    if not isinstance(kind, str):
        return None
    return KIND_INFO.get(KIND_ALIASES.get(kind, kind))


def kind_is(kind: object, *wanted: str) -> bool:
    """Whether ``kind`` names one of ``wanted``, matching aliases alike (ROW-22)."""
    own = canonical_kind(kind)
    return own is not None and any(own == canonical_kind(w) for w in wanted)


def is_transport_kind(kind: object) -> bool:
    """Whether ``kind`` is a ``transport_*`` kind (never a namespaced name).

    By prefix, registered or not (ROW-37, ROW-40 say "a ``transport_*`` kind").
    """
    own = canonical_kind(kind)
    return own is not None and own.startswith("transport_") and ":" not in own


def side(
    kind: object,
    stage: object = None,
    *,
    policy: SideOverrides | None = None,
    result_class: object = None,
) -> Side | None:
    """The side ``kind`` falls on: ``evaluation``, ``model`` or ``None`` (ROW-34).

    Order: a class applied on the row (``result_class``, ROW-50) decides first:
    ``evaluation`` or ``model`` is the answer and any other class (``unknown``,
    or a value this version does not know) makes it ``None``, the conservative
    reading (REC-62). Then the policy's ``side_overrides`` move a kind at any
    stage, registered or a producer's own class (REC-80); otherwise only
    registered kinds have a side (aliases resolved, ROW-22), and a
    kind whose side depends on the stage (``provider_oom_killed`` is ``model``
    at stage ``agent``, ``evaluation`` at any other known stage) has none when
    the stage is unknown.
    """
    if result_class is not None:
        return _applied(result_class)
    own = canonical_kind(kind)
    if own is None:
        return None
    # REC-80: an override names a registered kind or a class the run's rows
    # carry, so it moves an unregistered producer class too.
    if policy is not None and own in policy.side_overrides:
        return policy.side_overrides[own]
    info = KIND_INFO.get(own)
    if info is None:
        return None
    if info.stage_sides is not None:
        return _stage_side(info, stage)
    return info.side


def _applied(result_class: Any) -> Side | None:
    # REC-62: an explicit class wins; an unknown one stays unknown.
    if result_class == "evaluation":
        return "evaluation"
    if result_class == "model":
        return "model"
    return None


def _stage_side(info: KindInfo, stage: object) -> Side | None:
    # ROW-34: a listed stage takes its own side, any other known stage the
    # kind's; an unknown stage cannot say which.
    if not isinstance(stage, str) or stage not in STAGES:
        return None
    sides = info.stage_sides or {}
    return sides.get(stage, info.side)
