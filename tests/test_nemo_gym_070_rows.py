"""NeMo Gym 0.7.0 row shapes decided (ROW-60..ROW-63), on the fixture runs.

Each test imports a fixture run (``nemo-gym-0.7/<run>``) through the public
API and decides task 0's rollout 0, the shape under test; rollout 1 is a plain
success. Rows a test needs beyond the fixtures are rollout 0's row edited in
the test's own copy.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from projections import import_run
from tests.nemo_gym_070 import (
    Row,
    copy_fixture,
    decision,
    imported,
    released_plan,
    runs,
)

# -- every fixture run imports; its plain success stays complete ------------------

#: Runs about the files themselves (torn or unterminated lines, a sidecar line
#: without indices, a drained row 0.7.0 never writes, multistage keys, a blank
#: input line): other rules decide those, so rollout 1 is not asserted.
FILE_FAULTS = ("c04", "f01", "f02", "f03", "f04", "f06")


@pytest.mark.parametrize("name", runs())
def test_rec_70_every_070_run_imports_and_its_success_is_complete(
    name: str, tmp_path: Path
) -> None:
    """ROW-60..ROW-63, REC-80..REC-82 change no decision of a plain success."""
    out = copy_fixture(name.split("_")[0], tmp_path)
    result = import_run(out, skip_rejected=True)
    assert result.coverage.expected >= 1
    if not name.startswith(FILE_FAULTS):
        assert decision(out, rollout=1).value == "complete"


# -- decisions the 0.7.0 shapes already had (the reference's "yes" rows) ----------

UNCHANGED = [
    ("a04", "retry", "REC-20.5i"),
    ("a05", "retry", "REC-20.5i"),
    ("a10", "retry", "REC-20.5i"),
    ("a11", "retry", "REC-20.5i"),
    ("a12", "terminal", "REC-20.5b"),
    ("a13", "complete", "REC-20.5a"),
    ("a14", "terminal", "REC-20.5b"),
    ("a15", "retry", "REC-20.5i"),
    ("a16", "complete", "REC-20.4e"),
    ("a17", "complete", "REC-20.4e"),
    ("a19", "complete", "REC-20.4e"),
    ("a20", "retry", "REC-20.4b"),
    ("c01", "retry", "REC-20.5f"),
    ("c02", "retry", "REC-20.5i"),
    ("c03", "retry", "REC-20.5f"),
    ("c05", "retry", "REC-20.5i"),
    ("c06", "terminal", "REC-20.5b"),
    ("c08", "held", "REC-20.5h"),
    ("c09", "complete", "REC-20.4e"),
    ("c10", "complete", "REC-20.4e"),
    ("f05", "complete", "REC-20.4e"),
    ("f07", "complete", "REC-20.4e"),
    ("f08", "exhausted", "REC-20.5i"),
    ("j01", "rejudge", "REC-20.5g"),
    ("j03", "rejudge", "REC-20.5g"),
    ("j05", "rejudge", "REC-20.5g"),
    ("j06", "terminal", "REC-20.5b"),
    ("s01", "retry", "REC-20.5i"),
    ("s02", "terminal", "REC-20.5b"),
    ("s03", "terminal", "REC-20.5b"),
    ("s04", "retry", "REC-20.5i"),
    ("s05", "rejudge", "REC-20.5g"),
    ("s06", "retry", "REC-20.5i"),
    ("s07", "retry", "REC-20.5i"),
]


@pytest.mark.parametrize(("run", "value", "rule"), UNCHANGED)
def test_rec_20_070_shapes_keep_their_decisions(
    run: str, value: str, rule: str, tmp_path: Path
) -> None:
    """ROW-61, ROW-62, REC-81: none of these rows changes its decision."""
    found = decision(imported(run, tmp_path))
    assert (found.value, found.rule) == (value, rule)


def test_row_62_a13_timeout_with_an_incomplete_response_stays_settled(
    tmp_path: Path,
) -> None:
    """ROW-62 needs a complete response: nooa's partial episode (status
    ``incomplete``) is the agent's deadline, a settled zero (REC-21)."""
    found = decision(imported("a13", tmp_path))
    assert (found.value, found.reason, found.score) == ("complete", "settled_zero", 0)


# -- ROW-60: `_ng_failure_stage` ---------------------------------------------------


def test_row_60_c07_verification_stage_failure_with_kept_answer_is_rejudged(
    tmp_path: Path,
) -> None:
    found = decision(imported("c07", tmp_path))
    assert (found.value, found.rule, found.reason) == (
        "rejudge",
        "REC-20.5h",
        "verification",
    )
    assert found.attempt == 0  # the kept answer's own attempt is judged again


def test_row_60_stage_named_agent_keeps_the_answer_held(tmp_path: Path) -> None:
    """The same row at stage ``agent`` (c08's shape) is held, never re-judged."""

    def agent_stage(row: Row) -> Row:
        return {**row, "_ng_failure_stage": "agent"}

    found = decision(imported("c07", tmp_path, edit=agent_stage))
    assert (found.value, found.reason) == ("held", "kept_answer")


# -- ROW-61: failure-path placeholders are retried within the cap -------------------


def test_row_61_a01_tau2_empty_assistant_message_is_retried(tmp_path: Path) -> None:
    found = decision(imported("a01", tmp_path))
    assert (found.value, found.attempt, found.kind) == ("retry", 1, "tau2_agent_error")


def test_row_61_a03_harbor_failed_status_without_output_is_retried(
    tmp_path: Path,
) -> None:
    found = decision(imported("a03", tmp_path))
    assert (found.value, found.attempt, found.kind) == ("retry", 1, "harbor_failed")


