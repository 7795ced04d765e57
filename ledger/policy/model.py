"""The run's recovery policy (REC-60): the knobs the policy-dependent row rules read.

Where a run's policy comes from (REC-61) and how it changes (``policy_changed``)
belong to the ledger and the CLI; this module only defines the value, its
defaults, its validation and its stable digest.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Final, Self

import msgspec
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    StrictBool,
    StrictInt,
    StrictStr,
    field_serializer,
    field_validator,
)

from ledger.bounds import MAX_ATTEMPTS
from ledger.rows.failure_kinds import DEFAULT_REGRADE_KINDS, Side, canonical_kind

__all__ = ["DEFAULT_POLICY", "FrozenSides", "RecoveryPolicy"]


class FrozenSides(Mapping[str, Side]):
    """A read-only ``{kind: side}`` mapping that copies, pickles and hashes."""

    __slots__ = ("_sides",)

    def __init__(self, sides: Mapping[str, Side] | None = None) -> None:
        self._sides: dict[str, Side] = dict(sides or {})

    def __getitem__(self, kind: str) -> Side:
        return self._sides[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self._sides)

    def __len__(self) -> int:
        return len(self._sides)

    def __hash__(self) -> int:
        return hash(tuple(self._sides.items()))

    def __repr__(self) -> str:
        return f"FrozenSides({self._sides!r})"

    def __reduce__(self) -> tuple[type[FrozenSides], tuple[dict[str, Side]]]:
        return type(self), (self._sides,)


class RecoveryPolicy(BaseModel):
    """How recovery classifies and retries outcomes (REC-60); frozen, strict, closed.

    Kind names are stored as shared names (ROW-22: ``judge_invalid`` becomes
    ``judge_unparseable``), ``regrade_kinds`` sorted without repeats and
    ``side_overrides`` sorted by kind, so equal policies have equal digests.
    REC-80: ``side_overrides`` and ``regrade_kinds`` name registered kinds or
    the failure classes a run's rows carry (``infrastructure_error``,
    ``tau2_agent_error``, ...), so the value alone checks only a name's shape;
    a change to a run's policy checks each new name against the run
    (``ledger.policy.log.policy_changes``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: ROW-32 (`AGENT_TIMEOUT_FAULT_SHARE`): the share of the window faulted
    #: model calls must fill to own it.
    fault_share: Annotated[float, Strict(), Field(gt=0, le=1)] = 0.5
    #: ROW-34, REC-80: move a kind or a run's failure class to a side.
    side_overrides: Mapping[StrictStr, Side] = Field(default_factory=FrozenSides)
    #: ROW-40, ROW-43, REC-20: kinds whose saved answer is graded again; by
    #: default the kinds the failure-kind table marks regraded by default.
    regrade_kinds: tuple[StrictStr, ...] = DEFAULT_REGRADE_KINDS
    #: REC-15: stamped-terminal timeouts keep the normal retry policy.
    retry_terminal_timeouts: StrictBool = False
    #: REC-4: free attempts after which a free retry is `exhausted`.
    max_free_attempts: Annotated[StrictInt, Field(ge=1, le=MAX_ATTEMPTS)] = 5
    #: REC-82: a result whose judge's verdict was unusable is judged again.
    retry_invalid_judge_responses: StrictBool = False

    @field_validator("side_overrides", mode="after")
    @classmethod
    def _shared_override_kinds(cls, value: Mapping[str, Side]) -> Mapping[str, Side]:
        merged: dict[str, Side] = {}
        for kind, where in value.items():
            shared = _shared_name(kind)
            if merged.get(shared, where) != where:
                raise ValueError(
                    f"{kind!r} and {shared!r} name one kind with two sides"
                )
            merged[shared] = where
        # Read-only: a frozen policy must not change under a caller's feet.
        return FrozenSides(dict(sorted(merged.items())))

    @field_validator("regrade_kinds", mode="after")
    @classmethod
    def _shared_regrade_kinds(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted({_shared_name(k) for k in value}))

    @field_serializer("side_overrides")
    def _plain_overrides(self, value: Mapping[str, Side]) -> dict[str, Side]:
        return dict(value)

    #: ``digest()``, computed once per instance: a frozen policy never changes,
    #: and equal policies hold equal digests, so BaseModel's equality (which
    #: compares private attributes too) is what it was.
    _digest: str = PrivateAttr(default="")

    def model_post_init(self, context: Any, /) -> None:
        self._digest = self._compute_digest()

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> Self:
        """A copy; with ``update``, its digest is computed again."""
        copied = super().model_copy(update=update, deep=deep)
        if update:
            copied._digest = copied._compute_digest()
        return copied

    def to_json_dict(self) -> dict[str, Any]:
        """The policy as plain JSON values (lists, dicts), for an event or a file."""
        return self.model_dump(mode="json")

    def _compute_digest(self) -> str:
        encoded = msgspec.json.encode(self.to_json_dict(), order="sorted")
        return hashlib.sha256(encoded).hexdigest()

    def digest(self) -> str:
        """sha256 hex of the policy's canonical JSON (sorted keys, no whitespace)."""
        # Read from the private-attribute dict: BaseModel's __getattr__ for a
        # private name costs more than the hash it saves.
        private = self.__pydantic_private__ or {}
        return str(private.get("_digest") or self._compute_digest())

    def __hash__(self) -> int:
        return hash(self.digest())


#: A failure class's shape: a registered kind, a producer's own class
#: (``tau2_agent_error``) or an environment's ``<server>:<kind>``.
_CLASS_NAME: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]*")


def _shared_name(kind: str) -> str:
    if not _CLASS_NAME.fullmatch(kind):
        raise ValueError(
            f"{kind!r} is not a failure class name (letters, digits, '_', '.', "
            "':' or '-')"
        )
    return canonical_kind(kind) or kind


#: The shared defaults (rows.md: "the shared defaults when omitted").
DEFAULT_POLICY: Final = RecoveryPolicy()
