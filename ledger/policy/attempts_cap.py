"""The run's attempt cap from the environment (REC-10)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping

from ledger.bounds import MAX_ATTEMPTS

__all__ = [
    "DEFAULT_MAX_ROLLOUT_ATTEMPTS",
    "MAX_ROLLOUT_ATTEMPTS_ENV",
    "max_rollout_attempts",
]

logger = logging.getLogger("ledger")

#: The variable REC-10 reads, and the cap when it is unset, empty or unusable.
MAX_ROLLOUT_ATTEMPTS_ENV = "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS"
DEFAULT_MAX_ROLLOUT_ATTEMPTS = 3

_DIGITS = re.compile(r"[0-9]+")


def max_rollout_attempts(*, environ: Mapping[str, str] | None = None) -> int:
    """``NEMO_GYM_MAX_ROLLOUT_ATTEMPTS`` as a positive int, else 3 (REC-10).

    Unset or empty (surrounding whitespace ignored) gives 3 silently; anything
    else that is not a positive integer in decimal digits gives 3 with one
    warning naming the value. The run saves what this returns at creation.
    """
    raw = (os.environ if environ is None else environ).get(MAX_ROLLOUT_ATTEMPTS_ENV, "")
    text = raw.strip()
    if not text:
        return DEFAULT_MAX_ROLLOUT_ATTEMPTS
    # More digits than the bound has cannot be within it (and int() of a
    # very long string is refused by Python itself).
    if (
        _DIGITS.fullmatch(text)
        and len(text.lstrip("0")) <= 7
        and 0 < int(text) <= MAX_ATTEMPTS
    ):
        return int(text)
    logger.warning(
        "%s=%r is not an integer from 1 to %d; using the default of %d attempts",
        MAX_ROLLOUT_ATTEMPTS_ENV,
        raw[:40],
        MAX_ATTEMPTS,
        DEFAULT_MAX_ROLLOUT_ATTEMPTS,
    )
    return DEFAULT_MAX_ROLLOUT_ATTEMPTS
