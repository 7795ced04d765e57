"""What a writer keeps beside the log: the fold's snapshots (EV-14, P-8), and
how the run was last driven (issue 28).

The read rooms make a snapshot's bytes (``snapshot_bytes``, ``left_bytes``)
and never store them; the operations that hold a writer store them here,
and choose when (``replay_kept``: a replay that folded a long tail).

``create``, ``resume`` and ``run`` note their configuration files and ``run``
its collector's command in ``commands.json`` in the ledger folder, so that a
hint (``check``'s, ``status``'s, the report's) prints the command whole. A
collector command with anything credential-shaped in it is not noted at all
(no credential byte is written anywhere): the hints then show a placeholder.
A note that cannot be written costs a placeholder, never the command.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

from ledger import Ledger, RunPaths, credential_named, redact_secrets
from ledger.collector_files.inputs_seen import InputsSeen
from ledger.policy.model import RecoveryPolicy
from projections.decisions.completion import Coverage
from projections.decisions.rules import Decision
from projections.fold.left import OPEN_VERSION, left_bytes
from projections.fold.reading import KEEP_AFTER, replay_counted
from projections.fold.settled import settle
from projections.fold.snapshot import CODE_VERSION, snapshot_bytes
from projections.fold.state import RunState
from projections.views.checks import Verification, verify_run
from projections.views.next_steps import COMMANDS_FILE, NotedCommands, read_noted
from projections.views.proof import Proof, file_proofs, make_proof, proof_file

__all__ = [
    "keep_proof",
    "note_commands",
    "replace_note",
    "replay_kept",
    "save_left",
    "save_open",
    "save_snapshot",
    "speaks_of_credentials",
    "verify_kept",
]


def save_snapshot(ledger: Ledger, state: RunState, policy: RecoveryPolicy) -> None:
    """Store ``state`` as the snapshot for its policy and this code version."""
    encoded = snapshot_bytes(state)
    if encoded is not None:
        ledger.save_snapshot(
            state.as_of_seq,
            bytes.fromhex(state.head_hash),
            CODE_VERSION,
            policy.digest(),
            encoded,
        )


def save_open(
    ledger: Ledger,
    state: RunState,
    decisions: Mapping[tuple[int, int], Decision],
    inputs: InputsSeen | None,
    *,
    covered: Coverage | None = None,
) -> None:
    """Store the snapshot of what is left of ``state`` (its ``decisions``)."""
    save_left(ledger, settle(state, decisions), decisions, inputs, covered=covered)


def save_left(
    ledger: Ledger,
    left: RunState,
    decisions: Mapping[tuple[int, int], Decision],
    inputs: InputsSeen | None,
    *,
    covered: Coverage | None = None,
) -> None:
    """Store ``left`` (what ``settle`` gave), its rollouts decided in ``decisions``."""
    encoded = left_bytes(left, decisions, inputs, covered=covered)
    if encoded is not None:
        # One per run: the policy it was folded under is in the state (the
        # key's policy digest is left empty, as for the writer's index).
        ledger.save_snapshot(
            left.as_of_seq, bytes.fromhex(left.head_hash), OPEN_VERSION, "", encoded
        )


def replay_kept(ledger: Ledger) -> RunState:
    """``replay``, and a writer that folded a long tail keeps what it folded.

    A resume from the snapshot of what is left (P-8) saves no whole state;
    this keeps the whole one close to the head for the commands that need
    every rollout (record, results, history, the report).
    """
    done = replay_counted(ledger)
    if done.tail >= KEEP_AFTER and ledger.writable:
        save_snapshot(ledger, done.state, done.policy)
    return done.state


def speaks_of_credentials(argv: Sequence[str]) -> bool:
    """Whether any argument names or holds something credential-shaped."""
    for arg in argv:
        key, sep, _ = arg.lstrip("+-").partition("=")
        named = (sep or arg.startswith("-")) and key
        if named and credential_named(key.rsplit(".", 1)[-1]):
            return True
        if redact_secrets(arg) != arg:
            return True
    return False


def note_commands(
    paths: RunPaths,
    *,
    config: Path | str | None,
    global_configs: Sequence[Path | str] = (),
    collector: Sequence[str] | None = None,
) -> None:
    """Note the configuration files (and ``run``'s collector) for the hints."""
    kept = read_noted(paths)
    argv = kept.collector if collector is None else list(collector)
    if argv is not None and speaks_of_credentials(argv):
        argv = None
    noted = NotedCommands(
        config=None if config is None else str(Path(config).absolute()),
        global_configs=[str(Path(p).absolute()) for p in global_configs],
        collector=argv,
        cwd=os.getcwd(),
    )
    replace_note(paths.ledger_dir / COMMANDS_FILE, msgspec.json.encode(noted))


def keep_proof(ledger: Ledger, proof: Proof) -> Path | None:
    """Keep what a full ``verify`` proved beside the log (issue 30); where, or
    ``None`` (a run in a store, or a folder that cannot be written: the next
    reader then checks the run whole)."""
    target = proof_file(ledger)
    if target is None or not replace_note(target, msgspec.json.encode(proof)):
        return None
    return target


def replace_note(target: Path, data: bytes) -> bool:
    """``target`` replaced by ``data`` whole (a temporary file renamed over it);
    whether it was written. A note beside the log: failing costs only the note."""
    temporary = target.with_name(f".{target.name}.tmp")
    try:
        temporary.unlink(missing_ok=True)  # never written through a planted link
        temporary.write_bytes(data)
        os.replace(temporary, target)
    except OSError:
        return False
    return True


def verify_kept(
    ledger: Ledger, *, jobs: int | None = None
) -> tuple[Verification, Path | None]:
    """``verify_run``, and when nothing is found its proof kept (issue 30).

    The proof names the head as of the start (every event up to it was
    checked), and each collector file hashed whole in a helper thread while
    the checks run (hashlib releases the GIL: the second core's work).
    """
    from concurrent.futures import ThreadPoolExecutor

    seq, head = ledger.head()
    with ThreadPoolExecutor(1, thread_name_prefix="proof") as pool:
        hashing = pool.submit(file_proofs, ledger)
        found = verify_run(ledger, jobs=jobs)
        files = hashing.result()
    if found.findings or ledger.folder is None:
        return found, None
    return found, keep_proof(ledger, make_proof(seq, head, files))
