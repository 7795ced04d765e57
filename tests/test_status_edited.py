"""Issue 25: ``status`` warns about a row edited in place since it was recorded.

Issue 16 promised it (R-7: ``status`` warns, ``results`` refuses); the
snapshot of what is left (issue 17) lost it: a complete rollout is settled,
its row never read. ``status`` now trusts a stat of ``OUT`` and the sidecar
against what their writer last left, and checks the digests only when a file
moved, so the warning is back and an untouched run reads no row.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main
from ledger import RunPaths, import_legacy_run, rows_untouched
from tests.internals import rows_seen_module
from tests.test_cli_support import CliRun, Templates, graded, templates
from tests.test_legacy_import import lines, make_run, result

__all__ = ["templates"]


def _recorded(run: CliRun) -> None:
    run.create()
    run.collect(lambda row: graded())  # every rollout complete
    run.resume()  # saves the snapshot of what is left: every rollout settled


@pytest.fixture
def done(tmp_path: Path, templates: Templates) -> CliRun:
    made = templates("recorded", tmp_path, _recorded)
    past = time.time() - 10  # the files as written long enough ago (no racy tick)
    for path in (made.out, made.ledger_dir / "rows_seen.json"):
        if path.exists():
            os.utime(path, (past, past))
    return made


def _edit_in_place(path: Path, old: bytes, new: bytes) -> int:
    data = path.read_bytes()
    at = data.index(old)
    with path.open("r+b") as handle:
        handle.seek(at)
        handle.write(new)
    return data[:at].count(b"\n") + 1


def test_status_warns_about_a_row_edited_in_place_of_the_same_length(
    done: CliRun,
) -> None:
    line = _edit_in_place(done.out, b'"reward":1.0', b'"reward":0.0')
    result = done.invoke("status", done.out)
    assert result.exit_code == 0
    assert f"{done.out} line {line}" in result.stderr
    assert "changed since it was recorded" in result.stderr
    assert "rollout-ledger verify" in result.stderr


def test_status_warns_about_a_row_edited_to_another_length(done: CliRun) -> None:
    line = _edit_in_place(done.out, b'"reward":1.0', b'"reward":1.00')
    result = done.invoke("status", done.out, "--json")
    assert f"{done.out} line {line}" in result.stderr


def test_status_of_an_untouched_run_reads_no_row_and_warns_nothing(
    done: CliRun,
) -> None:
    before = done.out.read_bytes()
    result = done.invoke("status", done.out)
    assert result.exit_code == 0
    assert "changed since" not in result.stderr
    done.out.write_bytes(before.replace(b'"reward":1.0', b'"reward":9.0'))
    past = time.time() - 10
    os.utime(done.out, (past, past))  # the times set back: the change time is not
    assert "changed since it was recorded" in done.invoke("status", done.out).stderr


def test_a_writer_s_close_notes_the_files_a_stat_then_trusts(
    tmp_path: Path, templates: Templates, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The note a writer that recorded rows leaves: trusted until a file moves."""
    monkeypatch.setattr(rows_seen_module, "RACY_NS", 0)
    run = templates("created", tmp_path, CliRun.create)
    paths = RunPaths.of(run.out)
    assert not rows_untouched(paths)  # no writer recorded a row yet
    run.collect(lambda row: graded())  # record: rows, then the writer closes
    assert rows_untouched(paths)
    run.ok("status", run.out, "--publish")  # a writer that records no row
    assert rows_untouched(paths)
    _edit_in_place(run.out, b'"reward":1.0', b'"reward":0.0')
    assert not rows_untouched(paths)


def test_an_edit_before_more_rows_are_recorded_still_warns(
    tmp_path: Path, templates: Templates, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that opens on moved files checks the digests before it notes them.

    Else the edit of a row, then a round that records more rows, would leave
    a fresh note over the edited row and ``status`` would trust it.
    """
    run = templates("created", tmp_path, CliRun.create)
    first = run.collect(lambda row: graded() if row["_ng_task_index"] == 0 else None)
    assert first  # some rollouts recorded, some left for the next round
    line = _edit_in_place(run.out, b'"reward":1.0', b'"reward":0.0')
    more = run.collect(lambda row: graded())
    assert more  # the next writer recorded rows after the edit
    monkeypatch.setattr(rows_seen_module, "RACY_NS", 0)  # no racy tick: the stat alone
    result = run.invoke("status", run.out)
    assert f"{run.out} line {line}" in result.stderr
    assert "changed since it was recorded" in result.stderr


def _imported(tmp_path: Path) -> Path:
    """A run saved without a ledger, its files last written long ago, imported."""
    out = make_run(tmp_path, out=lines(result(0, 0), result(0, 1), result(1, 0)))
    past = time.time() - 10
    for path in RunPaths.of(out).out, RunPaths.of(out).sidecar:
        if path.exists():
            os.utime(path, (past, past))
    time.sleep(2.1)  # their change times, too, long enough before the import
    result_ = CliRunner().invoke(main, ["import", str(out), "-q"])
    assert result_.exit_code == 0, result_.output
    return out


def test_issue_30_an_import_notes_the_rows_it_hashed_so_status_reads_none(
    tmp_path: Path,
) -> None:
    out = _imported(tmp_path)
    # The files did not move while read: status trusts the stat, as after a writer.
    assert rows_untouched(RunPaths.of(out))


def test_issue_30_r_7_a_row_edited_after_an_import_is_still_warned_about(
    tmp_path: Path,
) -> None:
    out = _imported(tmp_path)
    line = _edit_in_place(out, b'"reward": 1.0', b'"reward": 0.0')
    assert not rows_untouched(RunPaths.of(out))
    found = CliRunner().invoke(main, ["status", str(out)])
    assert found.exit_code == 0
    assert f"{out} line {line}" in found.stderr
    assert "changed since it was recorded" in found.stderr


def test_issue_30_an_import_that_saw_a_file_move_while_read_notes_nothing(
    tmp_path: Path,
) -> None:
    out = make_run(tmp_path, out=lines(result(0, 0)))
    seen: list[int] = []

    def progress(done: int, total: int) -> None:  # a file appended to mid-read
        if not seen:
            with out.open("ab") as handle:
                handle.write(lines(result(1, 1)))
        seen.append(done)

    import_legacy_run(out, progress=progress)
    assert seen
    assert not (RunPaths.of(out).ledger_dir / "rows_seen.json").exists()
