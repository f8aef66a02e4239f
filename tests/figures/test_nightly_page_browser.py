"""The nightly's page in a real browser (issue 41): no console error, every image and figure loads, sorting
reorders the rows, the filter for new failures shows exactly those, and the page says what regressed and what was
fixed. ``MODELVAL_SCREENSHOT=FILE`` keeps a screenshot (docs/nightly.md's)."""

from __future__ import annotations

import os

import pytest

from browser_helpers import console_errors, headless_chromium
from modelval.api.report import nightly_report
from nightly_records import two_nightlies


def _rows(driver):
    return driver.find_elements("css selector", "#cases tbody tr")


def _visible_outcomes(driver):
    return [row.get_attribute("data-outcome") for row in _rows(driver) if row.is_displayed()]


def test_the_page_works_in_chromium(tmp_path, modelval_data_root):
    store, status = two_nightlies(tmp_path)
    report = nightly_report(tmp_path / "page", status, run_store=store, stimuli=modelval_data_root)
    with headless_chromium() as driver:
        driver.get((report.folder / "index.html").resolve().as_uri())
        assert console_errors(driver) == []
        images = driver.find_elements("css selector", "img")
        assert len(images) == len(report.data["made_thumbnails"]) > 0
        for image in images:
            assert driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", image)
        trends = driver.find_elements("css selector", "svg.trend")
        assert len(trends) == sum(1 for c in report.data["cases"] if any(p["shape_bias"] for p in c["trend"]))
        assert all(t.size["width"] > 0 and t.size["height"] > 0 for t in trends)
        for opener in driver.find_elements("css selector", "#cases td:first-child details summary"):
            opener.click()  # the per-category figures are folded; open each and look at it
        bars = driver.find_elements("css selector", "svg.per-category")
        assert len(bars) == 4 and all(b.size["width"] > 0 and b.size["height"] > 0 for b in bars)

        changes = driver.find_element("id", "changes").text
        assert changes.startswith("2 regressed: broken model/cuda/fp32, regressed model/cuda/fp32; 1 fixed: repaired")

        header = driver.find_elements("css selector", "#cases thead th")[3]  # Shape bias [95% CI]
        assert header.text.startswith("Shape bias")
        header.click()
        values = [row.find_elements("css selector", "td")[3].get_attribute("data-v") for row in _rows(driver)]
        measured = [float(v) for v in values if v]
        assert measured == sorted(measured) and len(measured) == 3
        assert values[len(measured) :] == ["", ""]  # the cells with no number sort after those with one
        header.click()
        again = [float(v) for v in (r.find_elements("css selector", "td")[3].get_attribute("data-v")
                                    for r in _rows(driver)) if v]  # fmt: skip
        assert again == sorted(measured, reverse=True)

        select = driver.find_element("id", "filter")
        select.find_element("css selector", 'option[value="new failure"]').click()
        assert _visible_outcomes(driver) == ["new failure", "new failure"]
        assert driver.find_element("id", "shown").text == "2"
        select.find_element("css selector", 'option[value="fixed"]').click()
        assert _visible_outcomes(driver) == ["fixed"]
        select.find_element("css selector", 'option[value="all"]').click()
        assert len(_visible_outcomes(driver)) == len(report.data["cases"])

        link = driver.find_element("css selector", "section a[href^='#case-']")
        target = link.get_attribute("href").split("#", 1)[1]
        assert driver.find_element("id", target).tag_name == "tr"
        assert console_errors(driver) == []
        if os.environ.get("MODELVAL_SCREENSHOT"):
            height = driver.execute_script("return document.body.scrollHeight")
            driver.set_window_size(1400, min(height + 40, 2400))
            driver.save_screenshot(os.environ["MODELVAL_SCREENSHOT"])


def test_a_browser_test_without_a_browser_skips_with_its_reason(monkeypatch):
    import browser_helpers

    monkeypatch.setattr(browser_helpers, "_found", lambda names: None)
    skipped = pytest.raises(pytest.skip.Exception, match="install Debian's chromium and chromium-driver")
    with skipped, headless_chromium():
        pass
