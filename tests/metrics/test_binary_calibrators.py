"""Calibrators for one logit (Platt, temperature, histogram binning, isotonic) and per label, against
scikit-learn (``CalibratedClassifierCV``, ``LogisticRegression``, ``IsotonicRegression``) and netcal
(``LogisticCalibration``, ``TemperatureScaling``, ``HistogramBinning``), with hand-computed optima.

Parity tests are named ``test_parity_*``. The optimisers differ (Newton here, L-BFGS-B in scikit-learn,
L-BFGS-B with finite-difference gradients in netcal), so the fitted parameters agree to the references'
stopping tolerances, not to rounding; the tests also check that our optimum is at least as good as
theirs on their own objective, so a loose reference cannot hide a wrong fit here.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import warnings

import numpy as np
import pytest

from modelval.errors import InputValidationError
from modelval.metrics.binary import binary_calibration_error, logit, sigmoid
from modelval.metrics.binary_calibrators import (
    BinaryCalibrator,
    BinaryTemperatureScaling,
    MultilabelCalibrator,
    PlattScaling,
    fit_binary_temperature,
    fit_platt,
)
from modelval.metrics.calibrators import HistogramBinningCalibrator
from modelval.metrics.temperature import ScalingFitWarning
from reference_packages import reference, reference_names

# Reference packages (imported on first use: a missing one skips only the parity tests that use it)
BaseEstimator, ClassifierMixin = reference_names("sklearn.base", "BaseEstimator", "ClassifierMixin")
(CalibratedClassifierCV,) = reference_names("sklearn.calibration", "CalibratedClassifierCV")
(FrozenEstimator,) = reference_names("sklearn.frozen", "FrozenEstimator")
(IsotonicRegression,) = reference_names("sklearn.isotonic", "IsotonicRegression")
(LogisticRegression,) = reference_names("sklearn.linear_model", "LogisticRegression")

netcal_scaling = reference("netcal.scaling")
netcal_binning = reference("netcal.binning")

#: Calibrated probabilities vs scikit-learn (L-BFGS-B, gtol 1e-6 / xatol 64 eps): measured <= 3.9e-8.
SKLEARN_PROB_TOL = 1e-7
#: vs netcal (scipy minimize with finite-difference gradients, default tolerances): measured <= 9.1e-5
#: (real one-vs-rest scores; 1.3e-5 on random logits). Our fit is also checked to be the better optimum.
NETCAL_PROB_TOL = 2e-4


@contextlib.contextmanager
def quiet():
    """netcal prints progress and warnings to stdout."""
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@functools.cache
def _passthrough_classes() -> tuple[type, type]:
    """The two stand-in classifiers, defined on first use: they subclass scikit-learn's estimators."""

    class LogitPassthrough(ClassifierMixin.resolve(), BaseEstimator.resolve()):  # type: ignore[misc]
        """A fitted binary classifier whose decision_function is the logit column itself."""

        def fit(self, X, y):
            self.classes_ = np.array([0, 1])
            return self

        def decision_function(self, X):
            return np.asarray(X, dtype=np.float64)[:, 0]

        def predict(self, X):
            return (self.decision_function(X) > 0).astype(np.int64)

    class ProbaPassthrough(LogitPassthrough):
        """As LogitPassthrough, but exposing probabilities only (predict_proba = [1 - p, p])."""

        decision_function = None  # type: ignore[assignment]

        def predict_proba(self, X):
            p = np.asarray(X, dtype=np.float64)[:, 0]
            return np.stack([1 - p, p], axis=1)

        def predict(self, X):
            return (np.asarray(X)[:, 0] > 0.5).astype(np.int64)

    return LogitPassthrough, ProbaPassthrough


def logit_passthrough():
    """A classifier for CalibratedClassifierCV whose decision_function is the logit column itself."""
    return _passthrough_classes()[0]()


def proba_passthrough():
    """A classifier for CalibratedClassifierCV exposing the probability column as predict_proba."""
    return _passthrough_classes()[1]()


