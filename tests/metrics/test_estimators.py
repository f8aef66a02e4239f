"""Calibration estimators against their reference packages and hand-computed cases.

References: ``uncertainty-calibration`` (import ``calibration``, Kumar et al. 2019), ``relplot``
(Blasiok & Nakkiran 2023), ``netcal`` and scikit-learn.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from modelval.errors import InputValidationError
from modelval.metrics.calibration import expected_calibration_error, reliability_bins, rms_calibration_error
from modelval.metrics.estimators import (
    DEFAULT_BIN_COUNTS,
    GroupECE,
    SweepResult,
    auto_n_bins,
    debiased_l2_calibration_error,
    ece_at_bin_counts,
    ece_by_group,
    ece_sweep,
    smooth_ece,
    smooth_reliability_curve,
)
from modelval.metrics.scoring import brier_score, classwise_calibration_error, negative_log_likelihood
from modelval.metrics.temperature import softmax
from reference_packages import reference, reference_names

# Reference packages (imported on first use: a missing one skips only the parity tests that use it)
brier_score_loss, log_loss = reference_names("sklearn.metrics", "brier_score_loss", "log_loss")

calibration = reference("calibration")  # uncertainty-calibration
relplot = reference("relplot")
netcal_metrics = reference("netcal.metrics")

#: Agreement demanded of each reference (the observed differences are listed in docs/estimators.md).
KUMAR_TOL = 1e-9
RELPLOT_TOL = 1e-12
SKLEARN_TOL = 1e-12


def synthetic_top1(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Overconfident top-1 scores: correct with probability conf ** 1.3."""
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.1, 1.0, n)
    return conf, (rng.uniform(size=n) < conf**1.3).astype(np.int64)


def softmax_case(seed: int, n: int, n_classes: int = 10, scale: float = 2.5, calibrated: bool = True):
    """Softmax of random logits; labels drawn from the probabilities (calibrated) or uniformly."""
    rng = np.random.default_rng(seed)
    probs = softmax(rng.normal(size=(n, n_classes)) * scale)
    if calibrated:
        labels = (probs.cumsum(axis=1) < rng.uniform(size=(n, 1))).sum(axis=1).clip(0, n_classes - 1)
    else:
        labels = rng.integers(0, n_classes, n)
    return probs, labels


