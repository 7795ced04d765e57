"""No spec rule id in anything a person reads (issue 16, "Plain words").

Every command's ``--help``, and a representative set of commands run on a
small run (status, check, history, verify, resume --dry-run, import
--dry-run, diff-config, doctor, results, head, and the errors of approve,
policy, history and create), print no rule id (REC-20.5a, CLI-2, ROW-34,
ID-13, EV-2, R-7, P-6, SC-5, ...) on stdout or stderr. Rule ids stay in
``--json``, docstrings (after click's ``\\f``), comments and event payloads.
Counts are said with correct plurals and rows by file and line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli import main
from tests.nemo_gym_070 import copy_fixture
from tests.test_cli_support import CliRun, Templates, by_key, failed, templates

__all__ = ["templates"]

#: A spec rule id, as cli.md and recovery.md spell them.
RULE_ID = re.compile(r"\b(?:REC|CLI|ROW|ID|EV|R|P|SC)-[0-9]+")
#: A row located by byte offset (``rollouts.jsonl@6471``).
BYTE_PLACE = re.compile(r"\.jsonl@[0-9]")
#: "1 rows", "1 findings", ...: a count of one with a plural noun.
ONE_PLURAL = re.compile(
    r"(?<![0-9.])1 (?:rows|rollouts|events|findings|attempts|lines|tasks|changes|"
    r"keys|files|outcomes|acceptances|overrides|errors)\b"
)

MIXED = {
    (0, 1): failed("session_lost", answer=True),  # REC-20.5h: held, kept_answer
    (1, 0): failed("agent_timeout", answer=True),  # REC-20.5a: settled zero
    (2, 1): failed("session_lost"),  # REC-20.5i: counted, retry
}


def _build(run: CliRun) -> None:
    run.create()
    run.collect(by_key(MIXED))


@pytest.fixture
def mixed(tmp_path: Path, templates: Templates) -> CliRun:
    return templates("plain_words_mixed", tmp_path, _build)


def _text(result: Result) -> str:
    return result.stdout + result.stderr


def assert_plain(result: Result, what: str) -> None:
    text = _text(result)
    assert not RULE_ID.findall(text), (what, RULE_ID.findall(text), text)
    assert not BYTE_PLACE.findall(text), (what, text)
    assert not ONE_PLURAL.findall(text), (what, ONE_PLURAL.findall(text), text)


def _command_names() -> list[str]:
    return sorted(main.list_commands(None))  # type: ignore[arg-type]


def _invoke(*args: object) -> Result:
    """``rollout-ledger ARGS`` in process, outside any built run."""
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize("name", ["", *_command_names()])
def test_cli_16_help_of_every_command_names_no_rule_id(name: str) -> None:
    """CLI-16: every --help (the group's and each command's) is plain words."""
    result = _invoke(*([name] if name else []), "--help")
    assert result.exit_code == 0
    assert_plain(result, f"{name} --help")


def test_cli_6_7_8_9_reading_commands_print_no_rule_id(mixed: CliRun) -> None:
    """CLI-6, CLI-7, CLI-8, CLI-9: status, check, history, verify, head."""
    out = mixed.out
    for args in (
        ("status", out),
        ("check", out),
        ("history", out),
        ("history", out, "--task", 0, "--rollout", 1),
        ("history", out, "--task", 1, "--rollout", 0),
        ("history", out, "--task", 2, "--rollout", 1),
        ("verify", out),
        ("head", out),
        ("doctor", out),
        ("results", out, "-o", mixed.folder / "selected.jsonl"),
    ):
        result = mixed.invoke(*args)
        assert result.exit_code in (0, 75, 76), (args, _text(result))
        assert_plain(result, " ".join(map(str, args)))


def test_cli_4_11_resume_dry_run_and_diff_config_print_no_rule_id(
    mixed: CliRun,
) -> None:
    """CLI-4, CLI-11: the gate's verdict and plan, and the comparison."""
    result = mixed.ok("resume", mixed.out, *mixed.config_args(), "--dry-run")
    assert_plain(result, "resume --dry-run")
    result = mixed.invoke("diff-config", mixed.out, *mixed.config_args())
    assert_plain(result, "diff-config")


def test_cli_10_operator_errors_and_previews_print_no_rule_id(mixed: CliRun) -> None:
    """CLI-10: approve's refusal and preview, policy's refusal, bad filters."""
    out = mixed.out
    for args in (
        ("approve", out, "--task", 0, "--rollout", 0, "--attempt", 0, "--reason", "x"),
        ("approve", out, "--all-held", "--reason", "x", "--dry-run"),
        ("policy", out, "--set", "fault_share=abc", "--reason", "x"),
        ("policy", out, "--set", "no_such_key=1", "--reason", "x"),
        ("history", out, "--task", 9, "--rollout", 0),
        ("history", out, "--since", 0),
        ("create", out, "--inputs", mixed.inputs, *mixed.config_args()),
        ("status", mixed.folder / "missing" / "rollouts.jsonl"),
    ):
        result = mixed.invoke(*args)
        assert_plain(result, " ".join(map(str, args)))


