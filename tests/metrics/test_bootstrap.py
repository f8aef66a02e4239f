"""Bootstrap intervals: the fast cell-count method against a naive example-level bootstrap, and Wilson."""

from __future__ import annotations

import math

import numpy as np
import pytest

from modelval.errors import InputValidationError
from modelval.metrics.bootstrap import (
    accuracy_intervals,
    calibration_intervals,
    naive_bootstrap,
)
from modelval.metrics.calibration import reliability_bins
from modelval.metrics.imbalance import balanced_accuracy, reweighted_accuracy, shot_accuracy
from modelval.proportions import wilson_interval


def overconfident(n: int, seed: int, classes: int = 10) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    conf = rng.beta(5, 2, n)
    correct = (rng.random(n) < conf**1.3).astype(np.int64)
    labels = rng.integers(0, classes, n)
    preds = np.where(correct == 1, labels, (labels + 1 + rng.integers(0, classes - 1, n)) % classes)
    return conf, correct, labels, preds


def naive_calibration(conf: np.ndarray, correct: np.ndarray, n_bins: int, n_resamples: int, seed: int):
    """Example-level bootstrap of ECE, MCE and RMS together (one binning per resample)."""
    rng = np.random.default_rng(seed)
    values = np.empty((n_resamples, 3))
    for r in range(n_resamples):
        pick = rng.integers(0, len(conf), len(conf))
        bins = reliability_bins(conf[pick], correct[pick], n_bins)
        values[r] = bins.ece, bins.mce, bins.rms
    return {name: np.percentile(values[:, i], [2.5, 97.5]) for i, name in enumerate(("ece", "mce", "rms"))}


def test_fast_calibration_interval_matches_the_naive_bootstrap_on_100k():
    # The acceptance check: endpoints within 10% of the interval's width, for ECE. MCE (a
    # maximum, with a long upper tail) and RMS get 15%: percentiles of 1000 resamples carry a Monte
    # Carlo error of a few % of the width on each side. The fast side uses 4000 resamples (it is cheap),
    # so nearly all of the remaining difference is the naive bootstrap's own noise.
    conf, correct, _, _ = overconfident(100_000, seed=1)
    fast = calibration_intervals(conf, correct, 15, n_resamples=4000, seed=0)
    naive = naive_calibration(conf, correct, 15, 1000, seed=7)
    point = reliability_bins(conf, correct, 15)
    for name in ("ece", "mce", "rms"):
        interval = fast[name]
        assert interval.estimate == pytest.approx(getattr(point, name), abs=1e-12)
        width = naive[name][1] - naive[name][0]
        tolerance = 0.10 if name == "ece" else 0.15
        assert abs(interval.low - naive[name][0]) <= tolerance * width, name
        assert abs(interval.high - naive[name][1]) <= tolerance * width, name
        assert interval.low < interval.estimate < interval.high


@pytest.mark.parametrize("stratify", [False, True])
def test_accuracy_family_intervals_match_the_naive_bootstrap(stratify):
    _, _, labels, preds = overconfident(10_000, seed=3)
    weights = np.arange(1, 11, dtype=float)
    counts = np.array([500, 300, 150, 100, 60, 40, 20, 19, 5, 2])
    fast = accuracy_intervals(
        labels, preds, 10, class_weights=weights, train_counts=counts, n_resamples=1000, seed=0, stratify=stratify
    )
    rng = np.random.default_rng(11)
    by_class = [np.flatnonzero(labels == c) for c in range(10)]
    values: dict[str, list[float]] = {k: [] for k in fast}
    for _ in range(1000):
        if stratify:
            pick = np.concatenate([rng.choice(idx, len(idx)) for idx in by_class])
        else:
            pick = rng.integers(0, len(labels), len(labels))
        y, p = labels[pick], preds[pick]
        values["accuracy"].append(float(np.mean(y == p)))
        values["balanced_accuracy"].append(balanced_accuracy(y, p, 10))
        values["reweighted_accuracy"].append(reweighted_accuracy(y, p, weights))
        shots = shot_accuracy(y, p, counts)
        for group in ("many", "medium", "few"):
            values[f"shot_{group}"].append(shots[group])
    for name, interval in fast.items():
        low, high = np.percentile(values[name], [2.5, 97.5])
        assert abs(interval.low - low) <= 0.10 * (high - low), name
        assert abs(interval.high - high) <= 0.10 * (high - low), name
    assert fast["accuracy"].estimate == pytest.approx(np.mean(labels == preds))
    assert fast["balanced_accuracy"].estimate == pytest.approx(balanced_accuracy(labels, preds, 10))


