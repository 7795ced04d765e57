"""Row templates sized like the real NeMo Gym fixtures, or a synthetic stand-in.

Templates come from the result JSONL files under the fixtures folder (env
``ROLLOUT_LEDGER_NEMO_GYM_FIXTURES``, default ``../shared/fixtures/nemo-gym``
beside the repository). Without that folder, synthetic rows of the same size
distribution (the quantiles below, measured on those fixtures) stand in. Every
``_ng_*`` key is stripped: the harness stamps keys and routing itself.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from ledger.jsonl import encode_row

__all__ = ["RowPool", "compact_pool", "fixture_pool", "fixtures_dir"]

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES_ENV = "ROLLOUT_LEDGER_NEMO_GYM_FIXTURES"
#: Encoded sizes (bytes) of the fixture result rows at percentiles 0, 5, ..., 100
#: (710 rows, mean 20.9 KB), for the synthetic fallback.
SIZE_QUANTILES = (
    *(219, 1243, 1862, 2071, 2496, 3321, 3944, 5093, 5883, 6618, 7697),
    *(9683, 11727, 13891, 15782, 20155, 28737, 35890, 44361, 87746, 414758),
)
_SKIPPED_FILES = ("_materialized_inputs", "_reward_profiling", "_failures")
_OUTPUT_KEYS = ("response", "reward")
_WORDS = ("alpha", "beta", "gamma", "delta", "sigma", "omega", "rollout", "tensor")


@dataclass(frozen=True)
class RowPool:
    """Row templates (no ``_ng_*`` keys) and where they came from."""

    templates: tuple[dict[str, Any], ...]
    source: str

    def input_of(self, index: int) -> dict[str, Any]:
        """The materialized input echoed by template ``index`` (no outputs)."""
        template = self.templates[index]
        return {k: v for k, v in template.items() if k not in _OUTPUT_KEYS}

    def mean_size(self) -> float:
        """The mean encoded size of a template, in bytes."""
        return sum(len(encode_row(t)) for t in self.templates) / len(self.templates)


def fixtures_dir() -> Path:
    """The NeMo Gym fixtures folder (env override, else beside the repository)."""
    default = REPO_ROOT / ".." / "shared" / "fixtures" / "nemo-gym"
    return Path(os.environ.get(FIXTURES_ENV) or default).resolve()


def _result_files(folder: Path) -> list[Path]:
    files = sorted(folder.rglob("*.jsonl"))
    return [f for f in files if not any(s in f.name for s in _SKIPPED_FILES)]


def _clean(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not k.startswith("_ng_")}


def _decoded_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_bytes().splitlines():
        try:
            row = msgspec.json.decode(line)
        except msgspec.DecodeError:
            continue  # placeholder and torn lines are not rows
        if isinstance(row, dict):
            rows.append(_clean(row))
    return rows


def fixture_pool(*, seed: int) -> RowPool:
    """Templates from the fixture result files, else a synthetic stand-in."""
    folder = fixtures_dir()
    files = _result_files(folder) if folder.is_dir() else []
    templates = [row for path in files for row in _decoded_rows(path)]
    if not templates:
        return synthetic_pool(seed=seed, count=710, note=f"{_shown(folder)} missing")
    source = f"{len(templates)} rows of {len(files)} result files in {_shown(folder)}"
    return RowPool(tuple(templates), source)


def _shown(folder: Path) -> str:
    """``folder`` as the report names it: relative to the repository's parent
    when under it (``../shared/...``), never an absolute path of the machine."""
    try:
        return "../" + folder.relative_to(REPO_ROOT.resolve().parent).as_posix()
    except ValueError:
        return folder.name


def _sampled_size(rng: random.Random) -> int:
    # Geometric interpolation between the measured percentiles (the sizes span
    # three orders of magnitude, so a linear one would inflate the mean).
    position = rng.random() * (len(SIZE_QUANTILES) - 1)
    low = int(position)
    high = min(low + 1, len(SIZE_QUANTILES) - 1)
    fraction = position - low
    size: float = (
        SIZE_QUANTILES[low] ** (1 - fraction) * SIZE_QUANTILES[high] ** fraction
    )
    return round(size)


def _text(rng: random.Random, size: int) -> str:
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[: max(0, size)]


def synthetic_row(rng: random.Random, size: int, index: int) -> dict[str, Any]:
    """A NeMo Gym-shaped result row whose encoded size is about ``size`` bytes."""
    row: dict[str, Any] = {
        "agent_ref": {"name": "simple_agent"},
        "responses_create_params": {
            "input": [{"role": "user", "content": ""}],
            "temperature": 1.0,
        },
        "response": {
            "id": f"resp-{index}",
            "object": "response",
            "status": None,
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": ""}],
                }
            ],
            "usage": {"input_tokens": 100 + index % 50, "output_tokens": 400},
        },
        "reward": float(index % 2),
    }
    spare = max(0, size - len(encode_row(row)))
    row["responses_create_params"]["input"][0]["content"] = _text(rng, spare * 3 // 10)
    text = _text(rng, spare - spare * 3 // 10)
    row["response"]["output"][0]["content"][0]["text"] = text
    return row


def synthetic_pool(*, seed: int, count: int, note: str) -> RowPool:
    """Synthetic templates with the fixtures' size distribution."""
    rng = random.Random(seed)
    templates = tuple(synthetic_row(rng, _sampled_size(rng), i) for i in range(count))
    return RowPool(
        templates, f"{count} synthetic rows sized like the fixtures ({note})"
    )


def compact_pool(*, seed: int, size: int = 1024, count: int = 64) -> RowPool:
    """Synthetic templates of about ``size`` bytes (P-7's ~1 KB rows)."""
    rng = random.Random(seed)
    templates = tuple(synthetic_row(rng, size, i) for i in range(count))
    return RowPool(templates, f"{count} synthetic rows of ~{size} B")
