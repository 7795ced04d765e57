"""Issue 30: ``import`` parses a large file's lines in other processes; the
events are the same bytes, and the head hash the same, whatever the number.

The run has what makes reading order matter: several sidecar rows of one key
before its row in OUT (their attempts are numbered in order, REC-72), rows
with their own attempt index, an omission stand-in, a moved row (REC-82),
rejected lines (a blank line, a line that is no JSON, an unknown key, another
run's row) and a torn last line. The files are cut into many small chunks so
that lines of one key land in chunks parsed by different processes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger import Clock, Ledger
from projections import import_run
from tests.test_cli_support import graded

pytestmark = pytest.mark.slow


def _line(row: dict[str, Any]) -> str:
    return json.dumps(row) + "\n"


def _write_run(folder: Path, tasks: int = 60, repeats: int = 4) -> Path:
    folder.mkdir()
    inputs, out, sidecar = [], [], []
    for task in range(tasks):
        for rollout in range(repeats):
            key = {"_ng_task_index": task, "_ng_rollout_index": rollout}
            inputs.append(
                _line(
                    {
                        **key,
                        "agent_ref": {"name": "math_agent"},
                        "responses_create_params": {
                            "input": [{"role": "user", "content": f"Problem {task}"}]
                        },
                    }
                )
            )
            shape = (task * repeats + rollout) % 6
            if shape in (1, 2):  # one or two failures first, then the answer
                for _ in range(shape):
                    sidecar.append(
                        _line(
                            {
                                **key,
                                "_ng_failure_class": "transient",
                                "_ng_failure_message": "connection reset",
                            }
                        )
                    )
            if shape == 3:  # an omission stand-in, no answer
                sidecar.append(_line({**key, "_ng_omitted": True}))
                continue
            if shape == 4:  # its own attempt index
                out.append(_line({**key, "_ng_attempt_index": 0, **graded(0.0)}))
                continue
            if shape == 5 and task % 5 == 0:  # moved: a sidecar copy, then OUT
                sidecar.append(
                    _line(
                        {
                            **key,
                            "_ng_attempt_index": 3,
                            "_ng_migrated_invalid_judge_response": True,
                            "_ng_failure_class": "judge_failed",
                        }
                    )
                )
                out.append(_line({**key, "_ng_attempt_index": 3, **graded(1.0)}))
                continue
            out.append(_line({**key, **graded(1.0)}))
    out[10:10] = [
        "\n",
        "{not json\n",
        _line({"_ng_task_index": 999, "_ng_rollout_index": 0, **graded(1.0)}),
    ]
    out.append(
        _line(
            {
                "_ng_task_index": 0,
                "_ng_rollout_index": 0,
                "_ng_run_id": "other",
                **graded(1.0),
            }
        )
    )
    (folder / "rollouts_materialized_inputs.jsonl").write_text("".join(inputs))
    (folder / "rollouts_failures.jsonl").write_text("".join(sidecar))
    (folder / "rollouts.jsonl").write_text(
        "".join(out) + '{"_ng_task_index": 1, "_ng_roll'
    )
    return folder / "rollouts.jsonl"


def _events(out: Path) -> tuple[list[tuple[int, str, bytes]], tuple[int, bytes]]:
    with Ledger.open(out) as led:
        rows = [(e.seq, e.kind, e.hash) for e in led.events()]
        return rows, led.head()


def test_issue_30_import_at_both_core_counts_makes_the_same_events_and_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ledger.legacy.reading.PARALLEL_BYTES", 0)
    monkeypatch.setattr("ledger.legacy.parsing._CHUNK_BYTES", 512)  # many chunks
    found = {}
    for jobs in (1, 2):
        out = _write_run(tmp_path / f"jobs{jobs}")
        result = import_run(out, skip_rejected=True, clock=Clock(seed=5), jobs=jobs)
        found[jobs] = (result.report, _events(out))
    one, two = found[1], found[2]
    assert one[1] == two[1]  # every event's seq, kind and hash; the head
    assert one[0].rejections == two[0].rejections
    assert len(one[0].rejections) == 5  # blank, not JSON, unknown key, other run, torn
    seqs, (head_seq, _) = one[1]
    assert len(seqs) == head_seq > 240  # every row became an event
    kinds = {kind for _, kind, _ in seqs}
    assert {"failure_saved", "omission_saved", "result_saved"} <= kinds
