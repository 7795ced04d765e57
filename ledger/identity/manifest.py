"""The run manifest (ID-30..ID-37).

:class:`RunManifest` holds the fields ``run_created`` carries (ID-30) and, in
memory only, what ``matches_config`` needs: the identity it was computed from
and the plain configurations, whose unredacted form (ID-14) is computed lazily,
only when a digest other than the current one is asked about.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import logging
import os
import uuid
from collections.abc import Iterable, Mapping
from io import BufferedReader
from pathlib import Path
from typing import Annotated, Any, Literal, Self, cast

import msgspec
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from ledger.bounds import MAX_ATTEMPTS, bounded
from ledger.clock import Clock
from ledger.errors import ConfigError, CorruptLedger, RowError
from ledger.files import open_regular, publish_json
from ledger.identity.digest import (
    IdentityInputs,
    counted_identity,
    identity_digest,
    identity_inputs,
    identity_of,
)
from ledger.identity.forms import earlier_forms
from ledger.jsonl import encode_row
from ledger.policy.attempts_cap import max_rollout_attempts as attempts_from_env
from ledger.validation import field_problems

__all__ = ["IDENTITY_FILE", "UNVERIFIED", "RunManifest", "materialized_digest"]

logger = logging.getLogger("ledger")

#: The digest of something that was not checked (ID-30, ID-34).
UNVERIFIED = "unverified"
#: The identity file published beside the manifest (ID-32).
IDENTITY_FILE = "identity.json"

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Digest = Annotated[str, Field(pattern=rf"^(?:[0-9a-f]{{64}}|{UNVERIFIED})$")]


def materialized_digest(rows: Iterable[Mapping[str, Any]]) -> str:
    """The sha256 of the materialized inputs' bytes, ``encode_row`` a line (ID-30)."""
    digest = hashlib.sha256()
    for line, row in enumerate(rows, start=1):
        try:
            digest.update(encode_row(row))
        except (TypeError, msgspec.EncodeError) as exc:
            raise RowError(
                f"materialized row {line} cannot be written as JSON ({exc})", line=line
            ) from None
    return digest.hexdigest()


def _file_digest(path: Path) -> str:
    try:
        with open_regular(path, given=True) as handle:
            digest = hashlib.file_digest(cast(BufferedReader, handle), "sha256")
            return digest.hexdigest()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the source dataset {path} ({exc.strerror or exc}); "
            "pass the file the rows were materialized from, or none",
            path=path,
        ) from None


def _source_path(source: Path, run_dir: Path | None) -> str:
    # ID-30: relative to the run folder when inside it, else as given.
    if run_dir is not None:
        try:
            inside = Path(os.path.abspath(source)).relative_to(os.path.abspath(run_dir))
        except ValueError:
            pass
        else:
            return inside.as_posix()
    return str(source)


def _attempts(given: int | None) -> int:
    if given is None:
        return attempts_from_env()
    return bounded(
        given,
        low=1,
        high=MAX_ATTEMPTS,
        what="max_rollout_attempts (create --max-attempts) takes a number",
        key="max_rollout_attempts",
    )


