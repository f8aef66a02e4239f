"""Binary calibration (positive-class and top-label) against torchmetrics, netcal, scikit-learn,
uncertainty-calibration and relplot, on random data, on real one-vs-rest scores and on hand-computed cases.

Parity tests are named ``test_parity_*`` (select them with ``-k parity``). The largest differences
measured are listed in docs/binary.md (``benchmarks/parity_binary.py`` reproduces them).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from modelval.errors import InputValidationError
from modelval.metrics.binary import (
    FRACTION_OF_POSITIVES,
    binary_brier_score,
    binary_calibration_error,
    binary_calibration_intervals,
    binary_debiased_l2_calibration_error,
    binary_negative_log_likelihood,
    binary_reliability_bins,
    binary_smooth_ece,
    binary_smooth_reliability_curve,
    binary_top_label,
    binary_top_label_calibration_error,
    logit,
    sigmoid,
    validate_binary,
)
from modelval.metrics.bootstrap import naive_bootstrap
from modelval.metrics.calibration import expected_calibration_error, top1_confidences
from reference_packages import reference, reference_names

# Reference packages (imported on first use: a missing one skips only the parity tests that use it)
(calibration_curve,) = reference_names("sklearn.calibration", "calibration_curve")
brier_score_loss, log_loss = reference_names("sklearn.metrics", "brier_score_loss", "log_loss")

tm_classification = reference("torchmetrics.functional.classification")
netcal_metrics = reference("netcal.metrics")
calibration_ref = reference("calibration")  # uncertainty-calibration
relplot = reference("relplot")

#: Agreement demanded per reference (measured: 0 to 3e-17 for the binned numbers, see docs/binary.md).
EXACT_TOL = 1e-12
KUMAR_TOL = 1e-9  # as tests/metrics/test_estimators.py: the package sums in Python


def overconfident(n: int, seed: int, kind: str = "continuous") -> tuple[np.ndarray, np.ndarray]:
    """Positive-class probabilities with P(y = 1 | p) = p ** 1.5 (over-confident for the positive class).

    ``kind="extremes"`` adds exact 0s, 1s and values on the 15-bin edges; ``"rounded"`` rounds to 2 decimals.
    """
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=n)
    if kind == "extremes":
        p[: n // 10] = 1.0
        p[n // 10 : n // 10 + 3] = 0.0
        p[-15:] = np.linspace(0, 1, 16)[1:]
    elif kind == "rounded":
        p = np.round(p, 2)
    return p, (rng.uniform(size=n) < p**1.5).astype(np.int64)


def real_one_vs_rest(evaluation) -> tuple[np.ndarray, np.ndarray]:
    """EfficientNet-Lite0 on the 1280 cue-conflict stimuli: 16-class probabilities (renormalised) and shape labels."""
    from modelval.behaviour.categories import CATEGORIES

    scores = evaluation.category_probabilities.astype(np.float64)
    probs = scores / scores.sum(axis=1, keepdims=True)
    labels = np.array([CATEGORIES.index(s.shape) for s in evaluation.stimuli])
    return probs, labels


# --------------------------------------------------------------------------------------------------
# Positive-class ECE / MCE / RMS


@pytest.mark.parametrize("kind", ["continuous", "extremes", "rounded"])
@pytest.mark.parametrize("n_bins", [1, 5, 15, 37])
@pytest.mark.parametrize(("n", "seed"), [(20, 0), (500, 1), (5000, 2)])
def test_parity_positive_class_errors_equal_torchmetrics_float64(n, seed, n_bins, kind):
    p, y = overconfident(n, seed, kind)
    for norm in ("l1", "l2", "max"):
        expected = float(
            tm_classification.binary_calibration_error(torch.tensor(p), torch.tensor(y), n_bins=n_bins, norm=norm)
        )
        ours = binary_calibration_error(p, y, n_bins, norm=norm, convention="torchmetrics")
        assert ours == pytest.approx(expected, abs=EXACT_TOL), norm


@pytest.mark.parametrize("n_bins", [1, 5, 15, 37])
@pytest.mark.parametrize(("n", "seed"), [(20, 0), (500, 1), (5000, 2)])
def test_parity_positive_class_ece_and_mce_equal_netcal(n, seed, n_bins):
    # Continuous scores: netcal bins [lo, hi), modelval (lo, hi]; they agree off the edges (exact ties differ).
    p, y = overconfident(n, seed)
    assert binary_calibration_error(p, y, n_bins) == pytest.approx(
        netcal_metrics.ECE(n_bins).measure(p, y), abs=EXACT_TOL
    )
    assert binary_calibration_error(p, y, n_bins, norm="max") == pytest.approx(
        netcal_metrics.MCE(n_bins).measure(p, y), abs=EXACT_TOL
    )


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("kind", ["continuous", "extremes", "rounded"])
@pytest.mark.parametrize("n_bins", [2, 10, 15])
def test_parity_reliability_bins_equal_sklearn_calibration_curve(kind, n_bins, strategy):
    p, y = overconfident(2000, 3, kind)
    prob_true, prob_pred = calibration_curve(y, p, n_bins=n_bins, strategy=strategy)
    bins = binary_reliability_bins(p, y, n_bins, adaptive=strategy == "quantile")
    nonempty = bins.counts > 0
    np.testing.assert_allclose(bins.accuracy[nonempty], prob_true, rtol=0, atol=EXACT_TOL)
    np.testing.assert_allclose(bins.confidence[nonempty], prob_pred, rtol=0, atol=EXACT_TOL)
    assert bins.target == FRACTION_OF_POSITIVES


def test_positive_class_hand_computed():
    # Bins of width 0.5: (0, .5] holds .1, .2, .4 with 1 positive of 3 (mean p .7/3);
    # (.5, 1] holds .6, .9 with 2 of 2 (mean p .75).
    p = [0.1, 0.2, 0.4, 0.6, 0.9]
    y = [0, 1, 0, 1, 1]
    gap_low, gap_high = abs(1 / 3 - 0.7 / 3), abs(1 - 0.75)
    assert binary_calibration_error(p, y, 2) == pytest.approx(3 / 5 * gap_low + 2 / 5 * gap_high, abs=1e-15)
    assert binary_calibration_error(p, y, 2, norm="max") == pytest.approx(0.25, abs=1e-15)
    rms = math.sqrt(3 / 5 * gap_low**2 + 2 / 5 * gap_high**2)
    assert binary_calibration_error(p, y, 2, norm="l2") == pytest.approx(rms, abs=1e-15)
    # An edge value goes to the lower bin, (lo, hi]; torchmetrics' convention puts it in the upper one.
    assert binary_reliability_bins([0.5, 0.7], [1, 1], 2).counts.tolist() == [1, 1]
    assert binary_reliability_bins([0.5, 0.7], [1, 1], 2, convention="torchmetrics").counts.tolist() == [0, 2, 0]


def test_wilson_band_of_a_bin_is_the_textbook_value():
    # 4 positives of 10 in one bin: Wilson 95% interval (0.1682, 0.6873) (Newcombe 1998, table I style).
    p = np.full(10, 0.35)
    y = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 0])
    low, high = binary_reliability_bins(p, y, 1).accuracy_interval()
    assert (low[0], high[0]) == pytest.approx((0.16818, 0.68732), abs=5e-5)
    records = binary_reliability_bins(p, y, 1).as_records()
    assert records[0]["fraction_positive"] == 0.4 and "accuracy" not in records[0]


# --------------------------------------------------------------------------------------------------
# Top-label ECE of a binary classifier: a different number


def test_top_label_and_positive_class_ece_are_different_numbers():
    # Five examples at p = .2 (2 of them positive: .4 > .2) and five at p = .8 (all positive: 1 > .8).
    # Positive class: both bins are off by .2, ECE .2. Top label: all ten have confidence .8 and 8 of 10
    # predictions are right, so the two errors cancel in one bin: top-label ECE 0.
    p = np.array([0.2] * 5 + [0.8] * 5)
    y = np.array([1, 1, 0, 0, 0, 1, 1, 1, 1, 1])
    assert binary_calibration_error(p, y, 10) == pytest.approx(0.2, abs=1e-15)
    assert binary_top_label_calibration_error(p, y, 10) == pytest.approx(0.0, abs=1e-15)
    conf, correct = binary_top_label(p, y)
    assert conf.tolist() == pytest.approx([0.8] * 10) and correct.sum() == 8


def test_top_label_tie_at_one_half_predicts_the_negative_class():
    conf, correct = binary_top_label([0.5, 0.5, 0.50000001], [0, 1, 1])
    assert conf.tolist() == pytest.approx([0.5, 0.5, 0.50000001])
    assert correct.tolist() == [1.0, 0.0, 1.0]


@pytest.mark.parametrize("n_bins", [5, 15])
@pytest.mark.parametrize(("n", "seed"), [(200, 4), (5000, 5)])
def test_parity_top_label_ece_equals_uncertainty_calibration_and_torchmetrics(n, seed, n_bins):
    p, y = overconfident(n, seed)
    two = np.stack([1 - p, p], axis=1)
    expected = calibration_ref.get_ece(two, y, num_bins=n_bins, mode="top-label")
    assert binary_top_label_calibration_error(p, y, n_bins) == pytest.approx(expected, abs=EXACT_TOL)
    # torchmetrics' multiclass path casts to float32 and sums in float32 (modelval sums in float64):
    # agreement to float32 rounding, measured up to 2.0e-6 at N = 20000 (benchmarks/parity_binary.py).
    tm = tm_classification.multiclass_calibration_error(torch.tensor(two), torch.tensor(y), 2, n_bins=n_bins)
    ours = binary_top_label_calibration_error(p.astype(np.float32), y, n_bins, convention="torchmetrics")
    assert ours == pytest.approx(float(tm), abs=1e-5)
    assert ours == pytest.approx(expected_calibration_error(*top1_confidences(two, y), n_bins), abs=1e-5)


# --------------------------------------------------------------------------------------------------
# Brier, NLL, debiased L2, smooth ECE


@pytest.mark.parametrize("kind", ["continuous", "extremes"])
@pytest.mark.parametrize("seed", [0, 1])
def test_parity_brier_and_nll_equal_sklearn(seed, kind):
    p, y = overconfident(3000, seed, kind)
    assert binary_brier_score(p, y) == pytest.approx(brier_score_loss(y, p), abs=EXACT_TOL)
    assert binary_nll(p, y) == pytest.approx(log_loss(y, p), abs=EXACT_TOL)
    # float32 input: both clip at float32's eps (1.2e-7); scikit-learn computes in float32.
    p32 = p.astype(np.float32)
    assert binary_nll(p32, y) == pytest.approx(log_loss(y, p32), rel=1e-6)


def binary_nll(p, y, logits=False):
    return binary_negative_log_likelihood(p, y, logits=logits)


def test_parity_nll_from_logits_equals_torch_binary_cross_entropy_with_logits():
    rng = np.random.default_rng(6)
    z = np.concatenate([rng.normal(size=2000) * 4, [-60.0, 60.0, -700.0, 700.0]])
    y = (rng.uniform(size=z.size) < sigmoid(z / 2)).astype(np.int64)
    y[-4:] = [1, 0, 0, 1]  # two confidently wrong, two confidently right
    expected = torch.nn.functional.binary_cross_entropy_with_logits(
        torch.tensor(z), torch.tensor(y, dtype=torch.float64)
    )
    assert binary_nll(z, y, logits=True) == pytest.approx(float(expected), abs=EXACT_TOL)
    # The probability path clips a confidently wrong prediction at -log(eps); the logit path does not.
    assert binary_nll(sigmoid(z), y) < binary_nll(z, y, logits=True)


def test_brier_and_nll_hand_computed():
    assert binary_brier_score([0.9, 0.2], [1, 1]) == pytest.approx((0.01 + 0.64) / 2, abs=1e-15)
    assert binary_nll([0.9, 0.2], [1, 0]) == pytest.approx(-(math.log(0.9) + math.log(0.8)) / 2, abs=1e-15)
    assert binary_nll([0.0], [1]) == pytest.approx(-math.log(np.finfo(np.float64).eps), abs=1e-12)
    assert binary_nll([0.0], [1], logits=True) == pytest.approx(math.log(2), abs=1e-15)
    # Binary Brier = half the two-column multiclass Brier score.
    from modelval.metrics.scoring import brier_score

    p, y = overconfident(100, 9)
    assert 2 * binary_brier_score(p, y) == pytest.approx(brier_score(np.stack([1 - p, p], 1), y), abs=1e-15)


@pytest.mark.parametrize("n_bins", [5, 15])
@pytest.mark.parametrize(("n", "seed"), [(200, 0), (2000, 1), (20000, 2)])
def test_parity_debiased_l2_equals_uncertainty_calibration_binary(n, seed, n_bins):
    p, y = overconfident(n, seed)
    expected = calibration_ref.lower_bound_scaling_ce(p, y, p=2, debias=True, num_bins=n_bins)
    assert binary_debiased_l2_calibration_error(p, y, n_bins) == pytest.approx(expected, abs=KUMAR_TOL)
    if n_bins == 15:  # the package's front door on 1-D input is the binary route (continuous scores)
        assert binary_debiased_l2_calibration_error(p, y) == pytest.approx(
            calibration_ref.get_calibration_error(p, y, p=2, debias=True), abs=KUMAR_TOL
        )


@pytest.mark.parametrize(("n", "seed"), [(100, 0), (3000, 1)])
def test_parity_smooth_ece_equals_relplot(n, seed):
    p, y = overconfident(n, seed)
    assert binary_smooth_ece(p, y) == pytest.approx(relplot.smECE(p, y), abs=EXACT_TOL)
    z = logit(p)
    assert binary_smooth_ece(z, y, logits=True) == pytest.approx(relplot.smECE(sigmoid(z), y), abs=EXACT_TOL)
    curve = binary_smooth_reliability_curve(p, y)
    ref = relplot.prepare_rel_diagram(p, y, plot_confidence_band=False)
    np.testing.assert_allclose(curve.accuracy, ref["mu"], rtol=0, atol=EXACT_TOL)


# --------------------------------------------------------------------------------------------------
# Real scores: the bundled EfficientNet-Lite0's one-vs-rest columns


def test_parity_on_real_one_vs_rest_scores(recorded_evaluations):
    probs, labels = real_one_vs_rest(recorded_evaluations())
    worst = 0.0
    for k in range(probs.shape[1]):
        p, y = probs[:, k], (labels == k).astype(np.int64)
        checks = [
            (
                binary_calibration_error(p, y, 15, convention="torchmetrics"),
                float(tm_classification.binary_calibration_error(torch.tensor(p), torch.tensor(y), n_bins=15)),
            ),
            (binary_calibration_error(p, y, 15), netcal_metrics.ECE(15).measure(p, y)),
            (binary_brier_score(p, y), brier_score_loss(y, p)),
            (binary_nll(p, y), log_loss(y, p, labels=[0, 1])),
            (binary_smooth_ece(p, y), relplot.smECE(p, y)),
            (
                binary_top_label_calibration_error(p, y, 15),
                calibration_ref.get_ece(np.stack([1 - p, p], 1), y, num_bins=15, mode="top-label"),
            ),
        ]
        for ours, theirs in checks:
            worst = max(worst, abs(ours - theirs))
        debiased = calibration_ref.lower_bound_scaling_ce(p, y, p=2, debias=True, num_bins=15)
        assert binary_debiased_l2_calibration_error(p, y) == pytest.approx(debiased, abs=KUMAR_TOL)
    assert worst <= EXACT_TOL
    # Not a test that cannot fail: the model is far from calibrated on this one-vs-rest task.
    assert binary_calibration_error(probs[:, 0], labels == 0, 15) > 0.01


# --------------------------------------------------------------------------------------------------
# Bootstrap intervals


def test_binary_intervals_match_the_naive_bootstrap():
    p, y = overconfident(20_000, 7)
    fast = binary_calibration_intervals(p, y, 15, n_resamples=2000, seed=0)
    assert set(fast) == {"ece", "mce", "rms", "positive_rate"}
    naive = naive_bootstrap(lambda a, b: binary_calibration_error(a, b, 15), p, y, n_resamples=400, seed=3)
    width = naive.high - naive.low
    assert fast["ece"].estimate == pytest.approx(binary_calibration_error(p, y, 15), abs=1e-15)
    assert abs(fast["ece"].low - naive.low) <= 0.15 * width and abs(fast["ece"].high - naive.high) <= 0.15 * width
    assert fast["positive_rate"].estimate == pytest.approx(y.mean())
    stratified = binary_calibration_intervals(p, y, 15, n_resamples=200, stratify=True)
    assert stratified["positive_rate"].low == stratified["positive_rate"].high == pytest.approx(y.mean())


# --------------------------------------------------------------------------------------------------
# Input validation


def test_logits_path_and_shapes():
    rng = np.random.default_rng(8)
    z = rng.normal(size=300) * 3
    y = (rng.uniform(size=300) < sigmoid(z)).astype(int)
    assert binary_calibration_error(z, y, logits=True) == binary_calibration_error(sigmoid(z), y)
    assert binary_calibration_error(z[:, None], y[:, None], logits=True) == binary_calibration_error(sigmoid(z), y)
    assert binary_calibration_error(torch.tensor(sigmoid(z)), torch.tensor(y).bool()) == binary_calibration_error(
        sigmoid(z), y
    )
    assert sigmoid(np.array([-800.0, 0.0, 800.0])).tolist() == [0.0, 0.5, 1.0]
    assert logit(np.array([0.0, 1.0])) == pytest.approx([-36.04, 36.04], abs=0.01)


@pytest.mark.parametrize(
    ("probs", "labels", "message"),
    [
        ([0.2, np.nan], [0, 1], "NaN"),
        ([0.2, 1.5], [0, 1], r"in \[0, 1\].*logits=True"),
        ([0.2, 0.3], [0, 2], "0/1.*multiclass"),
        ([0.2, 0.3], [0, 1, 1], r"shape \(2,\)"),
        (np.full((3, 2), 0.5), [0, 1, 1], r"\(N, 2\) softmax take column 1"),
        ([], [], "no examples"),
        (np.array([True, False]), [0, 1], "real numbers"),
        ([0.2, 0.3], ["a", "b"], "bool or 0/1"),
    ],
)
def test_bad_binary_input_is_a_clear_error(probs, labels, message):
    with pytest.raises(InputValidationError, match=message):
        validate_binary(probs, labels)
    with pytest.raises(InputValidationError, match=message):
        binary_calibration_error(probs, labels)


def test_bad_logits_and_options():
    with pytest.raises(InputValidationError, match="NaN or infinite"):
        binary_calibration_error([0.0, np.inf], [0, 1], logits=True)
    with pytest.raises(InputValidationError, match="norm must be one of"):
        binary_calibration_error([0.2, 0.4], [0, 1], norm="l3")  # type: ignore[arg-type]
    with pytest.raises(InputValidationError, match="positive integer"):
        binary_calibration_error([0.2, 0.4], [0, 1], 0)