def logit_case(n: int, seed: int, slope: float = 0.6, shift: float = -0.3) -> tuple[np.ndarray, np.ndarray]:
    """Logits z ~ N(0.5, 3^2) with P(y = 1 | z) = sigmoid(slope z + shift): over-confident by 1 / slope."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n) * 3 + 0.5
    return z, (rng.uniform(size=n) < sigmoid(slope * z + shift)).astype(np.int64)


def mean_bce(q: np.ndarray, t: np.ndarray) -> float:
    q = np.clip(q, 1e-300, 1 - 1e-16)
    return float(-np.mean(t * np.log(q) + (1 - t) * np.log1p(-q)))


def platt_targets(y: np.ndarray) -> np.ndarray:
    n_pos, n_neg = y.sum(), y.size - y.sum()
    return np.where(y == 1, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))


PROBE = np.linspace(-12, 12, 97)


# --------------------------------------------------------------------------------------------------
# Platt scaling


@pytest.mark.parametrize(("n", "seed"), [(30, 0), (500, 1), (5000, 2)])
def test_parity_platt_equals_calibrated_classifier_cv_sigmoid(n, seed):
    z, y = logit_case(n, seed)
    ours = PlattScaling().fit(z, y)
    reference = CalibratedClassifierCV(FrozenEstimator(logit_passthrough().fit(z[:, None], y)), method="sigmoid")
    reference.fit(z[:, None], y)
    theirs = reference.predict_proba(PROBE[:, None])[:, 1]
    np.testing.assert_allclose(ours.transform(PROBE), theirs, rtol=0, atol=SKLEARN_PROB_TOL)
    sigmoid_fit = reference.calibrated_classifiers_[0].calibrators[0]  # P = 1 / (1 + exp(A z + B))
    assert (ours.a_, ours.b_) == pytest.approx((-sigmoid_fit.a_, -sigmoid_fit.b_), abs=1e-6)  # measured 1.1e-7
    # Ours is the optimum of scikit-learn's own objective (Platt's targets) to rounding.
    t = platt_targets(y)
    theirs_fit = sigmoid(-(sigmoid_fit.a_ * z + sigmoid_fit.b_))
    assert mean_bce(ours.transform(z), t) <= mean_bce(theirs_fit, t) + 1e-15


@pytest.mark.parametrize(("n", "seed"), [(30, 3), (500, 4), (5000, 5)])
def test_parity_platt_hard_targets_equals_unpenalised_logistic_regression_and_netcal(n, seed):
    z, y = logit_case(n, seed)
    ours = PlattScaling(targets="hard").fit(z, y)
    lr = LogisticRegression(C=np.inf, tol=1e-14, max_iter=10_000).fit(z[:, None], y)
    np.testing.assert_allclose(ours.transform(PROBE), lr.predict_proba(PROBE[:, None])[:, 1], rtol=0, atol=1e-8)
    # netcal's LogisticCalibration takes probabilities and fits on their logits (clipped at eps).
    p = sigmoid(z)
    with quiet():
        netcal = netcal_scaling.LogisticCalibration(method="mle")
        netcal.fit(p, y)
        theirs = netcal.transform(sigmoid(PROBE))
    ours_p = PlattScaling(targets="hard").fit_probs(p, y)
    np.testing.assert_allclose(ours_p.transform_probs(sigmoid(PROBE)), theirs, rtol=0, atol=NETCAL_PROB_TOL)
    with quiet():
        theirs_fit = netcal.transform(p)
    assert mean_bce(ours_p.transform_probs(p), y) <= mean_bce(theirs_fit, y) + 1e-15


def test_platt_hand_computed_optima():
    # z in {-1, +1}: 1 of 4 positive at -1, 3 of 4 at +1. Hard targets: sigmoid(-a + b) = 1/4 and
    # sigmoid(a + b) = 3/4, so a = ln 3, b = 0. Platt's targets are 5/6 and 1/6 (N+ = N- = 4): the
    # mean targets are 1/3 and 2/3, so a = ln 2, b = 0.
    z = np.array([-1.0] * 4 + [1.0] * 4)
    y = np.array([1, 0, 0, 0, 1, 1, 1, 0])
    a, b, converged = fit_platt(z, y, targets="hard")
    assert converged and a == pytest.approx(math.log(3), abs=1e-12) and b == pytest.approx(0.0, abs=1e-12)
    a, b, converged = fit_platt(z, y)
    assert converged and a == pytest.approx(math.log(2), abs=1e-12) and b == pytest.approx(0.0, abs=1e-12)
    # An affine change of the logit changes (a, b) but not the calibrated probabilities.
    moved = PlattScaling().fit(3 * z + 1, y)
    np.testing.assert_allclose(moved.transform(3 * PROBE + 1), PlattScaling().fit(z, y).transform(PROBE), atol=1e-12)


def test_platt_converges_without_warning_on_ordinary_data():
    # Near the optimum the mean loss changes by less than its rounding; a line search alone then stalls
    # (an earlier version failed to converge on 12 of these 240 fits). Every fit must converge, to a zero gradient.
    for seed in range(20):
        rng = np.random.default_rng(seed)
        for n in (30, 500, 5000):
            z = rng.normal(size=n) * 3 + 0.5
            y = (rng.uniform(size=n) < sigmoid(0.6 * z - 0.3)).astype(np.int64)
            for scores in (z, logit(sigmoid(z))):
                for targets in ("platt", "hard"):
                    with warnings.catch_warnings():
                        warnings.simplefilter("error", ScalingFitWarning)
                        a, b, converged = fit_platt(scores, y, targets=targets)
                    t = platt_targets(y) if targets == "platt" else y
                    residual = sigmoid(a * scores + b) - t
                    assert converged and abs(np.mean(residual)) < 1e-12 and abs(np.mean(residual * scores)) < 1e-12


def test_platt_on_constant_scores():
    # One score for everyone: the slope does nothing, so a = 0 and sigmoid(b) is the mean target.
    y = np.array([1, 1, 1, 0, 0, 0, 0, 0, 0, 0])
    assert fit_platt(np.full(10, 2.0), y, targets="hard") == pytest.approx((0.0, math.log(3 / 7), True))
    a, b, _ = fit_platt(np.full(10, 2.0), y)
    assert a == 0.0 and sigmoid(np.array([b]))[0] == pytest.approx((3 * 4 / 5 + 7 / 9) / 10, abs=1e-15)


def test_platt_on_separable_data():
    z = np.array([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0])
    y = np.array([0, 0, 0, 1, 1, 1])
    with pytest.raises(InputValidationError, match=r"separates the positives from the negatives.*targets=.platt."):
        fit_platt(z, y, targets="hard")
    a, b, converged = fit_platt(z, y)  # Platt's targets (4/5, 1/5) keep the optimum finite
    assert converged and 0 < a < 10 and abs(b) < 1e-9
    with pytest.raises(InputValidationError, match=r"only one\s+class"):
        fit_platt(z, np.ones(6), targets="hard")


def test_parity_platt_on_real_one_vs_rest_logits(recorded_evaluations):
    # EfficientNet-Lite0's renormalised 16-class probabilities, one-vs-rest "the shape is class k",
    # as logits; fitted on half of the stimuli and applied to the other half.
    from modelval.behaviour.categories import CATEGORIES

    evaluation = recorded_evaluations()
    scores = evaluation.category_probabilities.astype(np.float64)
    probs = scores / scores.sum(axis=1, keepdims=True)
    shapes = np.array([CATEGORIES.index(s.shape) for s in evaluation.stimuli])
    for k in range(0, 16, 3):
        order = np.random.default_rng(k).permutation(len(shapes))
        fit, apply = order[:640], order[640:]
        z, y = logit(probs[:, k]), (shapes == k).astype(np.int64)
        ours = PlattScaling().fit(z[fit], y[fit])
        reference = CalibratedClassifierCV(FrozenEstimator(logit_passthrough().fit(z[fit, None], y[fit])))
        reference.fit(z[fit, None], y[fit])
        theirs = reference.predict_proba(z[apply, None])[:, 1]
        np.testing.assert_allclose(ours.transform(z[apply]), theirs, rtol=0, atol=SKLEARN_PROB_TOL)
        hard = PlattScaling(targets="hard").fit_probs(probs[fit, k], y[fit])
        with quiet():
            netcal = netcal_scaling.LogisticCalibration(method="mle")
            netcal.fit(probs[fit, k], y[fit])
            np.testing.assert_allclose(
                hard.transform_probs(probs[apply, k]), netcal.transform(probs[apply, k]), rtol=0, atol=NETCAL_PROB_TOL
            )
            assert (
                mean_bce(hard.transform_probs(probs[fit, k]), y[fit])
                <= mean_bce(netcal.transform(probs[fit, k]), y[fit]) + 1e-15
            )


# --------------------------------------------------------------------------------------------------
# Temperature scaling of one logit


@pytest.mark.parametrize(("n", "seed"), [(30, 6), (500, 7), (5000, 8)])
def test_parity_binary_temperature_equals_sklearn_and_netcal(n, seed):
    z, y = logit_case(n, seed, shift=0.0)
    ours = BinaryTemperatureScaling().fit(z, y)
    reference = CalibratedClassifierCV(FrozenEstimator(logit_passthrough().fit(z[:, None], y)), method="temperature")
    reference.fit(z[:, None], y)
    np.testing.assert_allclose(
        ours.transform(PROBE), reference.predict_proba(PROBE[:, None])[:, 1], atol=SKLEARN_PROB_TOL
    )
    # scikit-learn turns a decision value z into the logits [-z, z], i.e. sigmoid(2 beta z): beta = 1 / (2 T).
    beta = float(reference.calibrated_classifiers_[0].calibrators[0].beta_)
    assert 1 / (2 * beta) == pytest.approx(ours.temperature_, rel=1e-6)
    p = sigmoid(z)
    with quiet():
        netcal = netcal_scaling.TemperatureScaling(method="mle")
        netcal.fit(p, y)
        theirs = netcal.transform(sigmoid(PROBE))
    ours_p = BinaryTemperatureScaling().fit_probs(p, y)
    np.testing.assert_allclose(ours_p.transform_probs(sigmoid(PROBE)), theirs, rtol=0, atol=NETCAL_PROB_TOL)
    assert 1 / float(netcal.weights[0]) == pytest.approx(ours_p.temperature_, rel=1e-4)


def test_binary_temperature_hand_computed():
    # 3 of 4 positive at z = +1, 1 of 4 at z = -1: sigmoid(1 / T) = 3/4, T = 1 / ln 3.
    z = np.array([-1.0] * 4 + [1.0] * 4)
    y = np.array([1, 0, 0, 0, 1, 1, 1, 0])
    assert fit_binary_temperature(z, y) == pytest.approx(1 / math.log(3), rel=1e-9)
    with pytest.warns(ScalingFitWarning, match="lower search bound"):
        fit_binary_temperature(np.array([-2.0, -1.0, 1.0, 2.0]), np.array([0, 0, 1, 1]))


# --------------------------------------------------------------------------------------------------
# Histogram binning and isotonic regression on binary scores


@pytest.mark.parametrize("n_bins", [5, 15])
@pytest.mark.parametrize("seed", [0, 1])
def test_parity_binary_histogram_binning_equals_netcal(seed, n_bins):
    z, y = logit_case(2000, seed)
    p = sigmoid(z)
    ours = BinaryCalibrator("histogram", n_bins=n_bins).fit(p, y)
    with quiet():
        netcal = netcal_binning.HistogramBinning(bins=n_bins)
        netcal.fit(p, y)  # 1-D input: netcal's binary route
        probe = np.random.default_rng(seed).uniform(size=300)
        theirs = netcal.transform(probe)
    np.testing.assert_array_equal(ours.predict_proba(probe), theirs)
    # The logit route is the same after the sigmoid.
    np.testing.assert_array_equal(
        BinaryCalibrator("histogram", n_bins=n_bins).fit(z, y, logits=True).predict_proba(logit(probe), logits=True),
        theirs,
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_parity_binary_isotonic_equals_calibrated_classifier_cv(seed):
    z, y = logit_case(1500, seed)
    p = sigmoid(z)
    reference = CalibratedClassifierCV(FrozenEstimator(proba_passthrough().fit(p[:, None], y)), method="isotonic")
    reference.fit(p[:, None], y)
    probe = np.concatenate([np.random.default_rng(seed).uniform(size=300), [0.0, 1.0]])
    ours = BinaryCalibrator("isotonic").fit(p, y).predict_proba(probe)
    np.testing.assert_allclose(ours, reference.predict_proba(probe[:, None])[:, 1], rtol=0, atol=1e-12)
    iso = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(p, y)
    np.testing.assert_allclose(ours, iso.predict(probe), rtol=0, atol=1e-12)


def test_binary_calibrator_dispatch_and_effect():
    # Fit on one half, evaluate the positive-class ECE on the other: every method helps a lot.
    z, y = logit_case(20_000, 11, slope=0.4, shift=0.0)
    before = binary_calibration_error(z[10_000:], y[10_000:], 15, logits=True)
    assert before > 0.1
    for method in ("platt", "temperature", "histogram", "isotonic"):
        cal = BinaryCalibrator(method, n_bins=15).fit(z[:10_000], y[:10_000], logits=True)
        after = binary_calibration_error(cal.predict_proba(z[10_000:], logits=True), y[10_000:], 15)
        assert after < 0.03 and after < 0.2 * before, (method, after)
    assert isinstance(BinaryCalibrator("histogram").fit(sigmoid(z), y).calibrator_, HistogramBinningCalibrator)


# --------------------------------------------------------------------------------------------------
# Multilabel: one calibrator per label


def test_parity_multilabel_calibrator_is_per_label_sklearn_platt():
    rng = np.random.default_rng(12)
    z = rng.normal(size=(800, 3)) * np.array([1.0, 3.0, 6.0])
    y = (rng.uniform(size=z.shape) < sigmoid(0.5 * z + np.array([0.0, -1.0, 1.0]))).astype(np.int64)
    cal = MultilabelCalibrator("platt").fit(z, y, logits=True)
    probe = rng.normal(size=(50, 3)) * 4
    got = cal.predict_proba(probe, logits=True)
    assert got.shape == (50, 3)
    for k in range(3):
        reference = CalibratedClassifierCV(FrozenEstimator(logit_passthrough().fit(z[:, k : k + 1], y[:, k])))
        reference.fit(z[:, k : k + 1], y[:, k])
        expected = reference.predict_proba(probe[:, k : k + 1])[:, 1]
        np.testing.assert_allclose(got[:, k], expected, rtol=0, atol=SKLEARN_PROB_TOL)
    # probabilities in, probabilities out: the same fit
    np.testing.assert_allclose(
        MultilabelCalibrator("platt").fit(sigmoid(z), y).predict_proba(sigmoid(probe)), got, rtol=0, atol=1e-9
    )


def test_multilabel_calibrator_validation():
    with pytest.raises(InputValidationError, match="not fitted"):
        MultilabelCalibrator().predict_proba(np.zeros((2, 2)))
    with pytest.raises(InputValidationError, match="method must be one of"):
        MultilabelCalibrator("beta")  # type: ignore[arg-type]
    z = np.array([[-1.0, 0.2], [1.0, 0.1], [2.0, 0.3]])
    with pytest.raises(InputValidationError, match="label 0: targets='hard'"):
        MultilabelCalibrator("platt", targets="hard").fit(z, np.array([[0, 1], [1, 0], [1, 1]]), logits=True)
    cal = MultilabelCalibrator("platt").fit(z, np.array([[0, 1], [1, 0], [1, 1]]), logits=True)
    with pytest.raises(InputValidationError, match=r"scores must be \(M, 2\)"):
        cal.predict_proba(np.zeros((2, 3)), logits=True)
    assert cal.predict_proba(np.zeros((0, 2)), logits=True).shape == (0, 2)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: PlattScaling().transform([0.0]), "not fitted"),
        (lambda: BinaryTemperatureScaling().transform([0.0]), "not fitted"),
        (lambda: BinaryCalibrator("isotonic").predict_proba([0.2]), "not fitted"),
        (lambda: PlattScaling(targets="soft"), "targets must be one of"),  # type: ignore[arg-type]
        (lambda: PlattScaling().fit([0.0, np.nan], [0, 1]), "NaN or infinite"),
        (lambda: PlattScaling().fit_probs([0.2, 1.2], [0, 1]), r"\[0, 1\]"),
        (lambda: BinaryCalibrator("platt").fit([0.2, 0.4], [0, 3]), "0/1"),
    ],
)
def test_calibrator_errors(call, message):
    with pytest.raises(InputValidationError, match=message):
        call()