def test_stratified_calibration_interval_keeps_class_counts_and_is_close():
    conf, correct, labels, _ = overconfident(50_000, seed=4)
    plain = calibration_intervals(conf, correct, 15, n_resamples=500, seed=0)
    strat = calibration_intervals(conf, correct, 15, labels=labels, stratify=True, n_resamples=500, seed=0)
    assert strat["ece"].stratified and not plain["ece"].stratified
    assert strat["ece"].estimate == plain["ece"].estimate
    # Class labels here are independent of calibration, so stratifying barely changes the width.
    assert strat["ece"].width == pytest.approx(plain["ece"].width, rel=0.25)
    # Accuracy's spread under stratification within classes still comes from the right/wrong split.
    assert strat["accuracy"].low < strat["accuracy"].estimate < strat["accuracy"].high


def test_same_seed_same_interval_and_seed_matters():
    conf, correct, _, _ = overconfident(5_000, seed=5)
    a = calibration_intervals(conf, correct, 10, n_resamples=200, seed=3)
    b = calibration_intervals(conf, correct, 10, n_resamples=200, seed=3)
    c = calibration_intervals(conf, correct, 10, n_resamples=200, seed=4)
    assert a == b
    assert a["ece"].low != c["ece"].low


def test_undefined_resamples_are_counted_not_hidden():
    # Class 2 has one example and a positive weight: resamples that miss it leave the reweighted
    # accuracy undefined (about (1 - 1/n)^n = 37% of them); they are left out and counted.
    labels = np.array([0] * 20 + [1] * 20 + [2])
    preds = labels.copy()
    preds[:5] = 1
    out = accuracy_intervals(labels, preds, 3, class_weights=[1, 1, 1], n_resamples=1000, seed=0)
    valid = out["reweighted_accuracy"].n_valid
    assert 500 < valid < 750
    assert out["accuracy"].n_valid == 1000


def test_wilson_interval_hand_computed():
    z = 1.959963984540054
    low, high = wilson_interval([0, 5, 10, 0], [10, 10, 10, 0])
    assert low[0] == 0.0 and high[0] == pytest.approx(z * z / (10 + z * z))
    assert (low[1], high[1]) == pytest.approx((0.236593090512564, 0.763406909487436))
    assert high[2] == 1.0 and low[2] == pytest.approx(1 - z * z / (10 + z * z))
    assert math.isnan(low[3]) and math.isnan(high[3])


def test_naive_bootstrap_reference_runs():
    conf, correct, _, _ = overconfident(2_000, seed=6)
    out = naive_bootstrap(lambda c, k: float(np.mean(k)), conf, correct, n_resamples=200)
    assert out.low < out.estimate < out.high


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: calibration_intervals([0.5], [1], n_resamples=0), "n_resamples must be a positive integer"),
        (lambda: calibration_intervals([0.5], [1], level=1.5), "level must lie strictly between 0 and 1"),
        (lambda: calibration_intervals([0.5], [1], stratify=True), "stratify=True needs labels"),
        (lambda: calibration_intervals([math.nan], [1]), "NaN"),
        (lambda: accuracy_intervals([0, 1], [0, 1], 2, train_counts=[1]), "1 training counts but 2 classes"),
        (lambda: wilson_interval([3], [2]), "successes must lie between 0 and trials"),
    ],
)
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(InputValidationError, match=message):
        call()
