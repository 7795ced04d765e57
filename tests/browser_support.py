"""Debian's headless Chromium through Selenium, for the browser tests.

``.ci/run`` installs ``chromium`` and ``chromium-driver``; without them the
tests that import this are skipped, or fail under ``CI=true``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.prerequisites import unavailable

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
    unavailable(
        "no headless Chromium: apt-get install chromium chromium-driver "
        "(.ci/run does, as root)"
    )
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
except ImportError:  # pragma: no cover - the dev extra installs it
    unavailable("selenium is not installed: pip install -e '.[dev]'")


@contextmanager
def chromium(width: int, height: int, flags: Sequence[str]) -> Iterator[Any]:
    """A headless Chromium of ``width`` x ``height`` with ``flags``, quit on exit."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
        "--disable-background-networking",
        "--no-first-run",
        *flags,
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
