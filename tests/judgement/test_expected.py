"""Expectations keyed by device type, compute capability and dtype: the most specific entry wins and is named."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelval.behaviour.decisions import read_decisions
from modelval.behaviour.shape_bias import compute_shape_bias
from modelval.errors import DataError
from modelval.evaluation.flips import AmpFlipWarning, decision_flips
from modelval.judgement.expected import ExpectationKey, RunSetting, expected_for, load_expected
from modelval.judgement.verdicts import Case, against_expectation, against_published, judge
from modelval.preprocessing import PreprocessConfig

KEYED = """
[models.net]
label = "Net"
expected = 0.2139
tolerance = 0.015
flip_budget = 3
source = "README"
[models.net.expectations]
"cuda" = { flip_budget = 2 }
"*/bf16" = { tolerance = 0.02, flip_budget = 12 }
"cuda/bf16" = { flip_budget = 10 }
"cuda:9.0/bf16" = { flip_budget = 6, expected = 0.2207 }
"mps" = { tolerance = 0.03 }
"""


@pytest.fixture
def keyed(tmp_path: Path) -> Path:
    path = tmp_path / "expected.toml"
    path.write_text(KEYED)
    load_expected.cache_clear()
    return path


@pytest.mark.parametrize(
    ("setting", "entry", "value", "tolerance", "budget"),
    [
        (RunSetting("cpu", None, "fp32"), "default", 0.2139, 0.015, 3),
        (RunSetting("cuda", "8.0", "fp32"), "cuda", 0.2139, 0.015, 2),
        (RunSetting("cpu", None, "bf16"), "*/bf16", 0.2139, 0.02, 12),
        # cuda/bf16 beats */bf16 and cuda; the tolerance it does not set comes from */bf16
        (RunSetting("cuda", "8.0", "bf16"), "cuda/bf16", 0.2139, 0.02, 10),
        (RunSetting("cuda", "9.0", "bf16"), "cuda:9.0/bf16", 0.2207, 0.02, 6),
        # a tie of one part each (mps vs */bf16): the key naming the dtype wins
        (RunSetting("mps", None, "bf16"), "*/bf16", 0.2139, 0.02, 12),
        (RunSetting("mps", None, "fp32"), "mps", 0.2139, 0.03, 3),
    ],
)
def test_the_most_specific_matching_entry_wins(keyed, setting, entry, value, tolerance, budget):
    resolved = expected_for("net", keyed, setting=setting)
    assert resolved is not None
    assert (resolved.entry, resolved.value, resolved.tolerance, resolved.flip_budget) == (
        entry, value, tolerance, budget,
    )  # fmt: skip
    assert resolved.describe() == f"expected {value * 100:.2f}% +- {tolerance * 100:.1f} pp [{entry}]"


def test_the_verdict_names_the_entry_and_a_flat_expectation_stays_plain(keyed, resnet50_reference_csv):
    decisions = read_decisions(resnet50_reference_csv)
    result = compute_shape_bias(decisions, n_bootstrap=0)  # 0.2207

    def verdict(expected, shape_hits=result.shape_hits, texture_hits=result.texture_hits):
        measured = dataclasses.replace(result, shape_hits=shape_hits, texture_hits=texture_hits)
        return judge(Case("net", measured, decisions, expected=expected, user=True))

    h100 = verdict(expected_for("net", keyed, setting=RunSetting("cuda", "9.0", "bf16")))
    assert (h100.passed, h100.text, h100.expectation) == (True, "PASS [cuda:9.0/bf16]", "cuda:9.0/bf16")
    cpu = verdict(expected_for("net", keyed, setting=RunSetting()), 2299, 7701)  # 22.99%: 1.6 pp off
    assert (cpu.passed, cpu.text) == (False, "FAIL [default]")
    assert cpu.reason.startswith("shape bias 22.99% vs expected 21.39% +- 1.5 pp [default]")
    # Fed with another normalization than the model's own: the verdict's diagnosis names the stage.
    half = PreprocessConfig(mean=(0.5,) * 3, std=(0.5,) * 3)
    missed = dataclasses.replace(result, shape_hits=2299, texture_hits=7701)
    expected = expected_for("net", keyed, setting=RunSetting())
    fed = judge(Case("net", missed, decisions, expected=expected, user=True, config=half, reference=PreprocessConfig()))
    assert [(c.name, c.ok) for c in fed.diagnosis] == [("preprocessing", False)]
    assert "PREPROCESSING is implicated" in fed.reason and fed.to_dict()["diagnosis"][0]["ok"] is False
    load_expected.cache_clear()
    flat = expected_for("resnet50_in", setting=RunSetting("cuda", "9.0", "bf16"))
    assert flat is not None and flat.entry is None and flat.named("PASS") == "PASS"


def _evaluation(result, provenance, amp=None):
    config = PreprocessConfig()
    return SimpleNamespace(result=result, provenance=provenance, amp=amp, config=config)


def test_judgements_resolve_the_evaluations_own_device_and_dtype(keyed, resnet50_reference_csv):
    """The published ResNet-50 decisions (22.07%) held to the H100 bf16 entry (22.07%) pass, to the default
    (21.39% +- 1.5 pp) pass, and a 0.5 pp entry fails with the entry in the message."""
    result = compute_shape_bias(read_decisions(resnet50_reference_csv), n_bootstrap=0)
    h100 = _evaluation(result, {"device": {"type": "cuda", "capability": "9.0"}, "precision": "bf16"})
    expected = expected_for("net", keyed)
    assert expected is not None
    judgement = against_published(Case("net", result, [], expected.for_evaluation(h100), config=PreprocessConfig(),
                                       reference=PreprocessConfig()))  # fmt: skip
    assert (judgement.passed, judgement.text, judgement.expectation) == (True, "PASS [cuda:9.0/bf16]", "cuda:9.0/bf16")
    strict = expected_for("net", keyed)
    assert strict is not None
    tight = strict.__class__(**{**strict.__dict__, "keyed": (), "value": 0.2139, "tolerance": 0.005})
    cpu = _evaluation(result, {"device": {"type": "cpu"}, "precision": "fp32"})
    failed = against_expectation(Case("Net (net.py:build)", result, [], tight.for_evaluation(cpu), user=True))
    assert not failed.passed and failed.text == "FAIL" and failed.status == "fail"
    assert "vs expected 21.39% +- 0.5 pp (README)" in failed.message


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("gpu/bf16", "DEVICE"),
        ("cuda/int8", "DEVICE"),
        ("cpu:9.0/fp32", "compute capability is a CUDA device's"),
        ("cuda:nine/bf16", "DEVICE"),
    ],
)
def test_a_bad_key_or_field_is_one_line(tmp_path, key, message):
    path = tmp_path / "expected.toml"
    path.write_text(f'[models.net]\nexpected = 0.2\ntolerance = 0.01\n[models.net.expectations]\n"{key}" = {{}}\n')
    load_expected.cache_clear()
    with pytest.raises(DataError, match=message) as caught:
        expected_for("net", path)
    assert "\n" not in str(caught.value) and "[models.net]" in str(caught.value)
    path.write_text('[models.net]\n[models.net.expectations]\n"cuda" = { flip_budget = -1 }\n')
    load_expected.cache_clear()
    with pytest.raises(DataError, match="'flip_budget' is a number of decisions"):
        expected_for("net", path)
    path.write_text('[models.net]\n[models.net.expectations]\n"cuda" = { tolerence = 0.1 }\n')
    load_expected.cache_clear()
    with pytest.raises(DataError, match="unknown field 'tolerence'"):
        expected_for("net", path)


def test_key_grammar():
    assert ExpectationKey.parse("cuda:9.0/bf16").specificity == (3, True, True)
    assert ExpectationKey.parse("*/fp16").dtype == "fp16" and ExpectationKey.parse("*/fp16").device is None
    assert ExpectationKey.parse("cpu").matches(RunSetting("cpu", None, "bf16"))
    assert not ExpectationKey.parse("cuda:8.0").matches(RunSetting("cuda", "9.0", "fp32"))
    assert str(RunSetting("cuda", "9.0", "bf16")) == "cuda:9.0/bf16"
    setting = RunSetting.of_provenance({"device": {"type": "cuda", "name": "H100", "capability": "9.0"},
                                        "precision": "bf16"})  # fmt: skip
    assert setting == RunSetting("cuda", "9.0", "bf16")


def test_the_shipped_budgets_of_the_bundled_model():
    """EfficientNet-Lite0: 3 flips in fp32 anywhere, 32 under bf16 autocast (measured 21 of 1280 on a CPU)."""
    load_expected.cache_clear()
    expected = expected_for("efficientnet_lite0")
    assert expected is not None
    assert expected.for_setting(RunSetting()).flip_budget == 3
    assert expected.for_setting(RunSetting("cuda", "9.0", "fp32")).flip_budget == 3
    bf16 = expected.for_setting(RunSetting("cuda", "9.0", "bf16"))
    assert (bf16.flip_budget, bf16.entry) == (32, "*/bf16")
    assert expected.for_setting(RunSetting()).value is None  # no published value: still none


def test_the_flip_report_holds_a_run_to_its_budget(resnet50_reference_csv):
    """Real decisions (the published ResNet-50's), 5 of them changed: within a budget of 5, above one of 4."""
    reference = read_decisions(resnet50_reference_csv)
    candidate = [d if i % 200 else d.__class__(d.imagename, d.shape, d.texture, "zz") for i, d in
                 enumerate(reference)][: len(reference)]  # fmt: skip
    changed = sum(a.response != b.response for a, b in zip(reference, candidate, strict=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = decision_flips(reference, candidate, budget=changed, budget_entry="cuda/bf16")
    assert report.count == changed and report.within_budget
    with pytest.warns(AmpFlipWarning, match=rf"above the model's flip budget of {changed - 1} \[cuda/bf16\]"):
        report = decision_flips(reference, candidate, budget=changed - 1, budget_entry="cuda/bf16")
    assert report.within_budget is False
