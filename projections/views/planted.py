"""Planted: a read room that writes."""

from pathlib import Path


def leak(path: Path) -> None:
    path.write_text("x")
