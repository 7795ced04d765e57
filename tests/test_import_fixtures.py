"""R-8: every result file of the real NeMo Gym fixtures goes through `import --dry-run`.

Each run is copied to a temporary folder with its companions (materialized
inputs, metrics, ...). A run without materialized inputs gets an inputs file
built from its rows' own keys; rows without keys cannot be paired with any
input (REC-71), so for those the documented refusal is asserted and a
one-row inputs file shows every line rejected with its reason. The summary
pins the counts across all fixtures, so a rule change shows as a diff.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from ledger import Ledger
from projections import import_run, verify
from tests.internals import REASONS, LedgerGroup, import_
from tests.prerequisites import FIXTURES_ENV, nemo_gym_fixtures, unavailable

FIXTURES = nemo_gym_fixtures()
_NOT_RESULTS = (
    "_materialized_inputs.jsonl",
    "_reward_profiling.jsonl",
    "_failures.jsonl",
)


def result_files() -> list[str]:
    if not FIXTURES.is_dir():
        return []
    return sorted(
        str(p.relative_to(FIXTURES))
        for p in FIXTURES.rglob("*.jsonl")
        if not p.name.endswith(_NOT_RESULTS)
    )


RESULT_FILES = result_files()
if not RESULT_FILES:
    unavailable(f"no NeMo Gym result files at {FIXTURES}; point {FIXTURES_ENV} at them")


def _group() -> click.Group:
    @click.group(cls=LedgerGroup)
    def group() -> None:
        pass

    group.add_command(import_, "import")
    return group


GROUP = _group()


def invoke(*args: str) -> Any:
    return CliRunner().invoke(GROUP, ["import", *args], catch_exceptions=False)


def copy_run(source: Path, folder: Path) -> Path:
    """Copy the result file and every companion sharing its stem; returns OUT."""
    folder.mkdir(parents=True)
    for companion in source.parent.glob(f"{source.stem}*"):
        if companion.is_file():
            shutil.copyfile(companion, folder / companion.name)
    return folder / source.name


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def own_keys(out: Path) -> list[dict[str, Any]] | None:
    """Input rows built from the rows' own keys, or None when a row has none."""
    inputs: dict[tuple[int, int], dict[str, Any]] = {}
    for data in out.read_bytes().splitlines():
        try:
            row = json.loads(data)
        except ValueError:
            return None
        if not isinstance(row, dict):
            return None
        key = (row.get("_ng_task_index"), row.get("_ng_rollout_index"))
        if not all(type(k) is int for k in key):
            return None
        inputs.setdefault(key, {"_ng_task_index": key[0], "_ng_rollout_index": key[1]})
        if isinstance(row.get("agent_ref"), dict):
            inputs[key]["agent_ref"] = row["agent_ref"]
    return [inputs[k] for k in sorted(inputs)] or None


def write_inputs(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def listed_lines(stderr: str) -> list[tuple[str, str]]:
    """The ``file line N: reason`` lines of a refusal, as (where, reason)."""
    found = [
        re.fullmatch(r"  (\S+ line \d+): (.*)", line) for line in stderr.splitlines()
    ]
    return [(m[1], m[2]) for m in found if m is not None]


def dry_run(source: Path, folder: Path) -> dict[str, Any]:
    """`import --dry-run` on a copy of the run; what it found, and how."""
    out = copy_run(source, folder / "run")
    before = snapshot(out.parent)
    found: dict[str, Any] = {"inputs": "materialized", "refused_without_inputs": False}
    args: list[str] = []
    if not (out.parent / f"{out.stem}_materialized_inputs.jsonl").exists():
        refused = invoke(str(out), "--dry-run")
        assert refused.exit_code == 3, refused.output
        assert "--inputs" in refused.stderr
        keys = own_keys(out)
        found["refused_without_inputs"] = True
        found["inputs"] = "own keys" if keys else "one synthetic row"
        rows = keys or [{"_ng_task_index": 0, "_ng_rollout_index": 0}]
        args = ["--inputs", str(write_inputs(folder / "inputs.jsonl", rows))]
    first = invoke(str(out), "--dry-run", "--json", *args)
    found["needed_skip"] = first.exit_code != 0
    if first.exit_code != 0:
        # REC-71: a refusal lists every rejected line with its reason.
        assert first.exit_code == 3, first.stderr
        assert "Traceback" not in first.stderr
        listed = listed_lines(first.stderr)
        assert listed
        assert all(reason.startswith(REASONS) for _, reason in listed), listed
        first = invoke(str(out), "--dry-run", "--json", "--skip-rejected", *args)
        assert first.exit_code == 0, first.stderr
    found["document"] = json.loads(first.output)
    # Nothing written: not the ledger folder, not the inputs copy, not a byte.
    assert snapshot(out.parent) == before
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(before)
    return found


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Any]:
    cache: dict[str, dict[str, Any]] = {}

    def get(rel: str) -> dict[str, Any]:
        if rel not in cache:
            cache[rel] = dry_run(FIXTURES / rel, tmp_path_factory.mktemp("fixture"))
        return cache[rel]

    return get


