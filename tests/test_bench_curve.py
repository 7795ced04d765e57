"""The cost curve's pieces (bench/curve*.py, bench/ng070.py, bench/incumbent.py).

Never a timing assertion: these check what the curve reads and decides. The
imitation of NeMo Gym 0.7.0's resume must dispatch what 0.7.0 dispatches for
each fate ``gen_run.py`` writes (and, when 0.7.0's venv is named by
``ROLLOUT_LEDGER_NG07``, exactly the rows the real one hands to dispatch).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest

from bench.curve import compare_text
from bench.curve_data import generate
from bench.harness import _chosen
from bench.incumbent import dispatch_keys, plan_resume
from bench.ng070 import NO_VENV, VENV_ENV, Incumbent, find_venv, parse_result
from bench.ng070 import tools_dir as ng_tools
from tests.internals import encode_rows

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ng_tools()
needs_tools = pytest.mark.skipif(
    not (TOOLS / "gen_run.py").is_file(), reason=f"no incumbent-0.7 tools at {TOOLS}"
)

# 0.7.0's RESULT line.

RESULT = {"import_s": 4.6, "plan_s": 0.5, "hwm_at_dispatch_kib": 320752, "dispatch": 7}


def test_result_line_is_read_among_the_collectors_prints() -> None:
    noise = "Resumed from cache. Found:\n- 7 rows that still need to be run\n"
    older = "RESULT " + json.dumps(RESULT | {"dispatch": 1})
    stdout = f"{noise}{older}\nQuerying\nRESULT {json.dumps(RESULT)}\n"
    assert parse_result(stdout) == RESULT


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("Resumed from cache.\n", "no RESULT line"),
        ("RESULT " + json.dumps({"import_s": 1.0}) + "\n", "lacks"),
    ],
)
def test_result_line_missing_or_short_raises(stdout: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_result(stdout)


# Where 0.7.0's venv is found: the option, else the environment, else nowhere.


def _venv(folder: Path) -> Path:
    (folder / "venv" / "bin").mkdir(parents=True)
    (folder / "venv" / "bin" / "python").write_text("")
    (folder / "x").mkdir()
    return folder


def test_venv_from_option_then_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    option, named = _venv(tmp_path / "a"), _venv(tmp_path / "b")
    monkeypatch.setenv(VENV_ENV, str(named))
    assert find_venv(option) == option
    assert find_venv(None) == named
    monkeypatch.delenv(VENV_ENV)
    assert find_venv(None) is None
    (option / "x").rmdir()
    assert find_venv(option) is None  # no unpacked wheel: not usable


def test_incumbent_command_names_the_tools_and_the_lean_mode(tmp_path: Path) -> None:
    inc = Incumbent(tmp_path / "ng", tmp_path / "tools")
    lean = inc.command(tmp_path / "out.jsonl", lean=True, dump=tmp_path / "k.tsv")
    assert lean[1] == str(tmp_path / "tools" / "incumbent_plan.py")
    assert "--no-retain" in lean
    assert lean[-2:] == ["--dump", str(tmp_path / "k.tsv")]
    assert "--no-retain" not in inc.command(tmp_path / "out.jsonl", lean=False)


# --only: the curve is a section of its own.


def test_only_curve_runs_no_target_and_no_only_runs_both() -> None:
    assert _chosen("CURVE") == ((), True)
    targets, curve = _chosen("P-1,curve")
    assert [t.id for t in targets] == ["P-1"]
    assert curve
    targets, curve = _chosen(None)
    assert len(targets) > 1
    assert curve
    assert _chosen("P-6")[1] is False


# The imitation's per-row checks, as 0.7.0's _drop_truncated_tail and _load_from_cache.


def _key(task: int, **more: Any) -> dict[str, Any]:
    return {"_ng_task_index": task, "_ng_rollout_index": 0, **more}


def _run(folder: Path, main: bytes, sidecar: list[dict[str, Any]]) -> Path:
    out = folder / "out.jsonl"
    keys = [_key(t) for t in range(6)]
    (folder / "out_materialized_inputs.jsonl").write_bytes(encode_rows(keys))
    out.write_bytes(main)
    (folder / "out_failures.jsonl").write_bytes(encode_rows(sidecar))
    return out


def _dispatched(out: Path, **options: bool) -> list[tuple[int, int, int]]:
    plan = plan_resume(out, **options)
    assert plan is not None
    return dispatch_keys(plan)


def test_torn_tail_is_cut_and_a_complete_one_kept(tmp_path: Path) -> None:
    complete = encode_rows([_key(0)]) + b"\n" + encode_rows([_key(1)]).rstrip(b"\n")
    out = _run(tmp_path, complete, [])
    assert [k[0] for k in _dispatched(out)] == [2, 3, 4, 5]  # 1's line is whole
    torn = encode_rows([_key(0)]) + encode_rows([_key(1)])[:-9]
    out.write_bytes(torn)
    assert [k[0] for k in _dispatched(out)] == [1, 2, 3, 4, 5]
    assert out.read_bytes() == torn  # read-only, unlike 0.7.0's repair


def test_sidecar_counts_terminal_reuse_and_longest_first(tmp_path: Path) -> None:
    sidecar = [
        _key(1, _ng_failure_class="timeout_exceeded", _ng_failure_terminal=True),
        _key(2, _ng_failure_class="skipped"),  # unstamped
        _key(3, reuse_cached_deliverable=True, elapsed_seconds=5.0),
        _key(4, elapsed_seconds=9.0),
        _key(4),
        {"_ng_task_index": 5},  # no rollout index: skipped
    ]
    out = _run(tmp_path, encode_rows([_key(0)]), sidecar)
    assert _dispatched(out) == [(2, 0, 1), (3, 0, 1), (4, 0, 2), (5, 0, 0)]
    reopened = _dispatched(out, retry_terminal_timeouts=True)
    assert reopened == [(1, 0, 1), (3, 0, 1), (4, 0, 2), (5, 0, 0)]  # skipped stays
    assert _dispatched(out, longest_first=True)[:2] == [(4, 0, 2), (3, 0, 1)]
    plan = plan_resume(out)
    assert plan is not None
    assert [r.get("reuse_cached_deliverable") for r in plan.to_run][1] is True


def test_blank_lines_skipped_in_results_but_not_in_inputs(tmp_path: Path) -> None:
    out = _run(tmp_path, b"\n" + encode_rows([_key(0)]) + b"  \n", [])
    assert len(_dispatched(out)) == 5
    materialized = tmp_path / "out_materialized_inputs.jsonl"
    materialized.write_bytes(materialized.read_bytes() + b"\n")
    with pytest.raises((ValueError, msgspec.DecodeError)):
        plan_resume(out)


@pytest.fixture(scope="module")
def gen_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A run of 1,000 rollouts written by gen_run.py, every fate of its mix."""
    if not (TOOLS / "gen_run.py").is_file():
        pytest.skip(f"no incumbent-0.7 tools at {TOOLS}")
    out = tmp_path_factory.mktemp("gen") / "rollouts.jsonl"
    return out, generate(out, rollouts=1000, tools=TOOLS)