def top1(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return probs.max(axis=1), (probs.argmax(axis=1) == labels).astype(np.float64)


# --------------------------------------------------------------------------------------------------
# Kumar et al.: debiased L2 calibration error
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_bins", [1, 2, 15, 50])
@pytest.mark.parametrize("n", [20, 200, 2000])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_debiased_l2_equals_uncertainty_calibration(seed: int, n: int, n_bins: int) -> None:
    conf, correct = synthetic_top1(seed, n)
    expected = calibration.lower_bound_scaling_ce(conf, correct, p=2, debias=True, num_bins=n_bins)
    assert debiased_l2_calibration_error(conf, correct, n_bins) == pytest.approx(expected, abs=KUMAR_TOL)


@pytest.mark.parametrize("calibrated", [True, False])
@pytest.mark.parametrize("n", [100, 1000, 5000])
@pytest.mark.parametrize("seed", [0, 1])
def test_debiased_l2_equals_top_label_calibration_error_on_softmax(seed: int, n: int, calibrated: bool) -> None:
    probs, labels = softmax_case(seed, n, calibrated=calibrated)
    assert not calibration.is_discrete(probs)  # the package takes its 15 equal-mass bins route
    expected = calibration.get_top_calibration_error(probs, labels, p=2, debias=True)
    also = calibration.get_calibration_error(probs, labels, p=2, debias=True, mode="top-label")
    assert expected == also
    assert debiased_l2_calibration_error(*top1(probs, labels)) == pytest.approx(expected, abs=KUMAR_TOL)


@pytest.mark.parametrize("n_bins", [3, 10])
def test_debiased_l2_with_ties_and_squared(n_bins: int) -> None:
    conf, correct = synthetic_top1(5, 500)
    conf = np.round(conf, 1)  # heavy ties: bins merge, never split a tie
    expected = calibration.lower_bound_scaling_ce(conf, correct, p=2, debias=True, num_bins=n_bins)
    assert debiased_l2_calibration_error(conf, correct, n_bins) == pytest.approx(expected, abs=KUMAR_TOL)
    binned = calibration.bin(list(zip(conf, correct, strict=True)), calibration.get_equal_bins(conf, num_bins=n_bins))
    square = calibration.unbiased_square_ce(binned)
    assert debiased_l2_calibration_error(conf, correct, n_bins, squared=True) == pytest.approx(square, abs=KUMAR_TOL)


def test_debiased_l2_hand_computed() -> None:
    # One bin of four at 0.9 with one right: gap 0.65, variance term 0.25 * 0.75 / 3 = 0.0625.
    assert debiased_l2_calibration_error([0.9] * 4, [1, 0, 0, 0], 1) == pytest.approx(0.6, abs=1e-15)
    # Two bins {.2, .4} (acc .5, conf .3) and {.6, .8} (acc 1, conf .7):
    # 0.5 * (0.04 - 0.25) + 0.5 * (0.09 - 0) = -0.06 -> the L2 error is clipped at 0.
    conf, correct = [0.2, 0.4, 0.6, 0.8], [0, 1, 1, 1]
    assert debiased_l2_calibration_error(conf, correct, 2, squared=True) == pytest.approx(-0.06, abs=1e-15)
    assert debiased_l2_calibration_error(conf, correct, 2) == 0.0
    # Bins with a single example contribute nothing (one bin per example).
    assert debiased_l2_calibration_error(conf, correct, 4, squared=True) == 0.0


def test_debiased_l2_accepts_tensors_and_lists() -> None:
    conf, correct = synthetic_top1(3, 300)
    expected = debiased_l2_calibration_error(conf, correct)
    assert debiased_l2_calibration_error(torch.tensor(conf), torch.tensor(correct, dtype=torch.bool)) == expected
    assert debiased_l2_calibration_error(conf.tolist(), correct.tolist()) == expected


# --------------------------------------------------------------------------------------------------
# Roelofs et al.: ECE sweep
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("adaptive", [True, False])
def test_ece_sweep_monotone_data_uses_every_bin(adaptive: bool) -> None:
    # Correct exactly above 0.5: every binning has non-decreasing accuracies, so the sweep runs to N.
    conf = np.linspace(0.025, 0.975, 20)
    result = ece_sweep(conf, conf > 0.5, adaptive=adaptive)
    assert result.n_bins == 20
    assert result.ece == pytest.approx(expected_calibration_error(conf, conf > 0.5, 20, adaptive=adaptive))
    assert ece_sweep(conf, conf > 0.5, adaptive=adaptive, max_bins=7).n_bins == 7


def test_ece_sweep_hand_computed_equal_mass() -> None:
    # 2 bins {.2, .4} | {.6, .8}: accuracies .5, .5 (monotone). 3 bins {.2, .4} | {.6} | {.8}: .5, 0, 1 (not).
    result = ece_sweep([0.2, 0.4, 0.6, 0.8], [0, 1, 0, 1])
    assert result == SweepResult(ece=pytest.approx(0.2), n_bins=2, effective_bins=2, p=1.0, adaptive=True)


def test_ece_sweep_hand_computed_equal_width() -> None:
    # 3 bins {.2} | {.4, .6} | {.8}: 0, .5, 1 (monotone); 4 bins {.2} | {.4} | {.6} | {.8}: 0, 1, 0, 1 (not).
    # ECE at 3 bins: (|0 - .2| + 2 |.5 - .5| + |1 - .8|) / 4 = 0.1.
    result = ece_sweep([0.2, 0.4, 0.6, 0.8], [0, 1, 0, 1], adaptive=False)
    assert (result.n_bins, result.effective_bins) == (3, 3)
    assert result.ece == pytest.approx(0.1)
    # Falling accuracy at once: a single bin.
    assert ece_sweep([0.2, 0.8], [1, 0]).n_bins == 1


@pytest.mark.parametrize("adaptive", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_ece_sweep_consistent_with_expected_calibration_error(seed: int, adaptive: bool) -> None:
    conf, correct = synthetic_top1(seed, 1500)
    result = ece_sweep(conf, correct, adaptive=adaptive)
    assert result.ece == expected_calibration_error(conf, correct, result.n_bins, adaptive=adaptive)
    l2 = ece_sweep(conf, correct, adaptive=adaptive, p=2)
    assert l2.n_bins == result.n_bins
    assert l2.ece == pytest.approx(rms_calibration_error(conf, correct, result.n_bins, adaptive=adaptive), rel=1e-12)

    def monotone(b: int) -> bool:
        bins = reliability_bins(conf, correct, b, adaptive=adaptive)
        return bool(np.all(np.diff(bins.accuracy[bins.counts > 0]) >= 0))

    assert all(monotone(b) for b in range(1, result.n_bins + 1))
    assert not monotone(result.n_bins + 1)


# --------------------------------------------------------------------------------------------------
# Blasiok & Nakkiran: smooth ECE (relplot)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("calibrated", [True, False])
@pytest.mark.parametrize("n", [30, 300, 3000, 20000])
@pytest.mark.parametrize("seed", [0, 1])
def test_smooth_ece_equals_relplot(seed: int, n: int, calibrated: bool) -> None:
    probs, labels = softmax_case(seed, n, calibrated=calibrated)
    conf, correct = top1(probs, labels)
    assert smooth_ece(conf, correct) == pytest.approx(relplot.smECE(conf, correct), abs=RELPLOT_TOL)


@pytest.mark.parametrize("n", [50, 2000])
def test_smooth_ece_equals_relplot_on_synthetic_and_overconfident(n: int) -> None:
    conf, correct = synthetic_top1(7, n)
    assert smooth_ece(conf, correct) == pytest.approx(relplot.smECE(conf, correct.astype(float)), abs=RELPLOT_TOL)
    probs, labels = softmax_case(8, n)
    conf, correct = top1(probs, labels)
    assert smooth_ece(conf**0.8, correct) == pytest.approx(relplot.smECE(conf**0.8, correct), abs=RELPLOT_TOL)


def test_smooth_ece_at_the_smallest_bandwidth() -> None:
    # A large, perfectly calibrated sample drives the bandwidth search down to its cut-off (sigma < 0.001).
    rng = np.random.default_rng(0)
    conf = rng.uniform(0, 1, 100_000)
    correct = (rng.uniform(size=conf.size) < conf).astype(float)
    expected, width = relplot.smECE(conf, correct, return_width=True)
    curve = smooth_reliability_curve(conf, correct)
    assert width < 0.01
    assert curve.sigma == width
    assert curve.smooth_ece == pytest.approx(expected, abs=RELPLOT_TOL)


@pytest.mark.parametrize(("seed", "n"), [(0, 40), (1, 500), (2, 5000)])
def test_smooth_reliability_curve_equals_relplot_diagram(seed: int, n: int) -> None:
    probs, labels = softmax_case(seed, n)
    conf, correct = top1(probs, labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # relplot's own deprecation noise
        diagram = relplot.prepare_rel_diagram(conf, correct, plot_confidence_band=False, report_CE_std=False)
    curve = smooth_reliability_curve(conf, correct)
    np.testing.assert_array_equal(curve.x, diagram["mesh"])
    np.testing.assert_allclose(curve.accuracy, diagram["mu"], rtol=0, atol=RELPLOT_TOL)
    np.testing.assert_allclose(curve.density, diagram["density"], rtol=0, atol=RELPLOT_TOL)
    assert curve.sigma == diagram["sigma"]
    assert curve.smooth_ece == pytest.approx(diagram["ce"], abs=RELPLOT_TOL)
    # The density is a density: it integrates to about 1 over [0, 1].
    assert float(np.sum(curve.density) * (curve.x[1] - curve.x[0])) == pytest.approx(1.0, abs=0.05)


def test_smooth_ece_hand_computed_extremes() -> None:
    # Always 0.9 confident and always wrong: the smoothed residual is 0.9 wherever there is mass, so
    # smECE_sigma is about 0.9 for every sigma and the fixed point sigma* = smECE is found near 0.9.
    assert smooth_ece([0.9] * 10, [0] * 10) == pytest.approx(0.9, abs=1e-3)
    curve = smooth_reliability_curve([0.9] * 10, [0] * 10, n_points=11)
    assert curve.sigma == pytest.approx(0.9, abs=2**-10)
    assert curve.smooth_ece == pytest.approx(relplot.smECE(np.full(10, 0.9), np.zeros(10)), abs=RELPLOT_TOL)
    assert curve.x.shape == curve.accuracy.shape == curve.density.shape == (11,)
    assert np.all(np.abs(curve.accuracy) < 1e-3)


# --------------------------------------------------------------------------------------------------
# Class-wise ECE
# --------------------------------------------------------------------------------------------------


def classwise_loop(probs: np.ndarray, labels: np.ndarray, n_bins: int) -> float:
    """Brute force: for each class and each bin (lo, hi] (0 in the first), |acc - conf| weighted by mass."""
    edges = np.linspace(0, 1, n_bins + 1)
    per_class = []
    for k in range(probs.shape[1]):
        score, target = probs[:, k], (labels == k).astype(float)
        ece = 0.0
        for i in range(n_bins):
            member = (score > edges[i]) & (score <= edges[i + 1])
            if i == 0:
                member |= score == 0
            if member.any():
                ece += member.mean() * abs(target[member].mean() - score[member].mean())
        per_class.append(ece)
    return float(np.mean(per_class))


@pytest.mark.parametrize("n_bins", [5, 15])
@pytest.mark.parametrize(("seed", "n", "n_classes"), [(0, 300, 3), (1, 2000, 10), (2, 500, 25)])
def test_classwise_ece_equals_references(seed: int, n: int, n_classes: int, n_bins: int) -> None:
    probs, labels = softmax_case(seed, n, n_classes, calibrated=seed % 2 == 0)
    ours = classwise_calibration_error(probs, labels, n_bins)
    assert ours == pytest.approx(classwise_loop(probs, labels, n_bins), abs=1e-12)
    marginal = calibration.get_ece(probs, labels, num_bins=n_bins, mode="marginal")
    assert ours == pytest.approx(marginal, abs=1e-12)
    # netcal has no class-wise mode; its binary ECE of each one-vs-rest column, averaged, is the same number.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        per_class = [
            netcal_metrics.ECE(bins=n_bins).measure(probs[:, k], (labels == k).astype(np.int64))
            for k in range(n_classes)
        ]
    assert ours == pytest.approx(float(np.mean(per_class)), abs=1e-12)


def test_classwise_ece_hand_computed() -> None:
    # Class 0: scores .8 (right), .3 (right) -> bins (0, .5], (.5, 1]: .5 * .7 + .5 * .2 = .45.
    # Class 1: scores .2 (wrong), .7 (wrong) -> .5 * .2 + .5 * .7 = .45.
    assert classwise_calibration_error([[0.8, 0.2], [0.3, 0.7]], [0, 0], n_bins=2) == pytest.approx(0.45)
    # A class that never occurs still counts: its scores against all-zero targets.
    probs = [[0.9, 0.1, 0.0], [0.1, 0.9, 0.0]]
    assert classwise_calibration_error(probs, [0, 1], n_bins=10) == pytest.approx((0.1 + 0.1 + 0.0) / 3)


# --------------------------------------------------------------------------------------------------
# Brier score and NLL against scikit-learn
# --------------------------------------------------------------------------------------------------


def prob_case(seed: int, n_classes: int, n: int = 300) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, n_classes)) * 4
    probs = softmax(logits)
    labels = rng.integers(0, n_classes, n)
    probs[0] = 0.0  # a confidently wrong row: probability 0 on its true class
    probs[0, (labels[0] + 1) % n_classes] = 1.0
    probs[1] = 0.0  # a perfectly right row
    probs[1, labels[1]] = 1.0
    return probs, labels, logits


