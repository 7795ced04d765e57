"""``ledger.FollowedFile``: a collector's file followed line by line (REC-86).

A partial last line waits for its newline; a file truncated, rewritten or
replaced after lines were read is broken, in plain words, and nothing more of
it is read (``rollout-ledger run`` then records nothing from it).
"""

from __future__ import annotations

import os
from pathlib import Path

from ledger import FollowedFile


def test_rec_86_a_partial_line_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "output.jsonl"
    followed = FollowedFile(path)
    assert followed.read() == []  # not written yet
    path.write_bytes(b'{"a": 1}\n{"b"')
    assert [(x.number, x.raw) for x in followed.read()] == [(1, b'{"a": 1}')]
    assert followed.read() == []
    with path.open("ab") as handle:
        handle.write(b': 2}\n{"c": 3}')
    assert [x.raw for x in followed.read()] == [b'{"b": 2}']
    (last,) = followed.read(final=True)  # the writer is done: the rest, marked
    assert (last.number, last.raw, last.terminated) == (3, b'{"c": 3}', False)


def test_rec_86_a_truncated_file_is_broken_and_read_no_more(tmp_path: Path) -> None:
    path = tmp_path / "output.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n')
    followed = FollowedFile(path)
    assert len(followed.read()) == 2
    path.write_bytes(b'{"z": 9}\n')  # truncated and rewritten in place
    assert followed.read() == []
    assert followed.broken is not None
    assert "shrank from 18 to 9 bytes after its line 2 was read" in followed.broken
    assert "nothing more of it is recorded" in followed.broken
    with path.open("ab") as handle:
        handle.write(b'{"y": 8}\n{"x": 7}\n')
    assert followed.read() == []  # broken stays broken


def test_rec_86_a_rewritten_or_replaced_file_is_broken(tmp_path: Path) -> None:
    path = tmp_path / "output.jsonl"
    path.write_bytes(b'{"a": 1}\n')
    followed = FollowedFile(path)
    followed.read()
    path.write_bytes(b'{"A": 1}\n{"b": 2}\n')  # the bytes read changed, longer
    assert followed.read() == []
    assert followed.broken is not None
    assert "changed before byte 9" in followed.broken
    other = FollowedFile(path)
    other.read()
    (tmp_path / "new.jsonl").write_bytes(b'{"A": 1}\n{"b": 2}\n{"c": 3}\n')
    os.replace(tmp_path / "new.jsonl", path)  # replaced: another file
    assert other.read() == []
    assert other.broken is not None
    assert "was replaced by another file" in other.broken
