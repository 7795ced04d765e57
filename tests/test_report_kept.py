"""Issue 30: a report of a log that did not move reads the model the last one kept.

The page's values are kept beside the log under a key of the head, the code
and the files the page reads. A report of the same log then reads them
instead of replaying the run, and its page is the same bytes as one made
afresh; one more event, a touched file or a damaged kept file makes the page
afresh. Integrity is checked each time. None of these is a timed test.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import ledger
import projections
from tests.test_cli_support import CliRun, by_key, failed, graded

KEPT = "report_model.msgpack"


def _run(tmp_path: Path) -> CliRun:
    run = CliRun(tmp_path, tasks=3, rollouts=2)
    run.create()
    run.collect(by_key({(0, 0): failed("transient"), (1, 1): failed("transient")}))
    time.sleep(2.1)  # files last written long enough ago to be kept under
    return run


def _page(run: CliRun, *extra: str) -> str:
    page = run.folder / "report.html"
    run.ok("report", run.out, "-o", page, *extra)
    return page.read_text()


def _model(run: CliRun, *, verify: bool = False) -> projections.ReportModel:
    with ledger.open_run(run.out) as led:
        return projections.report_model(led, out=str(run.out), verify=verify)


def _fresh(run: CliRun, *extra: str) -> str:
    """The page made with nothing kept."""
    (run.ledger_dir / KEPT).unlink(missing_ok=True)
    page = _page(run, *extra)
    return page


def test_issue_30_a_report_of_an_unmoved_log_reads_the_kept_model(
    tmp_path: Path,
) -> None:
    run = _run(tmp_path)
    first = _page(run, "--no-verify")
    assert (run.ledger_dir / KEPT).is_file()
    model = _model(run)
    assert model.kept is True
    assert model.rollouts == 6
    again = _page(run, "--no-verify")
    assert again == first  # the same bytes as the page computed afresh
    # Checked reports: integrity is checked each time, the values are kept.
    checked = _page(run)
    assert _model(run, verify=True).kept is True
    assert checked == _fresh(run)
    assert "Every check, every byte" in checked


def test_issue_30_one_more_event_or_a_touched_file_makes_the_page_afresh(
    tmp_path: Path,
) -> None:
    run = _run(tmp_path)
    _page(run, "--no-verify")
    assert _model(run).kept is True
    run.collect(lambda row: graded(0.5))  # a second round: events and rows
    model = _model(run)
    assert model.kept is False
    assert model.context["headline"]["complete"] == 6
    # A file the page reads, touched: made afresh, nothing stale shown.
    time.sleep(2.1)
    _page(run, "--no-verify")
    assert _model(run).kept is True
    run.out.write_bytes(run.out.read_bytes())  # same bytes, new change time
    assert _model(run).kept is False


def test_issue_30_a_damaged_kept_model_is_made_afresh_never_trusted(
    tmp_path: Path,
) -> None:
    run = _run(tmp_path)
    page = _page(run, "--no-verify")
    kept = run.ledger_dir / KEPT
    data = bytearray(kept.read_bytes())
    at = data.index(b"complete") + 2
    data[at] ^= 0x01
    kept.write_bytes(bytes(data))
    assert _model(run).kept is False
    assert _page(run, "--no-verify") == page


def test_issue_30_r_7_a_changed_byte_is_never_hidden_by_a_kept_model(
    tmp_path: Path,
) -> None:
    run = _run(tmp_path)
    _page(run, "--no-verify")
    data = run.out.read_bytes()
    at = data.index(b'"42"') + 1  # one byte of an answer, its length kept
    run.out.write_bytes(data[:at] + b"7" + data[at + 1 :])
    assert _model(run).kept is False
    result = run.invoke("report", run.out, "-o", run.folder / "r.html", "--json")
    found = json.loads(result.stdout)
    assert found["verified"] is False
    assert found["findings"] >= 1


def test_issue_30_a_large_page_decodes_only_its_listed_rollouts_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the grid's limit only unfinished rollouts get a trail: the report
    leaves the other rollouts' results undecoded, and says what it said."""
    from tests.internals import report_context_module

    run = _run(tmp_path)
    monkeypatch.setattr(report_context_module, "GRID_LIMIT", 1)  # bands, a list
    out = str(run.out)
    with ledger.open_run(run.out) as led:
        state = projections.replay(led)
        decisions = projections.decide_all(state)
        metrics = projections.reward_metrics(led, state, decisions=decisions)
        whole = projections.report_context(
            state,
            led.events(1),
            decisions,
            out=out,
            metrics=metrics.to_dict(),
            ledger=led,
            proof=projections.last_proof_words(led, out=out),
        )
        model = projections.report_model(led, out=out, verify=False)
    assert model.kept is False
    listed = {(t["task"], t["rollout"]) for t in whole["trails"].values()}
    assert 0 < len(listed) < state.expected  # some rollouts were left out
    assert model.context == whole