@pytest.mark.parametrize("n_classes", [2, 3, 10, 100])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_brier_and_nll_equal_sklearn(seed: int, n_classes: int) -> None:
    probs, labels, _ = prob_case(seed, n_classes)
    classes = np.arange(n_classes)
    nll = log_loss(labels, probs, labels=classes)
    assert negative_log_likelihood(probs, labels) == pytest.approx(nll, abs=SKLEARN_TOL)
    brier = brier_score(probs, labels)
    assert brier == pytest.approx(brier_score_loss(labels, probs, labels=classes, scale_by_half=False), abs=SKLEARN_TOL)
    default = brier_score_loss(labels, probs, labels=classes)  # scale_by_half="auto": halved for 2 classes only
    assert brier == pytest.approx(default * (2 if n_classes == 2 else 1), abs=SKLEARN_TOL)


def test_nll_clips_like_sklearn() -> None:
    eps = np.finfo(np.float64).eps
    assert negative_log_likelihood([[0.0, 1.0]], [0]) == pytest.approx(-math.log(eps), rel=1e-15)
    assert negative_log_likelihood([[0.0, 1.0]], [0]) == pytest.approx(log_loss([0], [[0.0, 1.0]], labels=[0, 1]))
    assert negative_log_likelihood([[0.5, 0.5]], [1]) == pytest.approx(math.log(2), rel=1e-15)
    # float32 probabilities: scikit-learn clips at float32's eps (and computes in float32).
    p32 = np.array([[0.0, 1.0], [0.25, 0.75]], dtype=np.float32)
    expected = log_loss([0, 1], p32, labels=[0, 1])
    assert negative_log_likelihood(p32, [0, 1]) == pytest.approx(expected, rel=1e-6)
    assert negative_log_likelihood(torch.tensor(p32), torch.tensor([0, 1])) == negative_log_likelihood(p32, [0, 1])


