"""``rollout-ledger explain``: every word the commands print, in a sentence.

The glossary of ``docs/glossary.md`` (the same words: both come from
``projections.GLOSSARY``), in the command line: decisions, reasons, other
terms, the reward figures' words, the configuration files (``explain config``:
what --config and --global-config take, said here once for every command that
takes them) and the failure kinds; a rule id (for auditors) when asked for by
name.
"""

from __future__ import annotations

import difflib
from typing import Any

import click

from cli.common import echo_json, json_option

__all__ = ["explain"]


def _entries() -> list[tuple[str, str, str]]:
    """``(section, term, sentence)`` of every term, in the glossary's order."""
    import ledger
    import projections

    found = [
        (title, term, words)
        for title, table in projections.GLOSSARY_SECTIONS
        for term, words in table.items()
    ]
    found += [
        ("Failure kinds", kind, projections.describe_kind(kind))
        for kind in sorted(ledger.FAILURE_KINDS)
    ]
    return found


def _rules() -> list[tuple[str, str, str]]:
    import projections

    return [
        ("Rule ids (for auditors)", rule, words)
        for rule, words in projections.RULE_WORDS.items()
    ]


def _document(entries: list[tuple[str, str, str]]) -> dict[str, Any]:
    return {
        "terms": [{"section": s, "term": t, "words": w} for s, t, w in entries],
    }


def _normal(text: str) -> str:
    return " ".join(text.lower().replace("_", " ").replace("-", " ").split())


@click.command()
@click.argument("term", required=False)
@json_option
def explain(term: str | None, as_json: bool) -> None:
    """Say what a word the commands print means (the glossary).

    With TERM, that decision, reason, term or failure kind in a sentence (a
    rule id too, for auditors), or what an option takes (config,
    global-config); without it, every one, by section. The same words as
    docs/glossary.md.

    \b
    Example:
      rollout-ledger explain kept_answer
    """
    entries = _entries()
    if term is None:
        if as_json:
            echo_json(_document(entries))
            return
        section = None
        for title, name, words in entries:
            if title != section:
                click.echo(("\n" if section else "") + f"{title}:")
                section = title
            click.echo(f"  {name}: {words}")
        return
    every = entries + _rules()
    wanted = _normal(term)
    found = [e for e in every if _normal(e[1]) == wanted]
    if not found:
        names = [e[1] for e in every]
        near = difflib.get_close_matches(term, names, n=3, cutoff=0.6)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        raise click.UsageError(
            f"no term {term!r} in the glossary{hint}; `rollout-ledger explain` "
            "lists every one"
        )
    if as_json:
        echo_json(_document(found))
        return
    for title, name, words in found:
        click.echo(f"{name} ({title.lower()}): {words}")
