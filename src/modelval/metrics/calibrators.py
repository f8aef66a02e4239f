"""Top-label calibrators: histogram binning and isotonic regression of the top-1 confidence.

Both are fitted on held-out pairs ``(conf_i, correct_i)`` and learn a map ``g`` from a top-1 confidence to an
estimate of ``P(correct | conf)``; the predicted class never changes (top-label calibration, Gupta & Ramdas
2022: :func:`calibrate_top_label` returns ``g(max_k p_k)`` with the unchanged ``argmax_k p_k``).
:class:`HistogramBinningCalibrator` (Zadrozny & Elkan 2001) matches ``netcal.binning.HistogramBinning``
(netcal 1.4.0; ``convention="netcal"`` bit for bit while fitting); :class:`IsotonicCalibrator` (Zadrozny & Elkan
2002) matches ``sklearn.isotonic.IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1)`` including its
ties. Bins, empty bins, ties and the reference calls are in ``docs/calibrators.md``; confidences are float64.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

import numpy as np

from modelval.errors import InputValidationError
from modelval.metrics.calibration import top1_confidences
from modelval.metrics.validation import (
    as_array,
    check_choice,
    check_confidences,
    check_n_bins,
    validate_probs,
    validate_top1,
)

HistogramConvention = Literal["default", "netcal"]
HISTOGRAM_CONVENTIONS: tuple[str, ...] = ("default", "netcal")

#: Fewest fit examples isotonic regression accepts (one example gives a constant 0 or 1 map).
MIN_ISOTONIC_EXAMPLES = 2
#: scikit-learn's ``_make_unique`` merges confidences closer than this (``numpy.finfo(float64).resolution``).
TIE_RESOLUTION = float(np.finfo(np.float64).resolution)
_EPS = float(np.finfo(np.float64).eps)


_Fit = TypeVar("_Fit", bound="_Calibrator")


class _Calibrator:
    """What every calibrator shares: ``calibrator(x)`` is ``transform(x)``, which refuses until it is fitted."""

    _fit_call = "fit(confidences, correct) (or fit_probs)"

    def fit(self: _Fit, scores: Any, labels: Any) -> _Fit:  # pragma: no cover - each calibrator has its own
        raise NotImplementedError

    def transform(self, scores: Any) -> np.ndarray:  # pragma: no cover - each calibrator has its own
        raise NotImplementedError

    @property
    def fitted(self) -> bool:  # pragma: no cover - each calibrator has its own
        raise NotImplementedError

    def _check_fitted(self) -> None:
        if not self.fitted:
            raise InputValidationError(f"{type(self).__name__} is not fitted: call {self._fit_call} first")

    def __call__(self, scores: Any) -> np.ndarray:
        return self.transform(scores)


class _TopLabel(_Calibrator):
    """A top-label calibrator: fitted on probabilities through their top-1 confidence and correctness."""

    def fit_probs(self: _Fit, probs: Any, labels: Any) -> _Fit:
        """Fit on an ``(N, C)`` probability matrix and labels (its top-1 confidence and correctness).

        Parameters
        ----------
        probs, labels
            ``(N, C)`` probabilities and the true class of each row.
        """
        return self.fit(*top1_confidences(probs, labels))

    def _new_confidences(self, confidences: Any) -> np.ndarray:
        """Validated 1-D float64 confidences in [0, 1] for ``transform`` (may be empty), once fitted."""
        self._check_fitted()
        conf, _ = check_confidences(confidences, matrix_hint="calibrate_top_label(calibrator, probs)")
        return conf.astype(np.float64)


def histogram_bin_edges(confidences: Any, n_bins: int = 10, *, adaptive: bool = False) -> np.ndarray:
    """The ``n_bins + 1`` edges of histogram binning, as netcal's ``HistogramBinning`` computes them.

    Uniform: ``numpy.linspace(0, 1, n_bins + 1)``. Adaptive (equal-mass): ``numpy.quantile`` of the
    confidences clipped to ``[eps, 1 - eps]`` at ``linspace(0, 1, n_bins + 1)``, then the first edge
    set to 0 and the last to 1. Edges may repeat when confidences are tied.

    Parameters
    ----------
    confidences
        The fit confidences (used by the adaptive edges only).
    n_bins, adaptive
        The number of bins; equal-mass instead of uniform ones.
    """
    check_n_bins(n_bins)
    if not adaptive:
        return np.linspace(0.0, 1.0, int(n_bins) + 1)
    conf = as_array(confidences, "confidences").astype(np.float64)
    clipped = np.clip(conf, _EPS, 1.0 - _EPS)
    edges = np.quantile(clipped, np.linspace(0.0, 1.0, int(n_bins) + 1))
    edges[0], edges[-1] = 0.0, 1.0
    return np.asarray(edges, dtype=np.float64)


def _transform_bins(edges: np.ndarray, conf: np.ndarray) -> np.ndarray:
    """Bin index with ``(lo, hi]`` bins and 0 in the first bin (netcal's ``digitize(right=True) - 1``)."""
    n_bins = len(edges) - 1
    idx = np.searchsorted(edges, conf, side="left") - 1
    return np.clip(idx, 0, n_bins - 1)


def _netcal_fit_bins(edges: np.ndarray, conf: np.ndarray) -> np.ndarray:
    """Bin index of ``scipy.stats.binned_statistic_dd`` on ``clip(conf, eps, 1 - eps)``: ``[lo, hi)`` bins."""
    n_bins = len(edges) - 1
    clipped = np.clip(conf, _EPS, 1.0 - _EPS)
    # digitize(x, edges) == searchsorted(edges, x, "right"); clipping keeps every value inside (0, 1).
    idx = np.searchsorted(edges, clipped, side="right") - 1
    return np.clip(idx, 0, n_bins - 1)


def histogram_binning(
    confidences: Any,
    correct: Any,
    n_bins: int = 10,
    *,
    adaptive: bool = False,
    convention: HistogramConvention = "default",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit top-label histogram binning: ``(edges, values, counts)``.

    ``edges`` has ``n_bins + 1`` entries (see :func:`histogram_bin_edges`), ``values[m]`` is the
    accuracy of the fit examples in bin ``m`` (the midpoint ``(lo + hi) / 2`` where the bin is empty, as
    in netcal) and ``counts[m]`` their number. With ``convention="netcal"`` the values equal
    ``netcal.binning.HistogramBinning(n_bins, equal_intervals=not adaptive).fit(conf, correct)._bin_map``.

    Parameters
    ----------
    confidences, correct
        Held-out top-1 confidences in [0, 1] and 0/1 (or bool) correctness flags.
    n_bins, adaptive
        The number of bins; equal-mass instead of uniform ones.
    convention
        ``"default"`` or ``"netcal"``: the bin rule while fitting.
    """
    check_n_bins(n_bins)
    check_choice(convention, "convention", HISTOGRAM_CONVENTIONS)
    conf, flags = validate_top1(
        confidences,
        correct,
        int(n_bins),
        f"histogram binning with n_bins={n_bins}",
        "use fewer bins (n_bins <= number of examples) or a larger validation set",
    )
    edges = histogram_bin_edges(conf, int(n_bins), adaptive=adaptive)
    idx = _netcal_fit_bins(edges, conf) if convention == "netcal" else _transform_bins(edges, conf)
    counts = np.bincount(idx, minlength=int(n_bins))
    hits = np.bincount(idx, weights=flags, minlength=int(n_bins))
    values = 0.5 * (edges[:-1] + edges[1:])
    filled = counts > 0
    values[filled] = hits[filled] / counts[filled]
    return edges, values, counts


class HistogramBinningCalibrator(_TopLabel):
    """Top-label histogram binning (Zadrozny & Elkan 2001), matching ``netcal.binning.HistogramBinning``.

    ``fit(confidences, correct)`` (or ``fit_probs(probs, labels)``) learns one accuracy per confidence
    bin; ``transform(confidences)`` (also ``calibrator(confidences)``) maps each new confidence to the
    value of its bin, ``(lo, hi]`` bins.

    Fitted attributes: ``edges_`` (``n_bins + 1``), ``values_`` and ``counts_`` (``n_bins`` each).
    """

    def __init__(
        self, n_bins: int = 10, *, adaptive: bool = False, convention: HistogramConvention = "default"
    ) -> None:
        check_n_bins(n_bins)
        check_choice(convention, "convention", HISTOGRAM_CONVENTIONS)
        self.n_bins = int(n_bins)
        self.adaptive = bool(adaptive)
        self.convention: HistogramConvention = convention
        self.edges_: np.ndarray | None = None
        self.values_: np.ndarray | None = None
        self.counts_: np.ndarray | None = None

    def fit(self, confidences: Any, correct: Any) -> HistogramBinningCalibrator:
        """Fit on held-out top-1 confidences and correctness flags.

        Parameters
        ----------
        confidences, correct
            Held-out top-1 confidences in [0, 1] and 0/1 (or bool) correctness flags.
        """
        self.edges_, self.values_, self.counts_ = histogram_binning(
            confidences, correct, self.n_bins, adaptive=self.adaptive, convention=self.convention
        )
        return self

    @property
    def fitted(self) -> bool:
        return self.values_ is not None

    def transform(self, confidences: Any) -> np.ndarray:
        """Calibrated confidences (float64): the fitted value of each confidence's ``(lo, hi]`` bin.

        Parameters
        ----------
        confidences
            Top-1 confidences in [0, 1].
        """
        conf = self._new_confidences(confidences)
        assert self.edges_ is not None and self.values_ is not None  # fitted
        return self.values_[_transform_bins(self.edges_, conf)]

    def __repr__(self) -> str:
        state = "fitted" if self.fitted else "not fitted"
        return (
            f"HistogramBinningCalibrator(n_bins={self.n_bins}, adaptive={self.adaptive}, "
            f"convention={self.convention!r}; {state})"
        )


def pool_adjacent_violators(values: Any, weights: Any = None) -> np.ndarray:
    """Non-decreasing least-squares fit to ``values`` in the given order (pool-adjacent-violators).

    Returns ``x`` minimising ``sum_i w_i (x_i - values_i)^2`` subject to ``x_0 <= x_1 <= ...``: the
    same problem as ``scipy.optimize.isotonic_regression`` / ``sklearn.isotonic.isotonic_regression``
    (increasing). Adjacent blocks are pooled while the left block's mean is ``>=`` the right one's;
    each block keeps its exact weighted sum, so its mean is one division (scipy re-multiplies block
    means, which can differ from this in the last bits). Weights must be finite and > 0.

    Parameters
    ----------
    values
        1-D values, in the order the fit must be non-decreasing in.
    weights
        One weight per value (default 1).
    """
    y = as_array(values, "values").astype(np.float64)
    if y.ndim != 1:
        raise InputValidationError(f"values must be 1-D, got shape {y.shape}")
    w = np.ones_like(y) if weights is None else as_array(weights, "weights").astype(np.float64)
    if w.shape != y.shape:
        raise InputValidationError(f"weights must have the shape of values {y.shape}, got {w.shape}")
    if not (np.isfinite(y).all() and np.isfinite(w).all()):
        raise InputValidationError("values and weights must be finite (no NaN or infinity)")
    if (w <= 0).any():
        raise InputValidationError("weights must be > 0; drop examples with zero weight first")
    sums: list[float] = []  # per block: sum of w * y
    totals: list[float] = []  # per block: sum of w
    means: list[float] = []
    sizes: list[int] = []
    for s, t in zip((w * y).tolist(), w.tolist(), strict=True):
        mean, size = s / t, 1
        while means and means[-1] >= mean:
            s += sums.pop()
            t += totals.pop()
            means.pop()
            size += sizes.pop()
            mean = s / t
        sums.append(s)
        totals.append(t)
        means.append(mean)
        sizes.append(size)
    return np.repeat(np.asarray(means, dtype=np.float64), sizes)


def _unique_groups(sorted_x: np.ndarray) -> np.ndarray:
    """Start index of each group of (nearly) equal values, as scikit-learn's ``_make_unique``.

    A value starts a new group when ``x - first_of_group >= TIE_RESOLUTION``; values closer than that
    to the group's first value join it. Sorted input.
    """
    n = len(sorted_x)
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    gaps = np.diff(sorted_x)
    if (gaps[gaps > 0] >= TIE_RESOLUTION).all():
        # No near-ties: groups are runs of exactly equal values (x - first == x - previous inside a run).
        return np.concatenate([[0], np.flatnonzero(gaps >= TIE_RESOLUTION) + 1]).astype(np.intp)
    starts = [0]
    first = float(sorted_x[0])
    for i, x in enumerate(sorted_x.tolist()):
        if x - first >= TIE_RESOLUTION:
            starts.append(i)
            first = x
    return np.asarray(starts, dtype=np.intp)


def isotonic_regression(confidences: Any, correct: Any) -> tuple[np.ndarray, np.ndarray]:
    """Fit top-label isotonic regression: the thresholds ``(x, y)`` of the monotone map.

    The same thresholds as ``sklearn.isotonic.IsotonicRegression(out_of_bounds="clip", y_min=0,
    y_max=1).fit(conf, correct)`` (``X_thresholds_``, ``y_thresholds_``), ties included. The calibrated value
    of a confidence ``c`` is ``numpy.interp(clip(c, x[0], x[-1]), x, y)``.

    Parameters
    ----------
    confidences, correct
        Held-out top-1 confidences in [0, 1] and 0/1 (or bool) correctness flags.
    """
    conf, flags = validate_top1(
        confidences, correct, MIN_ISOTONIC_EXAMPLES, "isotonic regression", "use a larger validation set"
    )
    order = np.argsort(conf, kind="stable")
    x_sorted, hits_sorted = conf[order], flags[order]
    starts = _unique_groups(x_sorted)
    x = x_sorted[starts]
    counts = np.diff(np.append(starts, len(x_sorted))).astype(np.float64)
    hits = np.add.reduceat(hits_sorted, starts)  # integers: exact in float64
    y = np.clip(pool_adjacent_violators(hits / counts, counts), 0.0, 1.0)
    if len(y) > 2:  # scikit-learn's trim_duplicates: keep the ends of every constant run
        keep = np.ones(len(y), dtype=bool)
        keep[1:-1] = (y[1:-1] != y[:-2]) | (y[1:-1] != y[2:])
        x, y = x[keep], y[keep]
    return x, y


class IsotonicCalibrator(_TopLabel):
    """Top-label isotonic regression, matching ``sklearn.isotonic.IsotonicRegression(out_of_bounds="clip",
    y_min=0, y_max=1)`` and ``netcal.binning.IsotonicRegression`` on 1-D top-1 confidences.

    ``fit(confidences, correct)`` (or ``fit_probs(probs, labels)``) fits the monotone map;
    ``transform(confidences)`` (also ``calibrator(confidences)``) evaluates it: linear interpolation
    between the fitted thresholds, constant (clipped) outside the fitted confidence range.

    Fitted attributes: ``x_thresholds_`` and ``y_thresholds_`` (scikit-learn's ``X_thresholds_`` and
    ``y_thresholds_``).
    """

    def __init__(self) -> None:
        self.x_thresholds_: np.ndarray | None = None
        self.y_thresholds_: np.ndarray | None = None

    def fit(self, confidences: Any, correct: Any) -> IsotonicCalibrator:
        """Fit on held-out top-1 confidences and correctness flags.

        Parameters
        ----------
        confidences, correct
            Held-out top-1 confidences in [0, 1] and 0/1 (or bool) correctness flags.
        """
        self.x_thresholds_, self.y_thresholds_ = isotonic_regression(confidences, correct)
        return self

    @property
    def fitted(self) -> bool:
        return self.x_thresholds_ is not None

    def transform(self, confidences: Any) -> np.ndarray:
        """Calibrated confidences (float64), as scikit-learn's ``transform`` with ``out_of_bounds="clip"``.

        Parameters
        ----------
        confidences
            Top-1 confidences in [0, 1].
        """
        conf = self._new_confidences(confidences)
        x, y = self.x_thresholds_, self.y_thresholds_
        assert x is not None and y is not None  # fitted
        return np.asarray(np.interp(np.clip(conf, x[0], x[-1]), x, y), dtype=np.float64)

    def __repr__(self) -> str:
        if self.x_thresholds_ is None:
            return "IsotonicCalibrator(not fitted)"
        return f"IsotonicCalibrator(fitted, {len(self.x_thresholds_)} thresholds)"


TopLabelCalibrator = HistogramBinningCalibrator | IsotonicCalibrator


def calibrate_top_label(calibrator: TopLabelCalibrator, probs: Any) -> tuple[np.ndarray, np.ndarray]:
    """Apply a fitted top-label calibrator to an ``(N, C)`` probability matrix.

    Returns ``(confidence, prediction)``: the calibrated top-1 confidence ``g(max_k p_k)`` (float64) and
    the unchanged predicted class ``argmax_k p_k`` (ties to the lowest index, as ``numpy.argmax``).
    Only the top-1 confidence is calibrated; compare it with ``prediction == labels`` (e.g. in
    :func:`~modelval.metrics.calibration.expected_calibration_error`).

    Parameters
    ----------
    calibrator
        A fitted :class:`HistogramBinningCalibrator` or :class:`IsotonicCalibrator`.
    probs
        ``(N, C)`` probabilities.
    """
    if not callable(getattr(calibrator, "transform", None)):
        raise InputValidationError(
            "calibrator must be a fitted top-label calibrator with a transform(confidences) method "
            f"(HistogramBinningCalibrator, IsotonicCalibrator), got {type(calibrator).__name__}"
        )
    p, _ = validate_probs(
        probs, min_classes=1, fix="apply softmax(logits, axis=1) first", allow_empty=True,
        hint="; for 1-D top-1 confidences call calibrator.transform(confidences)",
    )  # fmt: skip
    prediction = p.argmax(axis=1) if p.shape[0] else np.zeros(0, dtype=np.intp)
    confidence = calibrator.transform(p.max(axis=1) if p.shape[0] else np.zeros(0))
    return confidence, prediction
