"""The run's recovery policy (REC-60): the knobs the policy-dependent row rules read.

Where a run's policy comes from (REC-61) and how it changes (``policy_changed``)
belong to the ledger and the CLI; this module only defines the value, its
defaults, its validation and its stable digest.
"""

from __future__ import annotations

import hashlib
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
from ledger.rows.failure_kinds import (
    DEFAULT_REGRADE_KINDS,
    Side,
    canonical_kind,
    is_namespaced,
    is_registered,
)

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
    Decisions where REC-60 is silent: a ``side_overrides`` key must be a
    registered kind (an unregistered or namespaced kind has no side to move,
    ROW-34, so naming one is a typo and is refused); a ``regrade_kinds`` entry
    must be registered or namespaced (a launcher may regrade its own kinds).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: ROW-32 (`AGENT_TIMEOUT_FAULT_SHARE`): the share of the window faulted
    #: model calls must fill to own it.
    fault_share: Annotated[float, Strict(), Field(gt=0, le=1)] = 0.5
    #: ROW-34: move a registered kind to the other side.
    side_overrides: Mapping[StrictStr, Side] = Field(default_factory=FrozenSides)
    #: ROW-40, ROW-43, REC-20: kinds whose saved answer is graded again; by
    #: default the kinds the failure-kind table marks regraded by default.
    regrade_kinds: tuple[StrictStr, ...] = DEFAULT_REGRADE_KINDS
    #: REC-15: stamped-terminal timeouts keep the normal retry policy.
    retry_terminal_timeouts: StrictBool = False
    #: REC-4: free attempts after which a free retry is `exhausted`.
    max_free_attempts: Annotated[StrictInt, Field(ge=1, le=MAX_ATTEMPTS)] = 5

    @field_validator("side_overrides", mode="after")
    @classmethod
    def _shared_override_kinds(cls, value: Mapping[str, Side]) -> Mapping[str, Side]:
        merged: dict[str, Side] = {}
        for kind, where in value.items():
            shared = _shared_name(kind, allow_namespaced=False)
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
        return tuple(sorted({_shared_name(k, allow_namespaced=True) for k in value}))

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


def _shared_name(kind: str, *, allow_namespaced: bool) -> str:
    shared = canonical_kind(kind) or kind
    if is_registered(shared) or (allow_namespaced and is_namespaced(shared)):
        return shared
    allowed = (
        "a registered or <server>:<kind> name" if allow_namespaced else "registered"
    )
    raise ValueError(f"{kind!r} is not a known failure kind; it must be {allowed}")


#: The shared defaults (rows.md: "the shared defaults when omitted").
DEFAULT_POLICY: Final = RecoveryPolicy()
