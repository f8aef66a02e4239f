"""Diagnosis: each check implicates the right cause, on real data and the real model."""

import csv

import pytest

from modelval.judgement.diagnosis import Check, check_calculation, check_preprocessing, check_sources, diagnose
from modelval.preprocessing import HALF_MEAN, HALF_STD, IMAGENET_MEAN, IMAGENET_STD, PreprocessConfig
from modelval.runner.cases import ValidationCase


def test_calculation_check_on_published_data(resnet50_reference_csv):
    check = check_calculation(resnet50_reference_csv)
    assert check.ok is True and "162/572" in check.detail


def test_tampered_decisions_implicate_the_calculation(resnet50_reference_csv, tmp_path):
    rows = list(csv.reader(resnet50_reference_csv.open()))
    for row in rows[1:40]:
        row[4] = row[5]  # pretend the model named the shape
    tampered = tmp_path / "tampered.csv"
    with tampered.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    check = check_calculation(tampered)
    assert check.ok is False
    assert diagnose([check]).startswith("Diagnosis: CALCULATION is implicated")


def test_missing_reference_is_reported_not_hidden(tmp_path):
    check = check_calculation(tmp_path / "absent.csv")
    assert check.ok is None and "not found" in check.detail
    assert "could not run" in diagnose([check])


def test_preprocessing_check_flags_normalization_and_resize():
    reference = PreprocessConfig(HALF_MEAN, HALF_STD, interpolation="bicubic")
    assert check_preprocessing(reference, reference).ok is True
    wrong = check_preprocessing(PreprocessConfig(IMAGENET_MEAN, IMAGENET_STD, interpolation="bicubic"), reference)
    assert wrong.ok is False and "normalization imagenet" in wrong.detail
    resized = check_preprocessing(reference.for_stimuli(256), reference)
    assert resized.ok is False and "official protocol: none" in resized.detail


def test_source_check_compares_other_sources():
    agree = check_sources("deit_small_hf", 0.40, {"timm": 0.401, "torch.hub": 0.399}, tolerance=0.005)
    assert agree.ok is True
    disagree = check_sources("deit_small_hf", 0.40, {"timm": 0.45}, tolerance=0.005)
    assert disagree.ok is False and "+5.00 pp" in disagree.detail
    assert check_sources("resnet50_in", 0.2, {}, tolerance=0.01).ok is None
    assert check_sources("x", 0.2, {}, tolerance=0.01, equivalence=lambda: (False, "logits differ")).ok is False


def test_diagnosis_order_and_all_clear():
    ok = [Check("calculation", True, ""), Check("preprocessing", True, ""), Check("model source", True, "")]
    assert "suspect the WEIGHTS" in diagnose(ok)
    mixed = [Check("calculation", True, ""), Check("preprocessing", False, "x"), Check("model source", False, "y")]
    assert diagnose(mixed).startswith("Diagnosis: PREPROCESSING is implicated")


@pytest.mark.slow
def test_real_run_with_wrong_normalization_is_diagnosed_as_preprocessing(
    modelval_runner, bundled_evaluations, monkeypatch
):
    """Pretend a published value exists for the bundled model and run it under ImageNet mean/std."""
    from modelval.judgement.expected import ExpectedShapeBias
    from modelval.runner import matrix as validation

    correct = bundled_evaluations("model").result.shape_bias
    bundled_evaluations("imagenet")  # the session's one forward: the runner's case below reads it
    fake = ExpectedShapeBias("efficientnet_lite0", "EfficientNet-Lite0", correct, 0.01, "test value")
    monkeypatch.setattr(validation, "expected_for", lambda model: fake)
    case = ValidationCase("efficientnet_lite0", "efficientnet", "lite0", "pypi", "correct", "imagenet")
    judgement = modelval_runner.run(case)
    modelval_runner.rows.pop()  # keep the session report to real cases
    assert not judgement.passed
    assert "PREPROCESSING is implicated" in judgement.message
    assert "[ok] calculation" in judgement.message
    assert "Category" in judgement.message and "airplane" in judgement.message  # per-category breakdown


@pytest.mark.slow
def test_baseline_failure_is_diagnosed_against_the_models_own_config(bundled_evaluations):
    """The bundled model under ImageNet mean/std against its committed baseline: flips, blamed on preprocessing."""
    from modelval.judgement.expected import expected_for
    from modelval.judgement.verdicts import Case, against_baseline
    from modelval.models import get_entry
    from modelval.paths import package_data

    entry = get_entry("efficientnet_lite0")
    wrong = bundled_evaluations("imagenet")
    baseline = package_data(expected_for(entry.name).baseline)
    verdict = against_baseline(Case(
        entry.name, wrong.result, wrong.decisions, config=wrong.config, reference=entry.preprocess.for_stimuli(None),
        baseline=baseline,
    ))  # fmt: skip
    assert not verdict.passed and verdict.status == "fail"
    assert verdict.flips is not None and verdict.flips.count > 100  # the flips as data, not read from the text
    assert sum(verdict.flips.by_transition.values()) == verdict.flips.count
    assert "PREPROCESSING is implicated" in verdict.message and "normalization imagenet" in verdict.message
    assert [check["check"] for check in verdict.to_dict()["diagnosis"]] == ["preprocessing"]
