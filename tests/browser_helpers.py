"""A real browser for the page tests: Debian's ``chromium`` and ``chromium-driver`` with selenium (the test extra).

Where any of them is missing the tests skip, saying which; ``.ci/run`` installs them so the tests run in CI.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
DRIVERS = ("chromedriver",)


def _found(names: tuple[str, ...]) -> str | None:
    for name in names:
        path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").is_file() else None)
        if path:
            return path
    return None


@contextmanager
def headless_chromium(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A headless Chromium driven by selenium, its console kept (``driver.get_log("browser")``)."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the test extra)")
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = _found(BROWSERS), _found(DRIVERS)
    if binary is None or driver_path is None:
        pytest.skip("no Chromium here: install Debian's chromium and chromium-driver (apt-get install chromium "
                    "chromium-driver; docs/install.md)")  # fmt: skip
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={width},{height}"):  # fmt: skip
        options.add_argument(argument)
    options.binary_location = binary
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver: Any) -> list[str]:
    """The console's errors (and failed loads) since the last call."""
    return [entry["message"] for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]