def test_brier_hand_computed() -> None:
    assert brier_score([[1.0, 0.0, 0.0]], [0]) == 0.0
    assert brier_score([[0.0, 1.0, 0.0]], [0]) == 2.0
    assert brier_score([[0.5, 0.25, 0.25]], [0]) == pytest.approx(0.25 + 0.0625 * 2)


@pytest.mark.parametrize("n_classes", [2, 10, 1000])
@pytest.mark.parametrize("seed", [0, 1])
def test_logits_path_equals_probability_path(seed: int, n_classes: int) -> None:
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(200, n_classes)) * 3
    labels = rng.integers(0, n_classes, 200)
    probs = softmax(logits)
    nll = negative_log_likelihood(logits, labels, logits=True)
    assert nll == pytest.approx(negative_log_likelihood(probs, labels), rel=1e-12)
    expected = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(labels)).item()
    assert nll == pytest.approx(expected, rel=1e-12)
    assert brier_score(logits, labels, logits=True) == pytest.approx(brier_score(probs, labels), abs=1e-12)
    assert brier_score(torch.tensor(logits), torch.tensor(labels), logits=True) == brier_score(
        logits, labels, logits=True
    )


def test_nll_from_logits_is_not_clipped() -> None:
    # log p_y = -100 - log(1 + e^-100): far below the probability path's floor -log(eps) = 36.04.
    assert negative_log_likelihood([[0.0, 100.0]], [0], logits=True) == pytest.approx(100.0, rel=1e-12)


