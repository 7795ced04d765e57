"""Issue 30: the floor of each part of reading a large run, on this machine.

``python -m bench.floors OUT`` measures, on a run saved by a collector (``OUT``,
its sidecar and its materialized inputs; ``gen_run.py``'s at 1M rollouts is
5.8 GB), what no program reading those files can do without:

- read: every byte of the three files from the page cache (after one warm-up
  read), in 4 MiB chunks, nothing done with them;
- hash: sha256 of every byte (hashlib, one core; it releases the GIL, so two
  cores hash two files at once);
- decode: every line of ``OUT`` and the sidecar decoded by msgspec into plain
  Python values (one core);
- commit: as many events as the run's import makes, each of the average size
  of its ``ledger.db``'s bodies, appended to a fresh SQLite database in
  transactions of 10,000 rows with ``synchronous=FULL`` (one core).

And, once ``OUT`` was imported (its ``<stem>_ledger/ledger.db``), the events
read back: every row of the log fetched (no decode), then decoded too.
Seconds, never a timed test.
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

_CHUNK = 1 << 22
_BATCH = 10_000


def _files(out: Path) -> list[Path]:
    stem = out.with_suffix("")
    names = [
        out,
        Path(f"{stem}_failures.jsonl"),
        Path(f"{stem}_materialized_inputs.jsonl"),
    ]
    return [p for p in names if p.exists()]


def _timed(what: Callable[[], object]) -> float:
    started = time.perf_counter()
    what()
    return time.perf_counter() - started


def _read(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        with path.open("rb", buffering=0) as handle:
            while chunk := handle.read(_CHUNK):
                total += len(chunk)
    return total


def _hash(paths: list[Path]) -> None:
    for path in paths:
        digest = hashlib.sha256()
        with path.open("rb", buffering=0) as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)


def _decode(paths: list[Path]) -> int:
    decode = msgspec.json.Decoder().decode
    lines = 0
    for path in paths:
        with path.open("rb") as handle:
            for line in handle:
                if line.strip():
                    decode(line)
                    lines += 1
    return lines


def _commit(events: int, size: int) -> None:
    body = b"x" * size
    with tempfile.TemporaryDirectory(prefix="floor-") as folder:
        conn = sqlite3.connect(Path(folder) / "floor.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(
            "CREATE TABLE events (seq INTEGER PRIMARY KEY, kind TEXT, at TEXT, "
            "actor TEXT, body BLOB, prev_hash BLOB, hash BLOB)"
        )
        digest = bytes(32)
        for start in range(1, events + 1, _BATCH):
            rows = [
                (
                    seq,
                    "result_saved",
                    "2026-12-05T00:00:00Z",
                    "import",
                    body,
                    digest,
                    digest,
                )
                for seq in range(start, min(start + _BATCH, events + 1))
            ]
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            conn.execute("COMMIT")
        conn.close()


def _log(out: Path) -> tuple[int, int, float, float] | None:
    db = out.parent / f"{out.stem}_ledger" / "ledger.db"
    if not db.exists():
        return None
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    events, total = conn.execute(
        "SELECT count(*), sum(length(body)) FROM events"
    ).fetchone()

    def fetch() -> None:
        cursor = conn.execute("SELECT seq, kind, body FROM events ORDER BY seq")
        while cursor.fetchmany(4096):
            pass

    def fetch_decode() -> None:
        decode = msgspec.json.Decoder().decode
        cursor = conn.execute("SELECT seq, kind, body FROM events ORDER BY seq")
        while batch := cursor.fetchmany(4096):
            for _, _, body in batch:
                decode(body)

    fetched, decoded = _timed(fetch), _timed(fetch_decode)
    conn.close()
    return int(events), int(total or 0), fetched, decoded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floors", description=__doc__)
    parser.add_argument("out", type=Path, help="the run's OUT file")
    args = parser.parse_args(argv)
    paths = _files(args.out)
    size = _read(paths)  # warm the page cache
    outcomes = [p for p in paths if "materialized" not in p.name]
    print(f"files: {size / 1e9:.2f} GB in {len(paths)} files")
    print(f"read (page cache): {_timed(lambda: _read(paths)):.2f} s")
    print(f"sha256, one core: {_timed(lambda: _hash(paths)):.2f} s")
    lines: list[int] = []
    seconds = _timed(lambda: lines.append(_decode(outcomes)))
    print(f"decode OUT and the sidecar ({lines[0]} lines), one core: {seconds:.2f} s")
    log = _log(args.out)
    if log is not None:
        events, total, fetched, decoded = log
        print(f"the imported log: {events} events, {total / 1e6:.0f} MB of bodies")
        print(f"  fetch every row: {fetched:.2f} s; fetch and decode: {decoded:.2f} s")
        commit = _timed(lambda: _commit(events, max(1, total // max(1, events))))
        each = f"{_BATCH} a transaction"
        print(f"commit {events} events of that size, {each}: {commit:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
