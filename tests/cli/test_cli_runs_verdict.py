"""``modelval runs verdict``: a nightly's records against the status file; exit 0, 1 (new/fixed) or 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from modelval.cli import main
from modelval.records.run_store import RunStore

MODELS = """
[models.lite0]
label = "EfficientNet-Lite0"
spec = "efficientnet_lite0"
expected = {lite0}
tolerance = 0.015
source = "this subset, CPU fp32"
normalizations = ["model"]
{lite0_mean}
[models.lite0_port]
label = "EfficientNet-Lite0, ported config"
spec = "efficientnet_lite0"
expected = {lite0}
tolerance = 0.015
normalizations = ["model"]
{port_mean}
"""
IMAGENET = "mean = [0.485, 0.456, 0.406]\nstd = [0.229, 0.224, 0.225]\n"


@pytest.fixture
def runs_db(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "runs.sqlite"
    monkeypatch.setenv("MODELVAL_RUNS_DB", str(path))
    return path


@pytest.mark.slow
def test_two_real_nightlies_one_regressed_one_fixed(stimulus_subset, tmp_path, runs_db, monkeypatch, capsys):
    """Night 1: lite0 passes, its port (ImageNet mean/std on 0.5/0.5 weights) fails and is accepted as a known
    failure. Night 2 swaps the mistake: lite0 is a new failure (its rerun fails too), the port is fixed, exit 1."""
    import modelval

    subset = stimulus_subset(2)
    options = modelval.EvaluationOptions(data_root=subset, allow_modified_stimuli=True, bootstrap=0)
    own = modelval.shape_bias("efficientnet_lite0", options=options, device="cpu").shape_bias
    status = tmp_path / "nightly-status.toml"
    argv = ["--data-root", str(subset), "--allow-modified-stimuli", "--device", "cpu"]

    def night(session: str, lite0_mean: str, port_mean: str, name: str = "modelval.toml") -> None:
        path = tmp_path / session / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(MODELS.format(lite0=round(own, 4), lite0_mean=lite0_mean, port_mean=port_mean))
        monkeypatch.setenv("MODELVAL_SESSION", session)
        main(["validate", "--models-file", str(path), *argv])

    night("night-1", "", IMAGENET)
    assert main(["runs", "verdict", "--status", str(status)]) == 2  # no status file yet
    assert main(["runs", "verdict", "--status", str(status), "--accept"]) == 0
    assert '"model/cpu/fp32" = { status = "known-failure", reason = "accepted ' in status.read_text()
    assert main(["runs", "verdict", "--status", str(status)]) == 0
    night("night-2", IMAGENET, "")
    capsys.readouterr()
    page = tmp_path / "page"
    assert main(["runs", "verdict", "--status", str(status), "--json", "--report-dir", str(page)]) == 1
    markdown = page / "verdict.md"
    payload = json.loads(capsys.readouterr().out)
    outcomes = {case["model"]: case["outcome"] for case in payload["cases"]}
    assert outcomes == {"lite0": "new failure", "lite0_port": "fixed"}
    assert payload["counts"]["new failure"] == payload["counts"]["fixed"] == 1
    port = next(case for case in payload["cases"] if case["model"] == "lite0_port")
    assert port["attempts"][0]["shape_bias"] == pytest.approx(own)
    assert "| fixed | lite0_port | `model/cpu/fp32` | known-failure (accepted" in markdown.read_text()
    _the_page_says_so_in_a_browser(page / "index.html")
    assert main(["runs", "verdict", "--status", str(status), "--accept", "fixes"]) == 1  # lite0 is still new
    assert main(["runs", "verdict", "--status", str(status), "--accept", "lite0"]) == 0
    assert main(["runs", "verdict", "--status", str(status)]) == 0  # accepted: the port passes, lite0 is known


def _the_page_says_so_in_a_browser(index: Path) -> None:
    """Issue 41's end to end: the page of two real nightlies, read in Chromium where there is one."""
    import browser_helpers

    text = index.read_text()
    assert "1 regressed</strong>: lite0 <code>model/cpu/fp32</code>; <strong>1 fixed</strong>: lite0_port" in text
    found = browser_helpers._found
    if found(browser_helpers.BROWSERS) is None or found(browser_helpers.DRIVERS) is None:
        return  # tests/figures/test_nightly_page_browser.py skips with the reason
    with browser_helpers.headless_chromium() as driver:
        driver.get(index.resolve().as_uri())
        assert browser_helpers.console_errors(driver) == []
        assert driver.find_element("id", "changes").text.startswith("1 regressed: lite0 model/cpu/fp32; 1 fixed")
        images = driver.find_elements("css selector", "img")
        assert images and all(driver.execute_script("return arguments[0].naturalWidth > 0", i) for i in images)
        if os.environ.get("MODELVAL_SCREENSHOT"):  # docs/nightly.md's picture of the page
            driver.set_window_size(1440, min(driver.execute_script("return document.body.scrollHeight") + 40, 1500))
            driver.save_screenshot(os.environ["MODELVAL_SCREENSHOT"])


def _record(store: RunStore, model: str, verdict: str, session: str, created: str, label: str = "model (half)"):
    provenance = {"created": created, "session": session, "device": {"type": "cuda", "capability": "9.0"},
                  "precision": "fp32"}  # fmt: skip
    return store.record("validate", model=model, dataset="cue-conflict", label=label,
                        summary={"verdict": verdict, "passed": verdict == "PASS"}, provenance=provenance)  # fmt: skip


