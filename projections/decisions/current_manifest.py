"""The current manifest a resume compares with the saved one (REC-56).

Built from the run's materialized inputs without parsing them whole (P-4): the
file is hashed as it is read (in large chunks), and each line is decoded only
for its ``agent_ref`` and ``_ng_environment_server`` (what the identity's
server selection needs, ID-3, ID-41), kept as their JSON bytes, so each
distinct reference is built once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec

from ledger import Clock, Ledger, LedgerError, RunManifest
from ledger.collector_files.inputs_seen import (
    InputsSeen,
    before_read,
    seen_now,
    still_seen,
)
from ledger.errors import ConfigError
from ledger.files import open_regular
from projections.fold.state import RunState

__all__ = ["current_manifest", "current_manifest_seen"]


class _AgentOnly(msgspec.Struct):
    agent_ref: msgspec.Raw = msgspec.Raw(b"null")
    environment: msgspec.Raw = msgspec.field(
        default=msgspec.Raw(b"null"), name="_ng_environment_server"
    )


_AGENT_DECODER = msgspec.json.Decoder(_AgentOnly)


#: Chunks this large are hashed in the helper thread; smaller ones (a row
#: stored as a piece of its own, PostgreSQL) in line, in file order.
_THREADED = 1 << 16
_CHUNK = 1 << 22


def _lines(chunks: Iterable[bytes], digest: Any) -> Iterator[bytes | memoryview]:
    """The file's lines without their newline, hashing every byte as read.

    Each large chunk is hashed in a helper thread while its lines are decoded
    here (``update`` releases the GIL on large buffers, P-4); one chunk at most
    is being hashed, in file order, so the digest is the file's.
    """
    with ThreadPoolExecutor(1, thread_name_prefix="sha256") as hasher:
        hashing: Future[None] | None = None
        pending: list[bytes] = []  # the start of a line that crosses chunks
        for chunk in chunks:
            if hashing is not None:
                hashing.result()
                hashing = None
            if len(chunk) < _THREADED:  # a store's small piece: a thread costs more
                digest.update(chunk)
            else:
                hashing = hasher.submit(digest.update, chunk)
            view = memoryview(chunk)  # lines are decoded in place, not copied
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                if pending:
                    pending.append(chunk[start:end])
                    yield b"".join(pending)
                    pending = []
                else:
                    yield view[start:end]
                start = end + 1
            if start < len(chunk):
                pending.append(chunk[start:])
        if hashing is not None:
            hashing.result()
        if pending:
            yield b"".join(pending)


def _agents_and_digest(chunks: Iterable[bytes]) -> tuple[list[dict[str, Any]], str]:
    digest = hashlib.sha256()
    agents: dict[str, dict[str, Any]] = {}
    environments: dict[str, None] = {}  # ID-41, in the order first met
    seen: set[bytes] = set()  # agent_ref values met, as their JSON bytes
    seen_environments: set[bytes] = set()
    for line in _lines(chunks, digest):
        try:
            decoded = _AGENT_DECODER.decode(line)
        except (msgspec.DecodeError, RecursionError):
            continue  # the digest check (REC-55) reports a changed file
        environment = bytes(decoded.environment)
        if environment not in seen_environments:
            seen_environments.add(environment)
            name = msgspec.json.decode(environment)
            if isinstance(name, str):
                environments.setdefault(name)
        data = bytes(decoded.agent_ref)
        if data in seen:  # the same bytes decode to the same reference
            continue
        seen.add(data)
        ref = msgspec.json.decode(data)
        if isinstance(ref, dict):
            agents.setdefault(msgspec.json.encode(ref, order="sorted").decode(), ref)
    rows: list[dict[str, Any]] = [{"agent_ref": ref} for ref in agents.values()]
    rows += [{"_ng_environment_server": name} for name in environments]
    return rows, digest.hexdigest()


def inputs_seen_at(path: str) -> InputsSeen | None:
    """The materialized inputs at ``path`` read whole now, as
    ``current_manifest_seen`` reads them (a second process's work, beside a
    replay: issue 30); ``None`` when it cannot be read or moved as read."""
    where = Path(path)
    before = before_read(where)
    try:
        with open_regular(where) as handle:
            chunks = iter(lambda: handle.read(_CHUNK), b"")
            rows, digest = _agents_and_digest(chunks)
    except (OSError, LedgerError):
        return None
    return seen_now(where, before, digest, rows)


def _source(ledger: Ledger, state: RunState, source: Path | str | None) -> Path | None:
    if source is not None:
        return Path(source)
    saved = state.manifest.get("source_path")
    if not isinstance(saved, str):
        return None
    if Path(saved).is_absolute():
        candidate = Path(saved)
    elif ledger.folder is None:
        return None  # a run kept in a store has no folder to resolve it against
    else:
        candidate = ledger.folder / saved
    return candidate if candidate.is_file() else None  # REC-55: when it exists


def current_manifest(
    ledger: Ledger,
    state: RunState,
    config: Any,
    global_config: Any,
    *,
    source: Path | str | None = None,
) -> RunManifest:
    """The manifest the current configuration and files give this run."""
    return current_manifest_seen(ledger, state, config, global_config, source=source)[0]


def _materialized_path(ledger: Ledger) -> Path | None:
    """The inputs' file on disk (``None`` for a run kept in a store)."""
    if ledger.folder is None:
        return None
    return ledger.folder / ledger.files.names.materialized


def current_manifest_seen(
    ledger: Ledger,
    state: RunState,
    config: Any,
    global_config: Any,
    *,
    source: Path | str | None = None,
    seen: InputsSeen | None = None,
) -> tuple[RunManifest, InputsSeen | None]:
    """``current_manifest``, trusting ``seen`` while the inputs' file is untouched.

    ``seen`` is what the last full read of the materialized inputs found
    (``ledger.collector_files.inputs_seen``): while the file shows the same identity and
    times, its digest and server references are taken from it and the file
    is not read (P-8). Otherwise the file is read and hashed whole, and what
    that read found is returned, for the caller to keep (``None`` when it
    cannot be trusted: a run kept in a store, or a file that changed as it
    was read).
    """
    files = ledger.files
    name = files.names.materialized
    path = _materialized_path(ledger)
    trusted = still_seen(seen, path)
    if trusted is not None:
        rows, digest = trusted.rows, trusted.digest
    else:
        before = before_read(path)
        try:
            rows, digest = _agents_and_digest(files.chunks(name))
        except OSError as exc:
            raise ConfigError(
                f"cannot read {files.describe(name)}: {exc.strerror or exc}"
            ) from exc
        trusted = seen_now(path, before, digest, rows)
    manifest = RunManifest.create(
        _source(ledger, state, source),
        rows,
        config,
        global_config,
        max_rollout_attempts=state.max_rollout_attempts,
        run_dir=ledger.folder,
        clock=Clock(seed=0),  # id and time are replaced by the saved ones below
    )
    manifest = manifest.model_copy(
        update={
            "run_id": state.run_id,
            "created_at": state.manifest.get("created_at", manifest.created_at),
            "materialized_digest": digest,
        }
    )
    return manifest, trusted