def _conversational(row: Row) -> Row:
    # The conversational simulation's "Failed: ..." text, its id ending in
    # `_failed`, with `instance_config.mask_sample` set.
    response = dict(row["response"])
    response["id"] = "conversational_tool_use_stage1_failed"
    message = dict(response["output"][0])
    message["content"] = [{"type": "output_text", "text": "Failed: tool crashed"}]
    response["output"] = [message]
    return {**row, "response": response, "instance_config": {"mask_sample": True}}


def test_row_61_conversational_failed_text_is_retried(tmp_path: Path) -> None:
    found = decision(imported("s07", tmp_path, edit=_conversational))
    assert (found.value, found.attempt, found.kind) == ("retry", 1, "transient")


@pytest.mark.parametrize(
    "suffix",
    [
        "-failed",
        "_failed",
        "-timeout",
        "-killed",
        "-skipped",
        "-incomplete",
        "-error",
        "-permanent-failure",
    ],
)
def test_row_61_placeholder_id_suffixes_are_retried(
    suffix: str, tmp_path: Path
) -> None:
    """s10's kept answer (held) becomes a placeholder when its id says so."""

    def renamed(row: Row) -> Row:
        return {**row, "response": {**row["response"], "id": f"gdpval-t0{suffix}"}}

    found = decision(imported("s10", tmp_path, edit=renamed))
    assert (found.value, found.attempt) == ("retry", 1)


def test_row_61_an_answer_beside_an_empty_message_is_no_placeholder(
    tmp_path: Path,
) -> None:
    """Only an output of empty assistant messages alone is a placeholder."""

    def with_text(row: Row) -> Row:
        response = row["response"]
        text = [{"type": "output_text", "text": "42"}]
        answer = {**response["output"][0], "content": text}
        output = [*response["output"], answer]
        return {**row, "response": {**response, "output": output}}

    found = decision(imported("a01", tmp_path, edit=with_text))
    assert (found.value, found.reason) == ("held", "kept_answer")


# -- ROW-62: a timeout raised in verification -----------------------------------------


def test_row_62_s08_timeout_with_complete_response_is_rejudged(tmp_path: Path) -> None:
    found = decision(imported("s08", tmp_path))
    assert (found.value, found.rule, found.reason) == (
        "rejudge",
        "REC-20.5h",
        "verification",
    )
    assert found.score is None  # never settled as the agent's zero


def test_row_62_final_message_without_status_counts_as_complete(
    tmp_path: Path,
) -> None:
    """No status: the policy's final message present says the policy finished."""

    def no_status(row: Row) -> Row:
        return {**row, "response": {**row["response"], "status": None}}

    found = decision(imported("s08", tmp_path, edit=no_status))
    assert (found.value, found.reason) == ("rejudge", "verification")


# -- ROW-63: a kept deliverable --------------------------------------------------------


def test_row_63_s09_kept_deliverable_is_rejudged_and_planned_with_it(
    tmp_path: Path,
) -> None:
    out = imported("s09", tmp_path)
    found = decision(out)
    assert (found.value, found.reason) == ("rejudge", "verification")
    plan = released_plan(out)
    assert plan.dispatch == []
    (item,) = plan.rejudge
    assert (item.task, item.rollout, item.attempt) == (0, 0, 0)
    assert item.reuse_cached_deliverable is True
    assert item.deliverables_dir == "/runs/deliverables/task_t0/repeat_0"
    # The plan file's line (CLI-5) carries both keys for the collector.
    line = msgspec.json.decode(msgspec.json.encode({"rejudge": item}))
    assert line["rejudge"]["reuse_cached_deliverable"] is True
    assert line["rejudge"]["deliverables_dir"] == "/runs/deliverables/task_t0/repeat_0"


def test_row_63_a_rejudge_without_deliverable_has_no_deliverable_keys(
    tmp_path: Path,
) -> None:
    (item,) = released_plan(imported("j01", tmp_path)).rejudge
    line = msgspec.json.decode(msgspec.json.encode(item))
    assert set(line) == {"task", "rollout", "attempt", "file", "offset", "length"}


def test_row_63_deliverables_dir_alone_names_a_kept_deliverable(
    tmp_path: Path,
) -> None:
    def dir_only(row: Row) -> Row:
        return {k: v for k, v in row.items() if k != "reuse_cached_deliverable"}

    out = imported("s09", tmp_path, edit=dir_only)
    assert decision(out).value == "rejudge"
    (item,) = released_plan(out).rejudge
    assert item.reuse_cached_deliverable is True


def test_row_63_a_key_written_with_escapes_still_names_the_deliverable(
    tmp_path: Path,
) -> None:
    """The plan skips decoding rows that cannot name a deliverable: not these."""
    out = copy_fixture("s09", tmp_path)
    sidecar = out.with_name("rollouts_failures.jsonl")
    text = sidecar.read_text(encoding="utf-8")
    for key in ("reuse_cached_deliverable", "deliverables_dir"):
        assert f'"{key}"' in text
        escaped = key.replace("_", "\\u005f")  # the same key, JSON-escaped
        text = text.replace(f'"{key}"', f'"{escaped}"')
    sidecar.write_text(text, encoding="utf-8")
    import_run(out)
    (item,) = released_plan(out).rejudge
    assert item.reuse_cached_deliverable is True
    assert item.deliverables_dir == "/runs/deliverables/task_t0/repeat_0"


def test_row_63_an_empty_deliverables_dir_names_none(tmp_path: Path) -> None:
    """s09 without a deliverable is s10's shape again: held for an operator."""

    def no_deliverable(row: Row) -> Row:
        kept = {k: v for k, v in row.items() if k != "reuse_cached_deliverable"}
        return {**kept, "deliverables_dir": ""}

    found = decision(imported("s09", tmp_path, edit=no_deliverable))
    assert (found.value, found.reason) == ("held", "kept_answer")
