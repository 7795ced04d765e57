"""What ``verify`` proved, and what a reader checks after it (issue 30).

A full ``verify`` (every check, every byte: R-7) that finds nothing leaves a
*proof* beside the log, ``verified.json`` in the ledger folder: the seq and
head hash it checked up to, when, and each collector file's size, change
times and sha256 as it read them. ``report``, ``status`` and the viewer then
check only what came after it (``check_since``):

- the event the proof ends at must still carry the proven head hash (a log
  rewritten at or below it no longer does), and the events after it must
  chain from it (EV-2), each checked as ``verify`` checks the chain;
- every row recorded after the proof is read at its place and hashed against
  its event;
- each proven file is looked at: unchanged (size and change times as
  proven), grown (rows appended since: their rows are the ones checked
  above), or shorter than proven (a finding: bytes verified are gone).

What lies below the proof is not read again: a byte changed there with its
file's times put back is found by the next full ``verify``, never by these,
and the words every reader shows say so ("verified up to event N at T; since
then ..."). A run kept in PostgreSQL keeps no proof (its rows are in the
store): a reader checks it whole, as before.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from ledger import Ledger, LedgerError, plural
from ledger.collector_files.rows_seen import file_shape
from ledger.events import Location
from ledger.files import open_regular
from projections.views.checks import (
    Finding,
    Verification,
    note_hashed,
    recorded_places,
)

__all__ = [
    "PROOF_FILE",
    "QUICK_LIMIT",
    "FileProof",
    "Proof",
    "Since",
    "check_since",
    "checked_since",
    "file_proofs",
    "integrity",
    "last_proof_words",
    "make_proof",
    "proof_words",
    "read_proof",
]

#: The proof's file in the ledger folder.
PROOF_FILE = "verified.json"
_CHUNK = 1 << 22
_BATCH = 4096  # rows read at once after a proof


class FileProof(msgspec.Struct, frozen=True):
    """One file as ``verify`` read it: its size, change times and sha256."""

    size: int
    mtime_ns: int
    ctime_ns: int
    sha256: str


class Proof(msgspec.Struct, frozen=True, kw_only=True):
    """What a full ``verify`` with no finding proved, and when."""

    schema_version: int = 1
    seq: int
    head: str
    at: str
    files: dict[str, FileProof] = msgspec.field(default_factory=dict)


class Since(msgspec.Struct, frozen=True, kw_only=True):
    """What a reader checked after a proof: its findings and what it read."""

    events: int  # events checked after the proof
    rows: int  # rows recorded after the proof, read and hashed
    grown: tuple[str, ...] = ()  # proven files with bytes appended since
    findings: tuple[Finding, ...] = ()


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except OSError:
        return None


def _proven_paths(ledger: Ledger) -> dict[str, Path]:
    # The inputs first: verify's own check of them then reads no byte again.
    paths = ledger.paths
    return {p.name: p for p in (paths.materialized, Path(ledger.target), paths.sidecar)}


def file_proofs(ledger: Ledger) -> dict[str, FileProof]:
    """Each collector file of a file run, hashed whole (a file that moved while
    it was read is left out: nothing is claimed of it). ``{}`` in a store."""
    if ledger.folder is None:
        return {}
    proofs: dict[str, FileProof] = {}
    for name, path in _proven_paths(ledger).items():
        before = _stat(path)
        if before is None:
            continue
        identity = file_shape(path)
        digest = hashlib.sha256()
        try:  # a folder or a pipe in a file's place is refused, never waited on
            with open_regular(path) as handle:
                while chunk := handle.read(_CHUNK):
                    digest.update(chunk)  # releases the GIL: beside the refolds
        except (OSError, LedgerError):
            continue
        note_hashed(path, identity, digest.hexdigest())
        after = _stat(path)
        if after is None or (after.st_size, after.st_mtime_ns) != (
            before.st_size,
            before.st_mtime_ns,
        ):
            continue
        proofs[name] = FileProof(
            size=after.st_size,
            mtime_ns=after.st_mtime_ns,
            ctime_ns=after.st_ctime_ns,
            sha256=digest.hexdigest(),
        )
    return proofs


def make_proof(seq: int, head: bytes, files: dict[str, FileProof]) -> Proof:
    """The proof of a verify that checked up to ``seq`` with no finding."""
    at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Proof(seq=seq, head=head.hex(), at=at, files=files)


def proof_file(ledger: Ledger) -> Path | None:
    """Where a file run keeps its proof; ``None`` for a run in a store."""
    return None if ledger.folder is None else ledger.paths.ledger_dir / PROOF_FILE


def read_proof(ledger: Ledger) -> Proof | None:
    """The run's last proof, or ``None`` (none kept, unreadable, or a store)."""
    where = proof_file(ledger)
    if where is None:
        return None
    try:
        return msgspec.json.decode(where.read_bytes(), type=Proof)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def check_since(ledger: Ledger, proof: Proof) -> Since:
    """What came after ``proof``, checked (the bytes below it are not read
    again): the chain from it, each row recorded since at its place, and each
    proven file's size and change times."""
    findings: list[Finding] = []
    seq, _ = ledger.head()
    broken = ledger.verify_chain_after(proof.seq, bytes.fromhex(proof.head))
    if broken is not None and broken.seq == proof.seq:
        findings.append(
            Finding(
                "chain",
                f"the event verified last (seq {proof.seq}, at {proof.at}) no longer "
                "carries the head hash verify proved: the log changed at or below "
                "it; `rollout-ledger verify` runs every check",
                seq=proof.seq,
            )
        )
        return Since(events=0, rows=0, findings=tuple(findings))
    if broken is not None:
        findings.append(Finding("chain", broken.reason, seq=broken.seq))
    rows = 0
    with ledger.files.reader() as reader:
        places = recorded_places(ledger, proof.seq + 1)
        while batch := list(itertools.islice(places, _BATCH)):  # bounded memory
            rows += len(batch)
            read = reader.read_many([(w.file, w.offset, w.length) for w, _ in batch])
            findings += _changed_rows(batch, read)
    grown: list[str] = []
    paths = _proven_paths(ledger) if ledger.folder is not None else {}
    for name, proven in sorted(proof.files.items()):
        now = _stat(paths[name]) if name in paths else None
        if now is None or now.st_size < proven.size:
            findings.append(
                Finding(
                    "rows",
                    f"{'missing' if now is None else 'shorter'} since verify read "
                    f"{plural(proven.size, 'byte')} of it at {proof.at}",
                    file=name,
                )
            )
        elif (now.st_size, now.st_mtime_ns, now.st_ctime_ns) != (
            proven.size,
            proven.mtime_ns,
            proven.ctime_ns,
        ):
            grown.append(name)
    return Since(
        events=seq - proof.seq,
        rows=rows,
        grown=tuple(grown),
        findings=tuple(findings),
    )


