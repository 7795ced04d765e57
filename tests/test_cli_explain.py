"""Issue 28: ``rollout-ledger explain``, the glossary in the command line.

Every term of the glossary answers with the same sentence ``docs/glossary.md``
gives it; a near miss is refused with a suggestion; ``--json`` lists them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main
from ledger import FAILURE_KINDS
from projections import GLOSSARY_SECTIONS

GLOSSARY_PAGE = Path(__file__).parents[1] / "docs" / "glossary.md"


def _run(*args: str) -> object:
    return CliRunner().invoke(main, ["explain", *args])


def test_every_term_says_what_the_glossary_page_says() -> None:
    page = GLOSSARY_PAGE.read_text(encoding="utf-8")
    terms = [(t, w) for _, table in GLOSSARY_SECTIONS for t, w in table.items()]
    assert len(terms) > 50
    for term, words in terms:
        result = _run(term.lstrip("-"))  # an option's name, asked without dashes
        assert result.exit_code == 0, (term, result.output)
        assert words in result.output
        assert words in page  # the same words on both


@pytest.mark.parametrize("kind", sorted(FAILURE_KINDS)[:5])
def test_a_failure_kind_is_explained(kind: str) -> None:
    result = _run(kind)
    assert result.exit_code == 0
    assert result.output.startswith(f"{kind} (failure kinds): ")


def test_spelling_is_forgiven_and_a_near_miss_suggested() -> None:
    assert _run("kept-answer").output.startswith("kept_answer (reasons): ")
    assert _run("MEAN REWARD").exit_code == 0
    missed = _run("helld")
    assert missed.exit_code == 2
    assert "did you mean held?" in missed.output


def test_without_a_term_every_one_is_listed_and_json_has_them() -> None:
    listed = _run().output
    for title, table in GLOSSARY_SECTIONS:
        assert f"{title}:" in listed
        assert all(f"  {term}: " in listed for term in table)
    document = json.loads(_run("--json").output)
    assert document["schema_version"] == 1
    assert {"section", "term", "words"} == set(document["terms"][0])
    assert "REC-" not in listed  # rule ids only when asked for by name