# --------------------------------------------------------------------------------------------------
# Bin counts, ECE at several bin counts, per group
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "k"), [(1, 1), (2, 2), (8, 2), (9, 3), (27, 3), (28, 4), (1000, 10), (1001, 11), (10**15, 10**5)]
)
def test_auto_n_bins(n: int, k: int) -> None:
    assert auto_n_bins(n) == k


def test_auto_n_bins_is_the_ceiling_of_the_cube_root() -> None:
    for n in range(1, 5000):
        k = auto_n_bins(n)
        assert k**3 >= n > (k - 1) ** 3


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10"])
def test_auto_n_bins_rejects(bad: object) -> None:
    with pytest.raises(InputValidationError, match="positive integer"):
        auto_n_bins(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("adaptive", [False, True])
def test_ece_at_bin_counts(adaptive: bool) -> None:
    conf, correct = synthetic_top1(2, 800)
    result = ece_at_bin_counts(conf, correct, adaptive=adaptive)
    assert list(result) == list(DEFAULT_BIN_COUNTS)
    for n_bins, ece in result.items():
        assert ece == expected_calibration_error(conf, correct, n_bins, adaptive=adaptive)
    assert list(ece_at_bin_counts(conf, correct, [10, 3, 10])) == [10, 3]


def test_ece_by_group() -> None:
    conf = np.array([0.9, 0.8, 0.6, 0.7, 0.95, 0.55])
    correct = np.array([1, 0, 1, 1, 1, 0])
    labels = np.array([0, 0, 1, 2, 2, 3])
    groups = {"many": [0, 1], "medium": np.array([2]), "few": [4, 5], "none": []}
    result = ece_by_group(conf, correct, labels, groups, n_bins=10)
    assert result["many"] == GroupECE("many", expected_calibration_error(conf[:3], correct[:3], 10), 3, 2)
    # Bins (.6, .7] and (.9, 1]: |1 - .7| / 2 + |1 - .95| / 2.
    assert result["medium"].ece == pytest.approx(0.175)
    assert result["medium"].n_examples == 2
    assert result["few"].ece is None and result["few"].n_examples == 0 and result["few"].n_classes == 2
    assert "no example" in (result["few"].reason or "")
    assert result["none"].ece is None and "no classes" in (result["none"].reason or "")
    assert all(g.ece is None or math.isfinite(g.ece) for g in result.values())


# --------------------------------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------------------------------

TOP1_FUNCTIONS = [
    debiased_l2_calibration_error,
    ece_sweep,
    smooth_ece,
    smooth_reliability_curve,
    ece_at_bin_counts,
]


@pytest.mark.parametrize("func", TOP1_FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    ("conf", "correct", "message"),
    [
        ([0.5, float("nan")], [1, 0], "NaN"),
        ([0.5, 1.2], [1, 0], r"\[0, 1\]"),
        ([-0.1, 0.5], [1, 0], r"\[0, 1\]"),
        ([0.5, 0.6], [1, 0, 1], "same length"),
        ([[0.5, 0.6]], [[1, 0]], "1-D"),
        ([], [], "no examples"),
        ([0.5, 0.6], [2, 0], "0/1"),
    ],
)
def test_top1_validation(func, conf, correct, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputValidationError, match=message):
        func(conf, correct)


def test_bin_arguments_are_validated() -> None:
    conf, correct = synthetic_top1(0, 50)
    with pytest.raises(InputValidationError, match="n_bins"):
        debiased_l2_calibration_error(conf, correct, 0)
    with pytest.raises(InputValidationError, match="n_bins"):
        ece_at_bin_counts(conf, correct, [10, 0])
    with pytest.raises(InputValidationError, match="bin_counts is empty"):
        ece_at_bin_counts(conf, correct, [])
    with pytest.raises(InputValidationError, match="max_bins"):
        ece_sweep(conf, correct, max_bins=0)
    with pytest.raises(InputValidationError, match="p must be"):
        ece_sweep(conf, correct, p=0.5)
    with pytest.raises(InputValidationError, match="n_points"):
        smooth_reliability_curve(conf, correct, n_points=1)


PROB_FUNCTIONS = [classwise_calibration_error, brier_score, negative_log_likelihood]


@pytest.mark.parametrize("func", PROB_FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    ("probs", "labels", "message"),
    [
        ([[0.5, 0.5], [0.6, 0.6]], [0, 1], "sum to 1"),
        ([[0.5, 0.5], [float("nan"), 0.5]], [0, 1], "NaN"),
        ([[1.5, -0.5], [0.5, 0.5]], [0, 1], r"\[0, 1\]"),
        ([0.5, 0.5], [0, 1], r"\(N, C\)"),
        ([[0.5, 0.5]], [0, 1], "shape"),
        ([[0.5, 0.5]], [2], "< 2"),
        ([[0.5, 0.5]], [-1], ">= 0"),
        ([[0.5, 0.5]], [0.5], "integer"),
        ([[0.5, 0.5]], [True], "integer"),
        (np.zeros((0, 3)), [], "no examples"),
    ],
)
def test_probability_validation(func, probs, labels, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputValidationError, match=message):
        func(probs, labels)


@pytest.mark.parametrize("func", [brier_score, negative_log_likelihood], ids=lambda f: f.__name__)
def test_logit_validation(func) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputValidationError, match="NaN or infinite"):
        func([[0.0, float("inf")]], [0], logits=True)
    with pytest.raises(InputValidationError, match="C >= 2"):
        func([[0.0]], [0], logits=True)
    with pytest.raises(InputValidationError, match="< 2"):
        func([[0.0, 1.0]], [5], logits=True)
    assert func([[0.0, 1.0]], [1.0], logits=True) == func([[0.0, 1.0]], [1], logits=True)  # integral floats


