"""Calibrators for one score per example (binary), and the same per label (multilabel).

Fitted on held-out ``(score_i, y_i)`` with ``y_i`` 0/1, they map a new score to a calibrated positive-class
probability. :class:`PlattScaling` fits ``sigmoid(a z + b)`` by Newton's method (Lin, Lin & Weng 2007) on Platt's
smoothed targets (scikit-learn's ``CalibratedClassifierCV(method="sigmoid")``) or on the labels
(``targets="hard"``: plain logistic regression, refused on separable data); :class:`BinaryTemperatureScaling` is
:func:`~modelval.metrics.temperature.fit_temperature` on ``[0, z]``; histogram binning and isotonic regression are
the classes of :mod:`modelval.metrics.calibrators` on ``(p, y)``. :class:`BinaryCalibrator` picks one by name and
converts between probabilities and logits (``logit(clip(p, eps, 1 - eps))``, netcal's rule);
:class:`MultilabelCalibrator` fits one per label column. The references matched are in ``docs/calibrators.md``.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Literal, cast

import numpy as np

from modelval.errors import InputValidationError
from modelval.metrics.binary import logit
from modelval.metrics.calibrators import HistogramBinningCalibrator, IsotonicCalibrator, _Calibrator, _Fit
from modelval.metrics.temperature import ScalingFitWarning, _fit_temperature_for_caller
from modelval.metrics.validation import (
    as_array,
    binary_logits,
    binary_probabilities,
    check_choice,
    sigmoid,
    validate_binary,
    validate_binary_logits,
    validate_multilabel,
)

Targets = Literal["platt", "hard"]
TARGETS: tuple[str, ...] = ("platt", "hard")
Method = Literal["platt", "temperature", "histogram", "isotonic"]
METHODS: tuple[str, ...] = ("platt", "temperature", "histogram", "isotonic")

#: Newton iterations before a Platt fit gives up (it converges in well under 20 on real data).
PLATT_MAX_ITER = 100
#: Added to the Hessian's diagonal, as in Lin, Lin & Weng (2007), so a constant ``z`` does not make it singular.
_RIDGE = 1e-12
#: Below this Newton decrement (twice the predicted loss decrease) full Newton steps are taken without a line search.
_PURE_NEWTON = 1e-10


def _softplus(s: np.ndarray) -> np.ndarray:
    """``log(1 + exp(s))`` without overflow."""
    return np.maximum(s, 0.0) + np.log1p(np.exp(-np.abs(s)))


def _platt_targets(y: np.ndarray, targets: str) -> np.ndarray:
    if targets == "hard":
        return y.astype(np.float64)
    n_pos = float(y.sum())
    n_neg = float(y.size - n_pos)
    return np.where(y, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))


def _separated(z: np.ndarray, y: np.ndarray) -> bool:
    """True when a threshold on ``z`` puts the classes apart (ties on it allowed): no finite MLE."""
    if y.all() or not y.any():
        return True
    pos, neg = z[y], z[~y]
    return bool(pos.min() >= neg.max() or pos.max() <= neg.min())


def fit_platt(
    logits: Any, labels: Any, *, targets: Targets = "platt", max_iter: int = PLATT_MAX_ITER, tol: float = 1e-12
) -> tuple[float, float, bool]:
    """``(a, b, converged)`` of Platt scaling ``sigmoid(a z + b)`` (see the module docstring).

    ``converged`` is False (with a :class:`~modelval.metrics.temperature.ScalingFitWarning`) when
    ``max_iter`` Newton steps did not bring the gradient below ``tol``. ``targets="hard"`` on data
    that a threshold on ``z`` separates (or with one class only) raises
    :class:`~modelval.errors.InputValidationError`: the likelihood then keeps growing as ``a`` grows.

    Parameters
    ----------
    logits, labels
        One logit and one 0/1 label per example.
    targets
        ``"platt"`` (Platt's smoothed targets) or ``"hard"`` (the labels).
    max_iter, tol
        Newton steps at most, and the largest gradient entry at which the fit has converged.
    """
    check_choice(targets, "targets", TARGETS)
    z, y = validate_binary_logits(logits, labels)
    constant = bool(np.all(z == z[0]))
    if targets == "hard" and (_separated(z, y) if not constant else (y.all() or not y.any())):
        raise InputValidationError(
            "targets='hard': a threshold on the logits separates the positives from the negatives (or only one "
            "class is present), so the unregularised logistic fit has no finite optimum; use targets='platt' "
            "(Platt's smoothed targets) or a larger validation set"
        )
    t = _platt_targets(y, targets)
    if constant:
        # Every example has the same score, so the slope has no effect on the loss: a = 0 and b = logit(mean t).
        mean_t = float(t.mean())
        return 0.0, math.log(mean_t) - math.log1p(-mean_t), True
    n_pos = float(y.sum())
    a, b = 0.0, math.log((n_pos + 1.0) / (y.size - n_pos + 1.0))

    def loss(a_: float, b_: float) -> float:
        s = a_ * z + b_
        return float(np.mean(_softplus(s) - t * s))

    current = loss(a, b)
    converged = False
    for _ in range(max_iter):
        q = sigmoid(a * z + b)
        r = q - t
        grad = np.array([np.mean(r * z), np.mean(r)])
        if np.max(np.abs(grad)) <= tol:
            converged = True
            break
        w = q * (1.0 - q)
        wz = w * z
        hess = np.array([[np.mean(wz * z), np.mean(wz)], [np.mean(wz), np.mean(w)]]) + _RIDGE * np.eye(2)
        step = -np.linalg.solve(hess, grad)
        if np.max(np.abs(step)) <= 1e-15 * (1.0 + abs(a) + abs(b)):
            converged = True  # the step no longer changes the parameters: the gradient is rounding noise
            break
        decrement = float(-grad @ step)  # about twice the distance to the optimal loss
        if decrement < _PURE_NEWTON:
            # Inside Newton's quadratic-convergence region the loss cannot rank the steps any more (it changes
            # by less than its rounding): take the full step and let the gradient decide when to stop.
            a, b = a + step[0], b + step[1]
            current = loss(a, b)
            continue
        size = 1.0
        while True:
            trial = loss(a + size * step[0], b + size * step[1])
            if trial <= current - 1e-4 * size * decrement:
                break
            size /= 2.0
            if size < 1e-10:
                break
        if size < 1e-10:
            break  # no descent along the Newton direction far from the optimum: reported as not converged
        a, b = a + size * step[0], b + size * step[1]
        current = trial
    if not converged:
        warnings.warn(
            f"Platt scaling did not converge in {max_iter} Newton steps (gradient above {tol:g}); the fit may "
            "not minimise the cross-entropy. Check the logits for extreme values",
            ScalingFitWarning,
            stacklevel=2,
        )
    return float(a), float(b), converged


def fit_binary_temperature(logits: Any, labels: Any) -> float:
    """The temperature ``T`` minimising the NLL of ``sigmoid(z / T)``: ``fit_temperature`` on ``[0, z]``.

    Parameters
    ----------
    logits, labels
        One logit and one 0/1 label per example.
    """
    z, y = validate_binary_logits(logits, labels)
    pair = np.stack([np.zeros_like(z), z], axis=1)
    return _fit_temperature_for_caller(pair, y.astype(np.int64))


class _OneLogit(_Calibrator):
    """A calibrator of one logit, which also takes probabilities (as ``logit(clip(p, eps, 1 - eps))``)."""

    _fit_call = "fit(logits, labels) (or fit_probs)"

    def fit_probs(self: _Fit, probs: Any, labels: Any) -> _Fit:
        """Fit on positive-class probabilities.

        Parameters
        ----------
        probs, labels
            One probability and one 0/1 label per example.
        """
        p, y = validate_binary(probs, labels)
        return self.fit(logit(p), y)

    def transform_probs(self, probs: Any) -> np.ndarray:
        """Calibrated probabilities (float64) of positive-class probabilities.

        Parameters
        ----------
        probs
            One probability per example.
        """
        return self.transform(logit(binary_probabilities(probs, allow_empty=True)))


class PlattScaling(_OneLogit):
    """Platt scaling ``sigmoid(a z + b)`` of one logit (see the module docstring).

    ``fit(logits, labels)`` or ``fit_probs(probs, labels)``; ``transform(logits)`` / ``transform_probs(probs)`` give
    calibrated probabilities. Fitted: ``a_``, ``b_``, ``converged_``.
    """

    def __init__(self, *, targets: Targets = "platt") -> None:
        check_choice(targets, "targets", TARGETS)
        self.targets: Targets = targets
        self.a_: float | None = None
        self.b_: float | None = None
        self.converged_: bool | None = None

    @property
    def fitted(self) -> bool:
        return self.a_ is not None

    def fit(self, logits: Any, labels: Any) -> PlattScaling:
        """Fit ``a`` and ``b`` (:func:`fit_platt`).

        Parameters
        ----------
        logits, labels
            One logit and one 0/1 label per example.
        """
        self.a_, self.b_, self.converged_ = fit_platt(logits, labels, targets=self.targets)
        return self

    def transform(self, logits: Any) -> np.ndarray:
        """Calibrated probabilities ``sigmoid(a z + b)`` (float64).

        Parameters
        ----------
        logits
            One logit per example.
        """
        self._check_fitted()
        return sigmoid(cast(float, self.a_) * binary_logits(logits, allow_empty=True) + cast(float, self.b_))

    def __repr__(self) -> str:
        state = "not fitted" if self.a_ is None else f"a={self.a_:.6g}, b={self.b_:.6g}"
        return f"PlattScaling(targets={self.targets!r}; {state})"


class BinaryTemperatureScaling(_OneLogit):
    """Temperature scaling ``sigmoid(z / T)`` of one logit. Fitted: ``temperature_``."""

    def __init__(self) -> None:
        self.temperature_: float | None = None

    @property
    def fitted(self) -> bool:
        return self.temperature_ is not None

    def fit(self, logits: Any, labels: Any) -> BinaryTemperatureScaling:
        """Fit ``T`` (:func:`fit_binary_temperature`).

        Parameters
        ----------
        logits, labels
            One logit and one 0/1 label per example.
        """
        self.temperature_ = fit_binary_temperature(logits, labels)
        return self

    def transform(self, logits: Any) -> np.ndarray:
        """Calibrated probabilities ``sigmoid(z / T)`` (float64).

        Parameters
        ----------
        logits
            One logit per example.
        """
        self._check_fitted()
        return sigmoid(binary_logits(logits, allow_empty=True) / cast(float, self.temperature_))

    def __repr__(self) -> str:
        state = "not fitted" if self.temperature_ is None else f"T={self.temperature_:.6g}"
        return f"BinaryTemperatureScaling({state})"


class BinaryCalibrator:
    """One binary calibrator chosen by name: ``"platt"``, ``"temperature"``, ``"histogram"``, ``"isotonic"``.

    ``fit(scores, labels, logits=False)`` and ``predict_proba(scores, logits=False)``: scores are
    positive-class probabilities, or logits with ``logits=True``; each method gets the form it needs
    (see the module docstring). Options: ``targets`` (Platt), ``n_bins`` and ``adaptive`` (histogram
    binning). The fitted calibrator is ``calibrator_``.
    """

    def __init__(
        self, method: Method = "platt", *, targets: Targets = "platt", n_bins: int = 10, adaptive: bool = False
    ) -> None:
        check_choice(method, "method", METHODS)
        self.method: Method = method
        self.targets: Targets = targets
        self.n_bins = n_bins
        self.adaptive = adaptive
        self.calibrator_: PlattScaling | BinaryTemperatureScaling | HistogramBinningCalibrator | IsotonicCalibrator
        self._fitted = False
        self._new()

    def _new(self) -> None:
        if self.method == "platt":
            self.calibrator_ = PlattScaling(targets=self.targets)
        elif self.method == "temperature":
            self.calibrator_ = BinaryTemperatureScaling()
        elif self.method == "histogram":
            self.calibrator_ = HistogramBinningCalibrator(self.n_bins, adaptive=self.adaptive)
        else:
            self.calibrator_ = IsotonicCalibrator()

    def fit(self, scores: Any, labels: Any, *, logits: bool = False) -> BinaryCalibrator:
        """Fit the calibrator.

        Parameters
        ----------
        scores, labels
            One score and one 0/1 label per example.
        logits
            The scores are logits, not probabilities.
        """
        self._new()
        cal = self.calibrator_
        if isinstance(cal, _OneLogit) and logits:
            cal.fit(scores, labels)
        elif isinstance(cal, _OneLogit):
            cal.fit_probs(scores, labels)
        else:
            cal.fit(*validate_binary(scores, labels, logits=logits))
        self._fitted = True
        return self

    def predict_proba(self, scores: Any, *, logits: bool = False) -> np.ndarray:
        """Calibrated positive-class probabilities (float64), one per score.

        Parameters
        ----------
        scores
            One score per example.
        logits
            The scores are logits, not probabilities.
        """
        if not self._fitted:
            raise InputValidationError(
                f"BinaryCalibrator({self.method!r}) is not fitted: call fit(scores, labels) first"
            )
        cal = self.calibrator_
        if isinstance(cal, _OneLogit):
            return cal.transform(scores) if logits else cal.transform_probs(scores)
        return cal.transform(binary_probabilities(scores, logits=logits, allow_empty=True))

    __call__ = predict_proba

    def __repr__(self) -> str:
        return f"BinaryCalibrator({self.method!r}; {self.calibrator_!r})"


class MultilabelCalibrator:
    """One :class:`BinaryCalibrator` per label column of ``(N, L)`` scores (per-label calibration).

    ``fit(scores, labels, logits=False)`` with an ``(N, L)`` 0/1 label matrix; ``predict_proba(scores)``
    returns ``(M, L)`` calibrated probabilities, column ``k`` from label ``k``'s calibrator
    (``calibrators_[k]``). Rows are not renormalised: the labels are independent binary problems.
    """

    def __init__(
        self, method: Method = "platt", *, targets: Targets = "platt", n_bins: int = 10, adaptive: bool = False
    ) -> None:
        BinaryCalibrator(method, targets=targets, n_bins=n_bins, adaptive=adaptive)  # validates the options
        self.method: Method = method
        self.options: dict[str, Any] = {"targets": targets, "n_bins": n_bins, "adaptive": adaptive}
        self.calibrators_: list[BinaryCalibrator] = []

    def fit(self, scores: Any, labels: Any, *, logits: bool = False) -> MultilabelCalibrator:
        """Fit one calibrator per label column.

        Parameters
        ----------
        scores, labels
            ``(N, L)`` scores and the ``(N, L)`` 0/1 label matrix.
        logits
            The scores are logits, not probabilities.
        """
        if logits:
            z = as_array(scores, "logits").astype(np.float64)
            _, y = validate_multilabel(z, labels, logits=True)  # shapes, finiteness and 0/1 labels
            columns = z
        else:
            columns, y = validate_multilabel(scores, labels)
        fitted = []
        for k in range(columns.shape[1]):
            try:
                fitted.append(BinaryCalibrator(self.method, **self.options).fit(columns[:, k], y[:, k], logits=logits))
            except InputValidationError as error:
                raise InputValidationError(f"label {k}: {error}") from error
        self.calibrators_ = fitted
        return self

    def predict_proba(self, scores: Any, *, logits: bool = False) -> np.ndarray:
        """Calibrated probabilities, ``(M, L)``: column ``k`` from label ``k``'s calibrator.

        Parameters
        ----------
        scores
            ``(M, L)`` scores.
        logits
            The scores are logits, not probabilities.
        """
        if not self.calibrators_:
            raise InputValidationError("MultilabelCalibrator is not fitted: call fit(scores, labels) first")
        s = as_array(scores, "logits" if logits else "probs")
        if s.ndim != 2 or s.shape[1] != len(self.calibrators_):
            raise InputValidationError(
                f"scores must be (M, {len(self.calibrators_)}): one column per fitted label, got shape {s.shape}"
            )
        if s.shape[0] == 0:
            return np.zeros((0, s.shape[1]))
        return np.stack([cal.predict_proba(s[:, k], logits=logits) for k, cal in enumerate(self.calibrators_)], axis=1)

    __call__ = predict_proba

    def __repr__(self) -> str:
        state = f"{len(self.calibrators_)} labels" if self.calibrators_ else "not fitted"
        return f"MultilabelCalibrator({self.method!r}; {state})"
