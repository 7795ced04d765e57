"""An atheris harness (R-5) for ``row_facts`` and the importer's line parser.

Not part of the suite and not a dependency: hypothesis is the CI fuzzer
(``tests/test_import_fuzz.py``, ``tests/test_row_facts.py``); this is for a
coverage-guided run by hand. The first input byte picks the target:

- ``row_facts`` of any JSON value (or of the raw text): it never raises, gives
  the same facts twice, and they store in a ``result_saved`` that decodes back;
- ``read_materialized`` (the importer's index of the inputs): the index, or a
  ``LedgerError`` with a message;
- ``OutcomeReader`` over the lines of ``OUT`` or the sidecar: each line becomes
  an event whose stored bytes decode back, or a rejection naming its line.

Any other exception or a failed assertion is a finding. atheris installs from
a wheel, outside the project's environment; seed it with real rows::

    .venv/bin/pip install --target /tmp/atheris-pkgs atheris
    export PYTHONPATH=/tmp/atheris-pkgs:.
    .venv/bin/python tests/fuzz/fuzz_rows.py --seed /tmp/fuzz-corpus
    .venv/bin/python tests/fuzz/fuzz_rows.py /tmp/fuzz-corpus -max_total_time=30 \\
        -artifact_prefix=/tmp/fuzz-
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["ledger"]):
    import msgspec

    from ledger import LedgerError, row_facts
    from ledger.events import Location, ResultSaved, decode_body, encode_body
    from tests.internals import OutcomeReader, raw_lines
    from tests.internals import legacy_read_materialized as read_materialized
    from tests.prerequisites import nemo_gym_fixtures

RUN_ID = "5f" + "0" * 30
KEYS = frozenset((task, rollout) for task in range(3) for rollout in range(2))
FIXTURES = nemo_gym_fixtures()
TARGETS = 3
WHERE = Location(file="rollouts.jsonl", offset=0, length=1, row_sha256="0" * 64)


def fuzz_facts(data: bytes) -> None:
    try:
        value: object = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError):
        value = data.decode("utf-8", "replace")
    body = ResultSaved(
        task=0, rollout=0, attempt=0, location=WHERE, facts=row_facts(value)
    )
    stored = encode_body(body)
    again = msgspec.structs.replace(body, facts=row_facts(value))
    assert encode_body(again) == stored, "row_facts is not deterministic"
    # REC-12: what is stored must decode, with every Meta constraint checked.
    assert decode_body(stored) == body, "stored facts do not decode back"


def fuzz_materialized(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "inputs.jsonl"
        path.write_bytes(data)
        try:
            found = read_materialized(path, "inputs.jsonl")
        except LedgerError as exc:
            message = str(exc)
            assert message, "an empty message"
            return
    assert found.rows
    assert len(list(found.keys)) == found.rows
    assert len(msgspec.json.decode(b"[" + found.index + b"]")) == found.rows


def fuzz_outcomes(data: bytes, *, sidecar: bool) -> None:
    reader = OutcomeReader(keys=KEYS, run_id=RUN_ID)
    lines = list(raw_lines(io.BytesIO(data)))
    for line in lines:
        # The per-line step of OutcomeReader.read, without a file on disk.
        reader._line(line, "rollouts.jsonl", sidecar=sidecar)
    for body in reader.bodies:
        assert decode_body(encode_body(body)) == body, "an event does not decode"
    for rejection in reader.rejections:
        assert 1 <= rejection.line <= len(lines)
        assert rejection.reason
    assert len(reader.bodies) + len(reader.rejections) == len(lines)


def one_input(data: bytes) -> None:
    """The fuzz target: the first byte picks what the rest is fed to."""
    if not data:
        return
    target, rest = data[0] % TARGETS, data[1:]
    if target == 0:
        fuzz_facts(rest)
    elif target == 1:
        fuzz_materialized(rest)
    else:
        fuzz_outcomes(rest, sidecar=bool(data[0] & 0x80))


def write_seeds(folder: Path) -> None:
    """A seed corpus: the first rows of the NeMo Gym fixtures, for each target."""
    folder.mkdir(parents=True, exist_ok=True)
    for number, path in enumerate(sorted(FIXTURES.rglob("*rollouts*.jsonl"))[:40]):
        rows = path.read_bytes().splitlines(keepends=True)[:3]
        if not rows:
            continue
        for target, rest in enumerate([rows[0], b"".join(rows), b"".join(rows)]):
            (folder / f"seed-{number}-{target}").write_bytes(bytes([target]) + rest)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--seed"]:
        write_seeds(Path(sys.argv[2]))
    else:
        atheris.Setup(sys.argv, one_input)
        atheris.Fuzz()