def test_a_failure_that_passes_its_rerun_is_flaky_and_the_session_bounds_the_nightly(runs_db, tmp_path, capsys):
    store = RunStore(runs_db)
    status = tmp_path / "status.toml"
    status.write_text('[models.a]\n"model/cuda/fp32" = "pass"\n[models.b]\n"model/cuda/fp32" = "pass"\n'
                      '[models.c]\n"model/cuda/bf16" = { status = "skip", reason = "no bf16 yet" }\n')  # fmt: skip
    _record(store, "b", "FAIL", "night-1", "2026-11-25T02:40:00+00:00")  # last night: not this nightly's
    _record(store, "a", "FAIL", "night-2", "2026-11-26T02:40:00+00:00")
    _record(store, "b", "PASS", "night-2", "2026-11-26T02:41:00+00:00")
    _record(store, "a", "PASS", "night-2", "2026-11-26T03:10:00+00:00")  # the rerun
    assert main(["runs", "verdict", "--status", str(status)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("nightly verdict: PASS (1 flaky, 1 skipped, 1 pass); runs 2-4, session night-2")
    assert "a model/cuda/fp32: PASS; fail (run 2) -> pass (run 4)" in out
    # the nightly before, by its last record: b failed there
    assert main(["runs", "verdict", "--status", str(status), "1", "--json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert {c["model"]: c["outcome"] for c in payload["cases"]} == {"b": "new failure", "a": "not run",
                                                                   "c": "skipped"}  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--window", "0"], "a positive number of hours"),
        (["--window", "nan"], "a positive number of hours"),
        (["7"], "no run 7"),
    ],
)
def test_bad_input_is_exit_2_with_one_line(runs_db, tmp_path, capsys, argv, message):
    store = RunStore(runs_db)
    _record(store, "a", "PASS", "s", "2026-11-26T02:40:00+00:00")
    status = tmp_path / "status.toml"
    status.write_text('[models.a]\n"model/cuda/fp32" = "pass"\n')
    assert main(["runs", "verdict", "--status", str(status), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_no_validate_run_recorded_is_exit_2(runs_db, tmp_path, capsys):
    status = tmp_path / "status.toml"
    status.write_text('[models.a]\n"model/cuda/fp32" = "pass"\n')
    assert main(["runs", "verdict", "--status", str(status)]) == 2
    assert "no validate runs recorded" in capsys.readouterr().err


def test_accepting_fixes_only_or_one_case_leaves_a_new_failure_failing(runs_db, tmp_path, capsys):
    """Issue 42: --accept was all or nothing; accepting a fix also blessed a new failure as known."""
    store = RunStore(runs_db)
    status = tmp_path / "status.toml"
    status.write_text('[models.fixed]\n"model/cuda/fp32" = { status = "known-failure", reason = "issue 12" }\n'
                      '[models.broken]\n"model/cuda/fp32" = "pass"\n')  # fmt: skip
    _record(store, "fixed", "PASS", "night", "2026-11-26T02:40:00+00:00")
    _record(store, "broken", "FAIL", "night", "2026-11-26T02:41:00+00:00")
    assert main(["runs", "verdict", "--status", str(status), "--accept", "fixes", "--json"]) == 1  # broken is left
    payload = json.loads(capsys.readouterr().out)
    assert payload["accepted_cases"] == ["fixed@model/cuda/fp32"]
    text = status.read_text()
    assert '[models.fixed]\n"model/cuda/fp32" = "pass"' in text
    assert '[models.broken]\n"model/cuda/fp32" = "pass"' in text
    assert main(["runs", "verdict", "--status", str(status)]) == 1  # still a new failure, never blessed
    assert "new failure (1):\n  broken model/cuda/fp32" in capsys.readouterr().out
    assert main(["runs", "verdict", "--status", str(status), "--accept", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "names no failing case" in err and "broken@model/cuda/fp32" in err and len(err.strip().splitlines()) == 1
    assert main(["runs", "verdict", "--status", str(status), "--accept", "broken@model/cuda/fp32"]) == 0
    assert "accepted in" in capsys.readouterr().out
    assert 'status = "known-failure", reason = "accepted 2026-11-26: FAIL (run 2)"' in status.read_text()
    assert main(["runs", "verdict", "--status", str(status)]) == 0


@pytest.mark.parametrize("hours", [1e10, float("inf"), float("nan"), 0, -1])
def test_the_python_window_has_the_command_lines_bound(runs_db, tmp_path, hours):
    """Issue 42: only --window was bounded; nightly_verdict(window_hours=1e10) overflowed a timedelta."""
    from modelval.api import nightly_verdict
    from modelval.api.recording import MAX_WINDOW_HOURS
    from modelval.errors import DataError

    _record(RunStore(runs_db), "a", "PASS", "s", "2026-11-26T02:40:00+00:00")
    status = tmp_path / "status.toml"
    status.write_text('[models.a]\n"model/cuda/fp32" = "pass"\n')
    with pytest.raises(DataError, match=f"at most {MAX_WINDOW_HOURS}"):
        nightly_verdict(status, window_hours=hours)
    assert nightly_verdict(status, window_hours=MAX_WINDOW_HOURS).passed


def test_the_old_markdown_flag_names_its_replacement_even_when_its_value_fails_first(tmp_path, capsys):
    """A renamed flag with a value: argparse first took the value for RUN and said nothing of the flag."""
    assert main(["runs", "verdict", "--status", str(tmp_path / "s.toml"), "--markdown", "v.md"]) == 2
    err = capsys.readouterr().err
    assert "--markdown is now runs verdict --report-dir DIR" in err and len(err.strip().splitlines()) == 1