@needs_tools
def test_imitation_dispatches_what_0_7_0_does_for_each_fate(
    gen_run: tuple[Path, dict[str, Any]],
) -> None:
    out, summary = gen_run
    fates = Counter(summary["fates"])
    # 0.7.0, per fate: a result is done; three failures cap it; a terminal stamp
    # gates it; a judge failure and the retryable ones run again at their
    # sidecar count; a rollout with no row runs at attempt 0.
    expected = {
        0: fates["missing"],
        1: fates["retry1"] + fates["judge_failed"],
        2: fates["retry2"],
    }
    lean = plan_resume(out, retain=False)
    shipped = plan_resume(out, retain=True)
    assert lean is not None
    assert shipped is not None
    got = Counter(a for _, _, a in dispatch_keys(lean))
    assert {a: got.get(a, 0) for a in expected} == expected
    assert dispatch_keys(lean) == dispatch_keys(shipped)
    assert lean.main_rows == []
    assert lean.matched == []
    assert len(shipped.main_rows) == len(shipped.matched) == summary["result_rows"]


@needs_tools
@pytest.mark.slow
@pytest.mark.skipif(not find_venv(None), reason=f"{VENV_ENV} names no 0.7.0 venv")
def test_imitation_dispatches_exactly_the_rows_real_0_7_0_does(
    gen_run: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    out, _ = gen_run
    venv = find_venv(None)
    assert venv is not None
    dump = tmp_path / "real.tsv"
    real = Incumbent(venv, TOOLS).run(out, lean=True, dump=dump)
    plan = plan_resume(out, retain=False)
    assert plan is not None
    rows = [tuple(map(int, x.split("\t"))) for x in dump.read_text().splitlines()]
    assert rows == dispatch_keys(plan)
    assert real.dispatch == len(rows)


# compare_dispatch.py's summary in words.

SUMMARY = {
    "incumbent_dispatch": 10,
    "ledger_dispatch": 8,
    "ledger_rejudge": 2,
    "ledger_held": 0,
    "both": 8,
    "same_attempt_on_both": 8,
    "attempt_differs (incumbent, ledger)": {},
    "only_incumbent": 2,
    "only_incumbent_by_history": {"sidecar [judge_failed] -> ledger rejudge": 2},
    "only_ledger": 0,
    "only_ledger_by_history": {},
    "only_incumbent_all_in_ledger_rejudge": True,
}


@pytest.mark.parametrize(
    ("change", "same"),
    [
        ({}, True),  # only the known difference: judge_failed re-judged
        ({"only_ledger": 1}, False),
        ({"attempt_differs (incumbent, ledger)": {"1->2": 1}}, False),
        ({"only_incumbent_all_in_ledger_rejudge": False}, False),
    ],
)
def test_dispatch_comparison_names_only_the_known_difference(
    change: dict[str, Any], same: bool
) -> None:
    text, verdict = compare_text(SUMMARY | change, "real NeMo Gym 0.7.0")
    assert verdict is same
    assert text.startswith("the same" if same else "NOT the same")
    assert "only real NeMo Gym 0.7.0: 2" in text


# The curve through the harness, at tiny size.


@needs_tools
@pytest.mark.slow
def test_curve_runs_at_tiny_size_without_0_7_0(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    command = [sys.executable, "-m", "bench", "--tiny", "--only", "CURVE"]
    command += ["--out", str(out), "--workdir", str(tmp_path / "work")]
    env = {k: v for k, v in os.environ.items() if k != VENV_ENV}
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "## Figures" not in text  # no target chosen
    rows = {
        line.split(" | ")[0].lstrip("| "): line
        for line in text.splitlines()
        if line.startswith("| ours:") or "0.7.0" in line.split(" | ")[0]
    }
    figure = re.compile(r"\| [0-9.e-]+ \([0-9.e-]+-[0-9.e-]+\) s; [0-9]+ MiB \|$")
    for label in (
        "ours: resume --dry-run after a kill",
        "ours: import of the run",
        "ours: verify",  # issue 30: the reads of a large run
        "ours: report, the first after a verify",
        "ours: report of a log unmoved",
        "ours: report --no-verify",
        "ours: the viewer's runs page",
        "ours: resume (recording its release) after a kill",
    ):
        (row,) = [v for k, v in rows.items() if k.startswith(label)]
        assert figure.search(row), row
    assert f"| real NeMo Gym 0.7.0, as shipped | {NO_VENV} |" in text
    assert "imitation of 0.7.0, lean |" not in text  # issue 30: retired
    assert "- 40: the same rollouts, except that 0.7.0 samples" in text
    assert re.search(r"its [1-9] snapshot\(s\) deleted", text)
    assert re.search(r"after a kill: [0-9]+ results of the plan", text)
    (row,) = [v for k, v in rows.items() if k.startswith("ours: resume --dry-run with")]
    assert figure.search(row), row