def test_group_validation() -> None:
    conf, correct = [0.5, 0.6], [1, 0]
    with pytest.raises(InputValidationError, match="mapping"):
        ece_by_group(conf, correct, [0, 1], [[0, 1]])  # type: ignore[arg-type]
    with pytest.raises(InputValidationError, match="groups is empty"):
        ece_by_group(conf, correct, [0, 1], {})
    with pytest.raises(InputValidationError, match="integer class ids"):
        ece_by_group(conf, correct, [0, 1], {"few": [0.5]})
    with pytest.raises(InputValidationError, match="shape"):
        ece_by_group(conf, correct, [0, 1, 2], {"few": [0]})


def test_classwise_ece_of_many_classes_is_fast_and_exact() -> None:
    """One Python step per class took ~47 minutes for a 20-million-class file; all classes now go at once."""
    import time

    from modelval.metrics.calibration import expected_calibration_error

    rng = np.random.default_rng(5)
    probs = rng.dirichlet(np.full(2_000_000, 0.01), size=3)  # 3 examples x 2 million classes (48 MB)
    labels = np.array([int(np.argmax(probs[0])), 7, 7])
    start = time.perf_counter()
    fast = classwise_calibration_error(probs, labels, n_bins=15)
    assert time.perf_counter() - start < 10  # the per-class loop: about 70 s for these 2 million classes
    # Independently: a class that never occurs has all-zero targets, so its ECE is the mean of its scores
    # (every bin's |0 - sum of scores| adds up to the column sum); the two that occur, by the top-1 ECE.
    occurring = sorted(set(labels.tolist()))
    never = np.ones(probs.shape[1], dtype=bool)
    never[occurring] = False
    expected = probs[:, never].mean(axis=0).sum()
    expected += sum(expected_calibration_error(probs[:, k], labels == k, 15) for k in occurring)
    assert fast == pytest.approx(expected / probs.shape[1], rel=1e-12)