class RunManifest(BaseModel):
    """A run's manifest: its id, the digests of its inputs and configuration, its cap.

    Frozen, unknown fields refused (ID-30). ``to_body()`` is the part of the
    ``run_created`` body it mirrors. Two manifests are equal when their fields
    are; the in-memory identity and configurations do not take part.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    format: Literal["rollout-ledger/manifest"] = "rollout-ledger/manifest"
    schema_version: Literal[1] = 1
    run_id: Annotated[str, Field(min_length=1, max_length=128)]
    created_at: str
    source_path: str | None = None
    source_digest: Digest = UNVERIFIED
    materialized_digest: Sha256
    config_digest: Digest
    identity_scheme: Literal[1] = 1
    max_rollout_attempts: Annotated[int, Field(ge=1)]
    selection_policy: Literal["latest_allocated"] = "latest_allocated"
    legacy_import: bool = False
    identity_overridden: bool = False

    _identity: dict[str, Any] | None = PrivateAttr(default=None)
    _inputs: IdentityInputs | None = PrivateAttr(default=None)
    _forms: dict[bool, frozenset[str]] = PrivateAttr(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunManifest):
            return NotImplemented
        return self.to_body() == other.to_body()

    def __hash__(self) -> int:
        return hash(tuple(self.to_body().items()))

    @classmethod
    def create(
        cls,
        source: Path | str | None,
        rows: Iterable[Mapping[str, Any]],
        config: Any,
        global_config: Any,
        *,
        max_rollout_attempts: int | None = None,
        run_dir: Path | str | None = None,
        clock: Clock | None = None,
        materialized_bytes: bytes | None = None,
    ) -> Self:
        """The manifest of a new run: digests, identity (ID-1), id and time (ID-31).

        ``materialized_bytes`` are the inputs a collector wrote already, which
        the run adopts as they are (REC-84); without them the digest is taken
        over the rows as ``create`` writes them.

        Raises:
            ConfigError: the configuration has no identity (see ``config_identity``),
                the source cannot be read, or the cap is not a positive integer.
        """
        rows = list(rows)
        inputs = identity_inputs(config, global_config, rows)
        identity = identity_of(inputs)
        clock = clock or Clock()
        source_path = None if source is None else Path(source)
        manifest = cls(
            run_id=uuid.UUID(clock.new_id()).hex,
            created_at=clock.now(),
            source_path=None
            if source_path is None
            else _source_path(source_path, None if run_dir is None else Path(run_dir)),
            source_digest=UNVERIFIED
            if source_path is None
            else _file_digest(source_path),
            materialized_digest=materialized_digest(rows)
            if materialized_bytes is None
            else hashlib.sha256(materialized_bytes).hexdigest(),
            config_digest=identity_digest(identity),
            max_rollout_attempts=_attempts(max_rollout_attempts),
        )
        manifest._identity = identity
        manifest._inputs = inputs
        return manifest

    @classmethod
    def import_legacy(
        cls,
        rows: Iterable[Mapping[str, Any]],
        *,
        materialized_bytes: bytes | None = None,
        materialized_sha256: str | None = None,
        run_id: str | None = None,
        config_digest: str | None = None,
        max_rollout_attempts: int | None = None,
        clock: Clock | None = None,
    ) -> Self:
        """The manifest of a run saved without one (ID-34).

        ``materialized_bytes`` are the existing file's bytes, or
        ``materialized_sha256`` their digest, taken as the file was read (an
        import of a million rows never holds them, P-9); without either the
        digest is taken over the rows as ``create`` would write them. A foreign
        ``run_id`` and ``config_digest`` are kept (REC-73); else a new id and
        ``"unverified"``. It has no identity.
        """
        clock = clock or Clock()
        if materialized_sha256 is not None:
            digest = materialized_sha256
        elif materialized_bytes is not None:
            digest = hashlib.sha256(materialized_bytes).hexdigest()
        else:
            digest = materialized_digest(rows)
        return cls(
            run_id=run_id if run_id is not None else uuid.UUID(clock.new_id()).hex,
            created_at=clock.now(),
            materialized_digest=digest,
            config_digest=UNVERIFIED if config_digest is None else config_digest,
            max_rollout_attempts=_attempts(max_rollout_attempts),
            legacy_import=True,
        )

    @property
    def identity(self) -> dict[str, Any] | None:
        """The credential-safe identity ``config_digest`` was taken from, if known."""
        return copy.deepcopy(self._identity)

    def with_identity(
        self, identity: Mapping[str, Any] | None, *, where: str = "the caller"
    ) -> Self:
        """A copy holding ``identity`` if it counts for ``config_digest`` (ID-33)."""
        result = self.model_copy()
        result._identity = counted_identity(identity, self.config_digest, where=where)
        result._inputs = None
        result._forms = {}
        return result

    def to_body(self) -> dict[str, Any]:
        """The manifest fields as plain JSON values (``run_created`` carries them)."""
        return self.model_dump(mode="json")

    def write(self, path: Path | str) -> None:
        """Publish the manifest at ``path`` and ``identity.json`` beside it (ID-32).

        The identity goes first, so a crash between the two leaves a pair whose
        digests disagree, which ID-33 ignores. Without an identity (an imported
        run) only the manifest is written.
        """
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if self._identity is not None:
            publish_json(target.with_name(IDENTITY_FILE), self._identity)
        publish_json(target, self.to_body())

    @classmethod
    def read(cls, path: Path | str) -> Self:
        """A published manifest, with the identity beside it when that counts (ID-33).

        Raises:
            CorruptLedger: the manifest is missing, unreadable or of an unknown form.
        """
        target = Path(path)
        try:
            manifest = cls.model_validate_json(target.read_bytes())
        except OSError as exc:
            raise CorruptLedger(
                f"cannot read the manifest {target} ({exc.strerror or exc})",
                path=target,
            ) from None
        except ValidationError as exc:
            raise CorruptLedger(
                f"the manifest {target} is corrupt or of an unsupported version: "
                f"{_validation_summary(exc)}",
                path=target,
            ) from None
        return manifest.with_identity(
            _read_identity(target), where=str(target.with_name(IDENTITY_FILE))
        )

    def matches_config(self, saved_digest: str) -> bool:
        """Whether a saved digest is this configuration's, now or as recorded earlier.

        True for ``config_digest`` and for the digest of any earlier form (ID-35,
        ID-36), computed from the credential-safe identity and then, lazily, from
        the unredacted one (ID-14, in memory only; a form that cannot be computed,
        say for an unset environment variable, is skipped). ``"unverified"`` and
        digests of other identity algorithms never match (ID-37).
        """
        if saved_digest == UNVERIFIED:
            return False
        if saved_digest == self.config_digest:
            return True
        return any(
            saved_digest in self._form_digests(safe=safe) for safe in (True, False)
        )

    def _form_digests(self, *, safe: bool) -> frozenset[str]:
        if safe not in self._forms:
            self._forms[safe] = self._compute_forms(safe=safe)
        return self._forms[safe]

    def _compute_forms(self, *, safe: bool) -> frozenset[str]:
        if self._inputs is None:
            return frozenset()
        base = self._identity
        if not safe:
            try:
                base = identity_of(self._inputs, credential_safe=False)
            except ConfigError:
                return frozenset()  # ID-37: skipped, never an error
        bases = [] if base is None else [base]
        if self._inputs.environments_matter():
            # ID-41: and as taken before environment servers were part of a run.
            # ID-37: a form that cannot be computed is skipped.
            with contextlib.suppress(ConfigError):
                bases.append(
                    identity_of(self._inputs, credential_safe=safe, environments=False)
                )
        return frozenset(
            identity_digest(form) for item in bases for form in earlier_forms(item)
        )


def _validation_summary(exc: ValidationError) -> str:
    # Locations and messages only: a manifest value is never echoed back.
    return "; ".join(field_problems(exc, RunManifest, show_input=False))


def _read_identity(manifest_path: Path) -> dict[str, Any] | None:
    path = manifest_path.with_name(IDENTITY_FILE)
    try:
        value = msgspec.json.decode(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, msgspec.DecodeError, RecursionError):
        value = None
    if not isinstance(value, dict):
        logger.warning("cannot read %s; the run is compared by digest only", path)
        return None
    return value