@pytest.mark.parametrize("rel", RESULT_FILES)
def test_r_8_dry_run_import(rel: str, dry_runs: Callable[[str], Any]) -> None:
    document = dry_runs(rel)["document"]
    rows = document["rows"]
    assert rows["read"] == rows["imported"] + rows["rejected"]
    assert len(document["rejections"]) == rows["rejected"]
    for rejection in document["rejections"]:
        assert rejection["reason"].startswith(REASONS), rejection
        assert rejection["line"] >= 1
    coverage = document["coverage"]
    assert sum(coverage["decisions"].values()) == coverage["expected"]
    assert coverage["as_of_seq"] == 2 + rows["imported"]


def _reason(text: str) -> str:
    return next(prefix for prefix in REASONS if text.startswith(prefix))


def test_r_8_summary_pins_counts_per_decision(dry_runs: Callable[[str], Any]) -> None:
    runs = [dry_runs(rel) for rel in RESULT_FILES]
    summary: dict[str, Any] = {
        "files": len(runs),
        "inputs": dict(Counter(run["inputs"] for run in runs)),
        "refused_without_inputs": sum(run["refused_without_inputs"] for run in runs),
        "needed_skip": sum(run["needed_skip"] for run in runs),
        "rows": dict(
            sum((Counter(run["document"]["rows"]) for run in runs), Counter())
        ),
        "reasons": dict(
            Counter(
                _reason(r["reason"])
                for run in runs
                for r in run["document"]["rejections"]
            )
        ),
    }
    coverages = [run["document"]["coverage"] for run in runs]
    summary["masked"] = sum(c["masked"] for c in coverages)
    summary["duplicates"] = sum(c["totals"]["duplicates"] for c in coverages)
    for split in ("decisions", "complete", "retry", "held"):
        total: Counter[str] = Counter()
        for run in runs:
            total.update(run["document"]["coverage"][split])
        summary[split] = {k: v for k, v in sorted(total.items()) if v}
    assert summary == PINNED


# Across the 146 result files. 17 runs have materialized inputs; 70 more carry
# both indices, so their own keys make an inputs file; 59 have no keys at all
# (55 pre-index files, 4 placeholder files) and are refused without --inputs.
# 60 needed --skip-rejected: 55 + 4 and polymath (keyed inputs, unkeyed results).
# gpqa_diamond and 3 keyless files have no newline after their last row, a
# complete JSON object: kept (REC-83), so gpqa_diamond's last row is imported
# and the keyless ones are rejected for their missing indices, not as torn.
# graphwalks has task 11, rollout 0 twice: one outcome and one duplicate (REC-1).
PINNED: dict[str, Any] = {
    "files": 146,
    "inputs": {"materialized": 17, "own keys": 70, "one synthetic row": 59},
    "refused_without_inputs": 129,
    "needed_skip": 60,
    "rows": {"read": 730, "imported": 430, "rejected": 300},
    "reasons": {
        "no integer task/rollout index": 280,
        "a <PLACEHOLDER ROW> line": 20,
    },
    "masked": 2,
    "duplicates": 1,
    "decisions": {"complete": 429, "pending": 64},
    "complete": {"graded": 429},
    "retry": {},
    "held": {},
}


WITH_INPUTS = [
    rel
    for rel in RESULT_FILES
    if (FIXTURES / rel)
    .with_name(Path(rel).stem + "_materialized_inputs.jsonl")
    .exists()
]


@pytest.mark.parametrize("rel", WITH_INPUTS)
def test_r_8_complete_run_sets_import_and_verify(rel: str, tmp_path: Path) -> None:
    out = copy_run(FIXTURES / rel, tmp_path / "run")
    before = snapshot(out.parent)
    imported = import_run(out, skip_rejected=True)
    assert snapshot(out.parent) == before  # the collector files are never modified
    with Ledger.open(out) as reader:
        assert verify(reader) == []
    inputs = out.with_name(f"{out.stem}_materialized_inputs.jsonl")
    assert imported.coverage.expected == len(inputs.read_bytes().splitlines())