def test_cli_3_import_dry_run_of_a_real_run_prints_no_rule_id(tmp_path: Path) -> None:
    """CLI-3, REC-70: import --dry-run on a NeMo Gym 0.7.0 fixture run."""
    out = copy_fixture("a01", tmp_path)
    result = _invoke("import", out, "--dry-run")
    assert result.exit_code == 0, _text(result)
    assert_plain(result, "import --dry-run")
    result = _invoke("status", out)
    assert_plain(result, "status of a run without a ledger")


def test_the_check_fails_on_a_rule_id() -> None:
    """The scan itself: it finds an id, an offset and a singular plural."""
    assert RULE_ID.search("Start a run (CLI-2).")
    assert RULE_ID.search("decided by REC-20.5a")
    assert BYTE_PLACE.search("result (example_rollouts.jsonl@6471)")
    assert ONE_PLURAL.search("recorded 1 rows")
    assert not ONE_PLURAL.search("recorded 11 rows, 0.1 rows")


@pytest.mark.parametrize("name", ["branches", "rejudge_and_approvals"])
def test_cli_8_history_names_each_row_by_its_file_and_line(
    name: str, tmp_path: Path
) -> None:
    """CLI-8: "(rollouts.jsonl line N)" is the line that holds the recorded row."""
    from ledger import Ledger
    from ledger.events import ResultSaved
    from tests.test_golden import rebuild_golden

    out = rebuild_golden(name, tmp_path)
    printed = _invoke("history", out).stdout
    lines = out.read_bytes().split(b"\n")
    checked = 0
    with Ledger.open(out) as led:
        for event in led.events(kinds=["result_saved"]):
            body = event.body
            assert isinstance(body, ResultSaved)
            entry = next(
                x for x in printed.splitlines() if x.split()[0] == str(event.seq)
            )
            found = re.search(r"\((\S+) line (\d+)\)$", entry)
            assert found is not None, entry
            assert found[1] == body.location.file
            row = out.read_bytes()[body.location.offset :][: body.location.length]
            assert lines[int(found[2]) - 1] + b"\n" == row
            checked += 1
    assert checked


def test_cli_2_5_10_recording_commands_print_plain_words_and_counts(
    tmp_path: Path,
) -> None:
    """CLI-2, CLI-5, CLI-10: what create, record and the operator actions print."""
    run = CliRun(tmp_path, tasks=1, rollouts=1)
    printed = [run.create()]
    _, plan = run.resume()
    printed.append(run.record([{**plan[0], **failed("session_lost", answer=True)}]))
    out = run.out
    for args in (
        ("approve", out, "--task", 0, "--rollout", 0, "--attempt", 0, "--reason", "x"),
        ("extend-attempts", out, 2, "--reason", "x"),
        ("reset-budget", out, "--reason", "x"),
        ("policy", out, "--set", "max_free_attempts=3", "--reason", "x"),
        ("export", out, "-o", tmp_path / "events.jsonl"),
        ("results", out, "--all", "-o", tmp_path / "selected.jsonl"),
    ):
        printed.append(run.ok(*args))
    for result in printed:
        assert_plain(result, result.stdout)
    text = "".join(r.stdout for r in printed)
    assert "1 rollout of 1 task" in text
    assert "recorded 1 row: 0 results, 1 failure" in text
    assert "plan changes (1 rollout):" in text


def test_cli_8_the_rule_id_stays_in_history_json(mixed: CliRun) -> None:
    """CLI-8: --json keeps the deciding rule's id for auditors (REC-20.5a)."""
    import json

    result = mixed.ok("history", mixed.out, "--task", 1, "--rollout", 0, "--json")
    document = json.loads(result.stdout)
    assert document["decision"]["rule"] == "REC-20.5a"
    text = mixed.ok("history", mixed.out, "--task", 1, "--rollout", 0).stdout
    assert "REC-" not in text
    assert "rule: The model ran out of its own time limit" in text


def test_rec41_every_term_status_prints_is_in_the_glossary() -> None:
    """REC-41: each decision and reason in the golden status outputs is explained.

    A reason is shown as a few words (``settled as zero``); each stands for one
    glossary term (``settled_zero``), which docs/glossary.md explains.
    """
    from projections import GLOSSARY, REASON_LABELS

    term_of = {words: term for term, words in REASON_LABELS.items()}
    pages = sorted((Path(__file__).parent / "golden" / "text").glob("*.status.txt"))
    assert pages
    seen = set()
    for page in pages:
        for line in page.read_text(encoding="utf-8").splitlines():
            row = re.fullmatch(r"  ([a-z_]+) +\d+(?:  \((.*)\))?", line)
            if row is None:
                continue
            seen.add(row[1])
            for part in (row[2] or "").split(", "):
                if part:
                    words = part.rsplit(" ", 1)[0]
                    seen.add(term_of.get(words, words))
    assert {"held", "complete", "settled_zero", "kept_answer"} <= seen
    assert sorted(term for term in seen if term not in GLOSSARY) == []
    assert sorted(term for term in REASON_LABELS if term not in GLOSSARY) == []