def _changed_rows(
    batch: list[tuple[Location, int]], read: list[bytes | None]
) -> list[Finding]:
    found = []
    for (where, seq), data in zip(batch, read, strict=True):
        if data is None or len(data) < where.length:
            what = "is missing"
        elif hashlib.sha256(data).hexdigest() != where.row_sha256:
            what = "changed since it was recorded"
        else:
            continue
        found.append(
            Finding("rows", f"the row of seq {seq} {what}", seq=seq, file=where.file)
        )
    return found


def proof_words(
    proof: Proof | None,
    since: Since | None = None,
    *,
    out: object = None,
    kept: bool = True,
) -> str:
    """What was checked, in a sentence a person reads (the report, status, the
    viewer); ``out`` names the run in the command it gives; ``kept``: the run
    can keep a proof (a run in a store cannot)."""
    command = _verify_command(out)
    if proof is None and not kept:
        return (
            f"not checked here: `{command}` checks every event and byte (a run "
            "kept in PostgreSQL keeps no proof, so each report checks it whole)"
        )
    if proof is None:
        return (
            f"not verified yet; `{command}` checks every byte once, then reports "
            "check only what comes after"
        )
    said = f"verified up to event {proof.seq} at {proof.at} (every check, every byte)"
    if since is None:
        return said
    if since.events == 0:
        after = f"{said}; no event since"
    else:
        after = (
            f"{said}; since then {plural(since.events, 'event')} checked as a "
            f"chain and {plural(since.rows, 'row')} recorded since read and hashed"
        )
    if since.grown:
        after += (
            f"; {', '.join(since.grown)} changed since, and its bytes verified "
            f"before were not read again (`{command}` reads every byte)"
        )
    return after


#: Events after a proof that ``status`` and the viewer check themselves.
QUICK_LIMIT = 20_000


def _verify_command(out: object) -> str:
    import shlex

    return "rollout-ledger verify" + (
        "" if out is None else f" {shlex.quote(str(out))}"
    )


def checked_since(
    ledger: Ledger, *, out: object = None, quick: bool = False
) -> Verification | None:
    """What came after the last proof, checked, as a ``Verification`` whose
    words say what was and was not read; ``None``: no proof (check whole).

    ``quick``: more than ``QUICK_LIMIT`` events since the proof are not
    checked here (``status`` and the viewer stay quick on a run that grew a
    lot since its last verify); the words say so and name the command that
    checks them.
    """
    proof = read_proof(ledger)
    if proof is None:
        return None
    seq, head = ledger.head()
    if quick and seq - proof.seq > QUICK_LIMIT:
        words = (
            f"{proof_words(proof)}; {plural(seq - proof.seq, 'event')} since, not "
            f"checked here (`{_verify_command(out)}` checks them)"
        )
        return Verification(
            findings=(), seq=seq, head=head, proved_up_to=proof.seq, words=words
        )
    since = check_since(ledger, proof)
    return Verification(
        findings=since.findings,
        seq=seq,
        head=head,
        proved_up_to=proof.seq,
        words=proof_words(proof, since, out=out),
    )


def integrity(
    ledger: Ledger, *, out: object = None, quick: bool = False
) -> tuple[Verification | None, str]:
    """What ``status``, the viewer and an unchecked report say of the run's
    integrity: what came after the last proof, checked (``None``: no proof,
    or not ``check``ed), and the words for it."""
    since = checked_since(ledger, out=out, quick=quick)
    if since is not None:
        return since, since.words
    return None, proof_words(None, out=out, kept=ledger.folder is not None)


def last_proof_words(ledger: Ledger, *, out: object = None) -> str:
    """The last proof in words, nothing checked now (``report --no-verify``)."""
    return proof_words(read_proof(ledger), out=out, kept=ledger.folder is not None)
