"""docs/glossary.md is generated from projections.GLOSSARY and stays in sync.

``python tools/gen_glossary.py`` rewrites the page; this test fails when the
page differs from what it writes, when a glossary term is missing from it, or
when the help stops pointing to it (issue 16, "Plain words").
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from click.testing import CliRunner

from cli import main
from projections import GLOSSARY, RULE_WORDS

ROOT = Path(__file__).parents[1]
PAGE = ROOT / "docs" / "glossary.md"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_glossary", ROOT / "tools" / "gen_glossary.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rec41_the_glossary_page_is_what_the_script_writes() -> None:
    """REC-41's terms: run `python tools/gen_glossary.py` when this fails."""
    assert PAGE.read_text(encoding="utf-8") == generator().render()


def test_rec20_every_glossary_term_and_rule_is_on_the_page() -> None:
    page = PAGE.read_text(encoding="utf-8")
    for term, sentence in GLOSSARY.items():
        assert sentence in page, term
    for rule in RULE_WORDS:
        assert f"| {rule} |" in page


def test_cli_16_the_help_points_to_the_glossary() -> None:
    """The glossary is in the command line (issue 28): ``explain``."""
    for args in (["--help"], ["status", "--help"]):
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        said = " ".join(result.stdout.split())
        assert "rollout-ledger explain TERM" in said
