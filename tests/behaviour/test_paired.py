"""Paired comparison: exact McNemar against scipy and by hand, paired bootstrap, published decisions."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from modelval.behaviour.decisions import Decision, read_decisions
from modelval.behaviour.paired import compare_paired, mcnemar_exact
from modelval.behaviour.shape_bias import compute_shape_bias
from modelval.behaviour.trials import read_trials
from modelval.errors import DataError
from reference_packages import reference_names

# Reference packages (imported on first use: a missing one skips only the parity tests that use it)
(binomtest,) = reference_names("scipy.stats", "binomtest")
(scipy_permutation_test,) = reference_names("scipy.stats", "permutation_test")

VGG = "style-transfer-512-nomask-experiment_vgg16_session-1.csv"
RESNET = "style-transfer-512-nomask-experiment_resnet50_session-1.csv"


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        (0, 0, 1.0),  # no discordant pair: no evidence either way
        (0, 5, 2 / 32),  # 2 * P(X <= 0), X ~ Bin(5, 1/2)
        (1, 4, 2 * 6 / 32),  # 2 * (1 + 5) / 32
        (3, 3, 1.0),  # balanced: 2 * P(X <= 3) > 1, capped
        (2, 8, 2 * (1 + 10 + 45) / 1024),
    ],
)
def test_mcnemar_by_hand(b, c, expected):
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12)
    assert mcnemar_exact(c, b) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("b", "c"), [(1, 0), (7, 2), (20, 98), (250, 301), (600, 650), (40, 40)])
def test_mcnemar_equals_scipy_binomial_test(b, c):
    assert mcnemar_exact(b, c) == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-9)


def test_mcnemar_rejects_negative_counts():
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)


def _conflict_rows(path):
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            image = row["imagename"].split("_")[-1]
            texture = image.split("-")[1].removesuffix(".png").rstrip("0123456789")
            if texture != row["category"]:
                yield image, row["object_response"], row["category"], texture


def test_vgg16_vs_resnet50_on_cue_conflict(modelval_reference_dir):
    a, b = read_trials(modelval_reference_dir / VGG), read_trials(modelval_reference_dir / RESNET)
    result = compare_paired(a, b, dataset="cue-conflict", names=("VGG-16", "ResNet-50"), n_bootstrap=500)
    sb_a = compute_shape_bias(read_decisions(modelval_reference_dir / VGG), n_bootstrap=0).shape_bias
    sb_b = compute_shape_bias(read_decisions(modelval_reference_dir / RESNET), n_bootstrap=0).shape_bias
    assert result.images == 1200 and result.statistic == "shape_bias"
    assert result.difference == pytest.approx(sb_a - sb_b)
    low, high = result.ci95
    assert low < result.difference < high < 0  # VGG-16 is more texture-biased than ResNet-50
    # discordant = shape hit vs not, counted with csv only
    hits_a = {img: resp == shape for img, resp, shape, _ in _conflict_rows(modelval_reference_dir / VGG)}
    hits_b = {img: resp == shape for img, resp, shape, _ in _conflict_rows(modelval_reference_dir / RESNET)}
    assert result.a_only == sum(hits_a[i] and not hits_b[i] for i in hits_a)
    assert result.b_only == sum(hits_b[i] and not hits_a[i] for i in hits_a)
    assert result.mcnemar_p == pytest.approx(binomtest(result.a_only, result.a_only + result.b_only).pvalue)
    assert set(result.per_category) == {t.category for t in a}
    for row in result.per_category.values():
        assert row.difference == pytest.approx(row.a - row.b) or np.isnan(row.difference)


def test_bootstrap_resamples_images_jointly(modelval_reference_dir):
    a = read_trials(modelval_reference_dir / VGG)
    result = compare_paired(a, a, dataset="cue-conflict", n_bootstrap=200)
    # joint resampling: an observer against itself differs by exactly 0 on every resample
    assert result.ci95 == (0.0, 0.0)
    assert (result.a_only, result.b_only, result.mcnemar_p) == (0, 0, 1.0)


def test_accuracy_on_edges(modelval_reference_dir):
    human = read_trials(modelval_reference_dir / "edge-experiment_subject-01_session_1.csv")
    vgg = read_trials(modelval_reference_dir / "edge-experiment_vgg_session_1.csv")
    result = compare_paired(human, vgg, dataset="edges", n_bootstrap=300, seed=1)
    assert result.statistic == "accuracy" and result.images == 160
    assert result.value_a == pytest.approx(np.mean([t.correct for t in human]))
    assert result.value_b == pytest.approx(np.mean([t.correct for t in vgg]))
    assert result.a_only - result.b_only == round(160 * result.difference)
    assert sum(row.images for row in result.per_category.values()) == 160
    assert compare_paired(human, vgg, dataset="edges", n_bootstrap=300, seed=1).ci95 == result.ci95


def test_different_images_are_an_error(modelval_reference_dir):
    a = read_trials(modelval_reference_dir / "edge-experiment_vgg_session_1.csv")
    b = [Decision(t.image.replace("1.png", "11.png"), t.category, t.category, t.response) for t in a]
    with pytest.raises(DataError, match="do not cover the same images"):
        compare_paired(a, b, dataset="edges")


# --- issue 19: the test belongs to the printed difference ---------------------------------------------


def _codes(trials):
    """Per conflict image (sorted): 0 other, 1 shape hit, 2 texture hit, read with plain string handling."""
    out = {}
    for t in trials:
        shape, texture = (part.rstrip("0123456789") for part in t.image.removesuffix(".png").split("-"))
        if shape != texture:
            out[t.image] = 1 if t.response == shape else 2 if t.response == texture else 0
    return np.array([out[k] for k in sorted(out)])


def _difference(x, y, axis=-1):
    with np.errstate(invalid="ignore", divide="ignore"):
        return (x == 1).sum(axis) / (x >= 1).sum(axis) - (y == 1).sum(axis) / (y >= 1).sum(axis)


def test_compare_reports_a_test_of_the_shape_bias_difference(modelval_reference_dir):
    a, b = read_trials(modelval_reference_dir / VGG), read_trials(modelval_reference_dir / RESNET)
    result = compare_paired(
        a, b, dataset="cue-conflict", names=("VGG-16", "ResNet-50"), n_bootstrap=200, permutations=4000
    )
    payload = result.to_dict()
    test = payload["test"]
    assert (test["statistic"], test["method"], test["permutations"], test["seed"]) == (
        "shape_bias_difference", "paired permutation", 4000, 0,
    )  # fmt: skip
    assert test["observed"] == pytest.approx(result.difference)
    # scipy's paired ('samples') permutation test of the same statistic, another random stream
    reference = scipy_permutation_test(
        (_codes(a), _codes(b)), _difference, permutation_type="samples", vectorized=True, n_resamples=4000, rng=1
    )
    assert float(reference.statistic) == pytest.approx(result.difference)
    assert test["p"] == pytest.approx(float(reference.pvalue), abs=2e-3)  # both at their two-sided floor, 2/4001
    # McNemar under its own key, named for what it tests
    mcnemar = payload["mcnemar"]
    assert mcnemar["statistic"] == "shape_decision_rate" and "NOT the shape bias" in mcnemar["statistic_meaning"]
    assert mcnemar["rate_a"] == pytest.approx(84 / 1200) and mcnemar["rate_b"] == pytest.approx(162 / 1200)
    assert "mcnemar_p" not in payload and "discordant" not in payload
    assert payload["ci95_resampling"] == "texture"


def test_per_category_differences_have_intervals_and_holm_adjusted_exact_tests(modelval_reference_dir):
    human = read_trials(modelval_reference_dir / "edge-experiment_subject-01_session_1.csv")
    vgg = read_trials(modelval_reference_dir / "edge-experiment_vgg_session_1.csv")
    result = compare_paired(human, vgg, dataset="edges", n_bootstrap=300, seed=1)
    raw = {}
    for category, row in result.per_category.items():
        assert row.images == 10
        low, high = row.ci95
        assert low <= row.difference <= high
        # accuracy per category: the exact permutation test is the exact McNemar test of that category
        mine = [t for t in human if t.category == category]
        index = {t.image: t for t in vgg}
        b = sum(t.correct and not index[t.image].correct for t in mine)
        c = sum(index[t.image].correct and not t.correct for t in mine)
        assert row.p == pytest.approx(binomtest(b, b + c).pvalue if b + c else 1.0, abs=1e-12)
        raw[category] = row.p
    # Holm by hand: sorted ascending, (m - i) * p, running maximum, capped at 1
    ordered = sorted(raw.items(), key=lambda item: item[1])
    running = 0.0
    for i, (category, p) in enumerate(ordered):
        running = max(running, min(1.0, (len(ordered) - i) * p))
        assert result.per_category[category].p_holm == pytest.approx(running)
    # the example: +50 pp on 10 images (keyboard) is not significant after Holm; +100 pp is
    assert result.per_category["keyboard"].difference == pytest.approx(0.5)
    assert result.per_category["keyboard"].p == pytest.approx(1 / 16) and result.per_category["keyboard"].p_holm > 0.3
    assert all(row.p_holm < 0.05 for row in result.per_category.values() if row.difference == 1.0)
    assert result.to_dict()["per_category_tests"]["correction"] == "Holm"


def test_mcnemar_and_the_shape_bias_can_disagree(recorded_evaluations):
    """The issue's case: ImageNet- vs own-normalized Lite0: +3.26 pp, permutation p ~ 0.006, McNemar p = 0.53."""
    own, imagenet = (recorded_evaluations(n).decisions for n in ("model", "imagenet"))
    result = compare_paired(imagenet, own, dataset="cue-conflict", resample="stimuli", n_bootstrap=1000)
    assert round(result.difference * 100, 2) == 3.26
    assert result.ci95[0] > 0  # stimuli resampled: the interval excludes 0 ...
    assert result.mcnemar.p == pytest.approx(0.53, abs=0.01)  # ... the shape-decision rate barely moves ...
    assert result.test.p < 0.02  # ... and the test of the printed difference agrees with the interval
    texture = compare_paired(imagenet, own, dataset="cue-conflict", n_bootstrap=1000)
    assert texture.ci95[0] < result.ci95[0] and texture.ci95[1] > result.ci95[1]
