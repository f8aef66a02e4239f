"""The nightly's verdict policy: expected statuses, and each configuration's outcome from its attempts."""

from __future__ import annotations

import pytest

from modelval.errors import DataError
from modelval.judgement.nightly import (
    Attempt,
    ExpectedStatus,
    _classify,
    accepted_statuses,
    classify_nightly,
    configuration_of,
    format_status_file,
    read_status_file,
)

PASS, KNOWN, SKIP = ExpectedStatus("pass"), ExpectedStatus("known-failure", "issue 12"), ExpectedStatus("skip")


def attempts(*passed: bool) -> list[Attempt]:
    return [Attempt(i + 1, "", ok, "PASS" if ok else "FAIL") for i, ok in enumerate(passed)]


@pytest.mark.parametrize(
    ("expected", "passed", "outcome"),
    [
        (PASS, (True,), "pass"),
        (PASS, (False,), "new failure"),
        (PASS, (False, True), "flaky"),  # failed, rerun once, passed
        (PASS, (False, False), "new failure"),  # the rerun failed too
        (PASS, (True, False), "new failure"),  # the last attempt decides
        (KNOWN, (False,), "known failure"),
        (KNOWN, (True,), "fixed"),  # the ratchet: it fails the check until accepted
        (KNOWN, (False, True), "flaky"),
        (SKIP, (False,), "skipped"),
        (SKIP, (), "skipped"),
        (PASS, (), "not run"),
        (None, (True,), "not in the status file"),
        (None, (False,), "new failure"),
    ],
)
def test_outcomes(expected, passed, outcome):
    assert _classify(expected, attempts(*passed)) == outcome


def test_the_nightly_takes_passed_from_the_record_never_from_the_verdicts_text(tmp_path):
    """A verdict is data (issue 39): the record's ``passed`` decides, whatever its text says; a record without one
    (made before verdicts were data) counts as failed and says why."""
    from modelval.api.recording import nightly_verdict
    from modelval.records.run_store import RunStore

    store = RunStore(tmp_path / "runs.sqlite")
    status = tmp_path / "status.toml"
    status.write_text('[models.a]\n"model/cpu/fp32" = "pass"\n[models.b]\n"model/cpu/fp32" = "pass"\n'
                      '[models.c]\n"model/cpu/fp32" = "pass"\n')  # fmt: skip
    night = {"created": "2025-06-01T02:30:00+00:00", "device": {"type": "cpu"}, "precision": "fp32"}
    for model, summary in (
        ("a", {"verdict": "BASELINE (40 flips, budget 32 [*/bf16])", "passed": True, "status": "pass"}),
        ("b", {"verdict": "PASS", "passed": False, "status": "fail"}),
        ("c", {"verdict": "PASS"}),
    ):
        store.record("validate", model=model, dataset="cue-conflict", label="model (half)", summary=summary,
                     provenance=night)  # fmt: skip
    outcomes = {case.model: case for case in nightly_verdict(status, run_store=store).cases}
    assert {model: case.outcome for model, case in outcomes.items()} == {
        "a": "pass", "b": "new failure", "c": "new failure",
    }  # fmt: skip
    assert outcomes["c"].attempts[0].verdict == "PASS (recorded without passed: run the case again)"


def test_a_configuration_is_normalization_device_dtype():
    provenance = {"device": {"type": "cuda", "capability": "9.0"}, "precision": "bf16"}
    assert configuration_of("model (half)", provenance) == "model/cuda/bf16"
    assert configuration_of("imagenet (imagenet)", {"device": {"type": "cpu"}, "precision": "fp32"}) == (
        "imagenet/cpu/fp32"
    )
    # a model that could not be loaded has no provenance: its record matches the one listed configuration
    assert configuration_of("wrong (not resolved)", {}) == "wrong/?/?"
    statuses = {("m", "model/cuda/fp32"): PASS, ("m", "imagenet/cuda/fp32"): PASS}
    cases = classify_nightly(statuses, {("m", "wrong/?/?"): attempts(False), ("m", "model/?/?"): attempts(False)})
    assert {(c.configuration, c.outcome) for c in cases} == {
        ("model/cuda/fp32", "new failure"), ("imagenet/cuda/fp32", "new failure"),
    }  # fmt: skip


def test_the_status_file_round_trips_and_accepting_updates_it(tmp_path):
    path = tmp_path / "nightly-status.toml"
    path.write_text(
        '[models.lite0]\n"model/cuda/fp32" = "pass"\n"model/cuda/bf16" = { status = "skip", reason = "later" }\n'
        '[models."hub:x/y"]\n"imagenet/cuda/fp32" = { status = "known-failure", reason = "issue \\"12\\"" }\n'
    )
    statuses = read_status_file(path)
    assert statuses[("hub:x/y", "imagenet/cuda/fp32")] == ExpectedStatus("known-failure", 'issue "12"')
    path.write_text(format_status_file(statuses))
    assert read_status_file(path) == statuses
    cases = classify_nightly(
        statuses,
        {("lite0", "model/cuda/fp32"): attempts(False), ("hub:x/y", "imagenet/cuda/fp32"): attempts(True),
         ("new", "model/cuda/fp32"): attempts(True)},
    )  # fmt: skip
    updated = accepted_statuses(statuses, cases, when="2026-11-26")
    assert updated[("hub:x/y", "imagenet/cuda/fp32")] == PASS
    assert updated[("new", "model/cuda/fp32")] == PASS
    assert updated[("lite0", "model/cuda/fp32")] == ExpectedStatus("known-failure", "accepted 2026-11-26: FAIL (run 1)")
    assert updated[("lite0", "model/cuda/bf16")] == statuses[("lite0", "model/cuda/bf16")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[models.m]\n"model/gpu/fp32" = "pass"\n', "is not a configuration; write NORMALIZATION/DEVICE/DTYPE"),
        ('[models.m]\n"model/cuda/fp32" = "passes"\n', "status 'passes' is not one of pass, known-failure, skip"),
        ('[models.m]\n"model/cuda/fp32" = { status = "known-failure" }\n', "a known failure needs its reason"),
        ('[models.m]\n"model/cuda/fp32" = { status = "pass", why = "x" }\n', "a status is"),
        ('[statuses.m]\n"model/cuda/fp32" = "pass"\n', "unknown table 'statuses'"),
        ("[models.m\n", "invalid TOML"),
    ],
)
def test_a_bad_status_file_is_one_line(tmp_path, text, message):
    path = tmp_path / "status.toml"
    path.write_text(text)
    with pytest.raises(DataError, match=message) as caught:
        read_status_file(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)
