"""Calibration estimators beyond the fixed-bin ECE, and proper scoring rules.

Every function is pure: numpy arrays, lists or torch tensors in, Python floats / small frozen
dataclasses out. Inputs are validated with the helpers of :mod:`modelval.metrics.calibration`, so NaN,
wrong shapes, out-of-range values and empty input raise :class:`~modelval.errors.InputValidationError`
with a message that says what was wrong and how to fix it.

Top-1 estimators take ``confidences`` (the largest softmax probability of each example, in [0, 1])
and ``correct`` (0/1 or bool: was the top-1 class right), as
:func:`~modelval.metrics.calibration.expected_calibration_error` does:

* :func:`debiased_l2_calibration_error`: Kumar, Liang & Ma (NeurIPS 2019), equal-mass bins; equals
  ``calibration.get_top_calibration_error`` of the package ``uncertainty-calibration``.
* :func:`ece_sweep`: Roelofs et al. (AISTATS 2022), the largest bin count with monotone bin accuracies.
* :func:`smooth_ece` and :func:`smooth_reliability_curve`: Blasiok & Nakkiran (2023); equal
  ``relplot.smECE`` and ``relplot.prepare_rel_diagram``.
* :func:`ece_at_bin_counts`, :func:`auto_n_bins`, :func:`ece_by_group`: the binned ECE at several bin
  counts, the cube-root bin-count rule, the ECE per class group (many / medium / few shot).

Class-probability estimators take an ``(N, C)`` matrix (rows sum to 1) and ``(N,)`` integer labels:

* :func:`classwise_calibration_error`: the marginal (class-wise) ECE; equals
  ``calibration.get_ece(probs, labels, mode="marginal")``.
* :func:`brier_score` and :func:`negative_log_likelihood`: equal scikit-learn's multiclass
  ``brier_score_loss`` and ``log_loss``; both also take logits (``logits=True``).

The measured agreement with each reference package is listed in ``docs/estimators.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from modelval.errors import InputValidationError
from modelval.metrics.calibration import _searchsorted_even, expected_calibration_error, reliability_bins
from modelval.metrics.temperature import log_softmax, softmax
from modelval.metrics.validation import (
    as_array,
    check_class_indices,
    check_confidences,
    check_count,
    check_n_bins,
    check_number,
    validate_logits,
    validate_probs,
)

#: Bin counts of :func:`ece_at_bin_counts` when none are given.
DEFAULT_BIN_COUNTS: tuple[int, ...] = (5, 10, 15, 20, 30, 50)


def _top1(confidences: Any, correct: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validated float64 confidences and float64 0/1 flags."""
    conf, flags = check_confidences(confidences, correct)
    return conf.astype(np.float64), flags.astype(np.float64)


# --------------------------------------------------------------------------------------------------
# Kumar, Liang & Ma (2019): debiased L2 calibration error with equal-mass bins
# --------------------------------------------------------------------------------------------------


def _equal_mass_boundaries(conf: np.ndarray, n_bins: int) -> np.ndarray:
    """Upper bin boundaries of ``calibration.get_equal_bins`` (the last one is 1.0).

    The sorted confidences are split into ``min(n_bins, N)`` consecutive parts of (nearly) equal size,
    ``numpy.array_split``'s sizes: the first ``N mod k`` parts hold one more. A boundary is the midpoint
    between the last value of one part and the first of the next; duplicates (ties) are merged.
    """
    values = np.sort(conf)
    k = min(n_bins, len(values))
    sizes = np.full(k, len(values) // k)
    sizes[: len(values) % k] += 1
    ends = np.cumsum(sizes)[:-1]  # index of the first value of parts 1 .. k-1
    mids = (values[ends - 1] + values[ends]) / 2.0
    return np.unique(np.append(mids, 1.0))


def debiased_l2_calibration_error(confidences: Any, correct: Any, n_bins: int = 15, *, squared: bool = False) -> float:
    """Debiased estimate of the top-label L2 calibration error (Kumar, Liang & Ma, NeurIPS 2019).

    The confidences are split into ``n_bins`` equal-mass bins (at most one per example). With
    ``n_b`` examples in bin ``b``, mean confidence ``c_b`` and accuracy ``a_b``:

        S = sum_b n_b / N * [ (c_b - a_b)^2 - a_b (1 - a_b) / (n_b - 1) ]

    where a bin with fewer than two examples contributes 0. ``(c_b - a_b)^2`` overestimates the squared
    gap by the variance of ``a_b``; the second term removes that bias. The L2 error is
    ``sqrt(max(S, 0))``, which is returned by default; ``squared=True`` returns ``S`` itself, an
    unbiased estimate of the squared error that may be slightly negative for a calibrated model.

    Bins: the sorted confidences are cut into ``min(n_bins, N)`` parts of (nearly) equal size; a
    boundary is the midpoint between neighbouring parts; a confidence equal to a boundary belongs to
    the lower bin, ``(lo, hi]``. Tied confidences are never split, so ties can leave fewer bins.

    Matches ``calibration.get_top_calibration_error(probs, labels, p=2, debias=True)`` of the package
    ``uncertainty-calibration`` (import name ``calibration``) for continuous scores, i.e.
    ``calibration.lower_bound_scaling_ce(confidences, correct, p=2, debias=True, num_bins=n_bins)``,
    which returns the L2 error (the square root), not its square. Note that
    ``calibration.get_calibration_error`` defaults to ``mode="marginal"`` (class-wise), and that for
    scores with many ties (fewer than N/4 distinct values) it switches to one bin per distinct value;
    this function always uses ``n_bins`` equal-mass bins. Computed in float64.
    """
    check_n_bins(n_bins)
    conf, flags = _top1(confidences, correct)
    boundaries = _equal_mass_boundaries(conf, int(n_bins))
    idx = np.searchsorted(boundaries, conf, side="left")
    size = len(boundaries)
    counts = np.bincount(idx, minlength=size).astype(np.float64)
    sum_conf = np.bincount(idx, weights=conf, minlength=size)
    sum_correct = np.bincount(idx, weights=flags, minlength=size)
    usable = counts >= 2
    n_b = counts[usable]
    acc = sum_correct[usable] / n_b
    gap = sum_conf[usable] / n_b - acc
    per_bin = gap**2 - acc * (1.0 - acc) / (n_b - 1.0)
    estimate = float(np.dot(n_b / len(conf), per_bin))
    if squared:
        return estimate
    return math.sqrt(max(estimate, 0.0))


# --------------------------------------------------------------------------------------------------
# Roelofs et al. (2022): ECE sweep
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepResult:
    """Result of :func:`ece_sweep`: the calibration error at the chosen bin count."""

    ece: float  # (sum_b n_b / N |acc_b - conf_b|^p)^(1/p) at n_bins
    n_bins: int  # the largest bin count whose bin accuracies are monotone (bins requested)
    effective_bins: int  # non-empty bins at n_bins (fewer with ties or empty equal-width bins)
    p: float
    adaptive: bool


def _lp_error(confidences: np.ndarray, correct: np.ndarray, n_bins: int, adaptive: bool, p: float) -> float:
    bins = reliability_bins(confidences, correct, n_bins, adaptive=adaptive)
    if p == 1:
        return bins.ece
    nonempty = bins.counts > 0
    total = float(np.sum(bins.weights[nonempty] * bins.gap[nonempty] ** p))
    return total ** (1.0 / p)


def ece_sweep(
    confidences: Any,
    correct: Any,
    *,
    adaptive: bool = True,
    p: float = 1,
    max_bins: int | None = None,
) -> SweepResult:
    """ECE sweep of Roelofs, Cain, Shlens & Mozer, "Mitigating bias in calibration error estimation" (2022).

    For ``b = 1, 2, ...`` the confidences are binned into ``b`` bins and the accuracies of the non-empty
    bins, in bin order, are checked for being monotonically non-decreasing. The sweep stops at the
    first ``b`` that is not monotone and takes ``b* = b - 1`` (``b = 1`` is always monotone); it ends
    at ``max_bins`` (default: the number of examples) if every count is monotone. The result is

        ECE_sweep = ( sum_b |B_b| / N * |acc(B_b) - conf(B_b)|^p )^(1/p)     at b* bins,

    the paper's ECE_sweep (equation 8); ``p=1`` is the ECE, ``p=2`` the RMS (L2) error.

    Bins are exactly those of :func:`~modelval.metrics.calibration.reliability_bins`: with
    ``adaptive=True`` (the default, the paper's recommended equal-mass ECE_sweep_em) the ``k / b``
    percentiles of the confidences, as scikit-learn's ``calibration_curve(strategy="quantile")``; with
    ``adaptive=False`` (ECE_sweep_ew) ``b`` equal-width bins on [0, 1]. Both use the ``(lo, hi]`` rule,
    so ``ece_sweep(c, k).ece == expected_calibration_error(c, k, result.n_bins, adaptive=...)`` for
    ``p=1``. The reference implementation of the paper (``robustness_metrics``' ``msce``) splits the
    sorted examples by rank instead of by percentile edges; without ties the bins differ by at most
    one example at a boundary, and tied confidences are never split here.

    Each step bins all examples once; data that stay monotone for many counts cost
    ``O(max_bins * N)``, so pass ``max_bins`` for very large, very well-calibrated sets.
    """
    conf, flags = _top1(confidences, correct)
    check_number(p, "p", minimum=1, expected="must be a number >= 1 (1 for the ECE, 2 for the L2 error)")
    limit = len(conf) if max_bins is None else max_bins
    check_count(limit, "max_bins", expected="must be a positive integer or None (all examples)")
    best = 1
    for b in range(2, int(limit) + 1):
        bins = reliability_bins(conf, flags, b, adaptive=adaptive)
        acc = bins.accuracy[bins.counts > 0]
        if np.any(np.diff(acc) < 0):
            break
        best = b
    chosen = reliability_bins(conf, flags, best, adaptive=adaptive)
    return SweepResult(
        ece=_lp_error(conf, flags, best, adaptive, float(p)),
        n_bins=best,
        effective_bins=chosen.effective_bins,
        p=float(p),
        adaptive=adaptive,
    )


# --------------------------------------------------------------------------------------------------
# Blasiok & Nakkiran (2023): smooth ECE, reproducing relplot 1.0.x
# --------------------------------------------------------------------------------------------------

#: relplot's defaults: the bandwidth search stops below this width; mesh sizes of the metric and the plot.
SMECE_MIN_SIGMA = 0.001
_SMECE_MESH_PTS = 200
_PLOT_MESH_PTS = 200
_SMOOTH_EPS = 1e-4  # added to the smoothed density before dividing (relplot's BaseKernelMixin.smooth)
_SEARCH_STEPS = 10


def _round_to_grid(f: np.ndarray, y: np.ndarray, points: int) -> np.ndarray:
    """Linear splatting of the values ``y`` at ``f`` onto ``points`` grid points of [0, 1].

    relplot's ``smooth_round_to_grid``.
    """
    values = np.zeros(points)
    bins = (f * (points - 1)).astype(int).clip(0, points - 2)
    frac = f * (points - 1) - bins
    np.add.at(values, bins, (1 - frac) * y)
    np.add.at(values, bins + 1, frac * y)
    return values


def _interpolate(t: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Piecewise-linear interpolation of ``i / (len(y) - 1) -> y[i]`` at ``t`` (relplot's ``interpolate``)."""
    count = len(y)
    bucket = 1 / (count - 1)
    inds = (t * (count - 1)).astype(int).clip(0, count - 2)
    residual = (t - inds * bucket) / bucket
    return np.asarray(y[inds] * (1 - residual) + y[inds + 1] * residual)


class _ReflectedGaussian:
    """relplot's ``ReflectedGaussianKernel``: a Gaussian kernel on a grid, reflected at 0 and 1."""

    def __init__(self, sigma: float) -> None:
        self.sigma = sigma
        points = max(2000, round(20 / sigma))
        self.points = points // 2 + 1
        t = np.linspace(0, 1, self.points)
        kernel = np.exp(-(t - 0.5) * (t - 0.5) / (2 * sigma**2))
        kernel /= np.sqrt(2 * np.pi) * sigma
        self.kernel = kernel

    def apply(self, f: np.ndarray, y: np.ndarray, x_eval: np.ndarray) -> np.ndarray:
        """Kernel sum of the values ``y`` located at ``f``, evaluated at ``x_eval``."""
        m = self.points
        values = _round_to_grid(f, y, m)
        # Mirror images on both sides; only the m outputs of the 'valid' convolution that relplot keeps
        # ([m // 2, m // 2 + m)) are computed, from the 2m - 1 extended values they depend on.
        extended = np.concatenate([np.flip(values)[:-1], values, np.flip(values)[1:]])
        window = extended[m // 2 : m // 2 + 2 * m - 1]
        smoothed = np.convolve(window, self.kernel, "valid")
        return _interpolate(x_eval, smoothed)

    def smooth(self, f: np.ndarray, y: np.ndarray, x_eval: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Nadaraya-Watson estimate of ``E[y | f]`` and the (unnormalised) density, at ``x_eval``."""
        ys = self.apply(f, y, x_eval)
        density = self.apply(f, np.ones_like(y), x_eval) + _SMOOTH_EPS
        return ys / density, density

    def kde(self, f: np.ndarray, x_eval: np.ndarray) -> np.ndarray:
        return self.apply(f, np.ones_like(f) / len(f), x_eval)


def _smooth_ece_at(f: np.ndarray, y: np.ndarray, sigma: float) -> float:
    """relplot's ``smooth_ece``: kernel-smoothed residuals, weighted by the smoothed density."""
    points = max(round(10 / sigma), _SMECE_MESH_PTS)
    t = np.linspace(0, 1, points)
    residual, density = _ReflectedGaussian(sigma).smooth(f, f - y, t)
    return float(np.sum(np.abs(residual) * density) / np.sum(density))


def _smece_with_width(f: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """relplot's ``smECE(..., return_width=True)``: bisection for the fixed point ``sigma = smECE_sigma``."""
    cache: dict[float, float] = {}

    def at(sigma: float) -> float:
        if sigma not in cache:
            cache[sigma] = _smooth_ece_at(f, y, sigma)
        return cache[sigma]

    def below_fixed_point(sigma: float) -> bool:
        return sigma < SMECE_MIN_SIGMA or sigma < at(sigma)

    sigma = 1.0
    if not below_fixed_point(sigma):
        start, end = 1.0, 0.0
        for _ in range(_SEARCH_STEPS):
            mid = (start + end) / 2
            if below_fixed_point(mid):
                end = mid
            else:
                start = mid
        sigma = start
    return at(sigma), sigma


def smooth_ece(confidences: Any, correct: Any) -> float:
    """Smooth ECE (smECE) of Blasiok & Nakkiran (2023).

    "Smooth ECE: principled reliability diagrams via kernel smoothing".

    The residuals ``r_i = f_i - y_i`` are smoothed with a Gaussian kernel ``K_sigma`` reflected at 0
    and 1; with the smoothed residual ``r(t) = sum_i K(t, f_i) r_i / sum_i K(t, f_i)`` and the kernel
    density ``d(t) = sum_i K(t, f_i)``,

        smECE_sigma = integral |r(t)| d(t) dt / integral d(t) dt,

    evaluated on a grid. The bandwidth is the fixed point ``sigma* = smECE_sigma*``, found by bisection
    on (0, 1] (the smallest width tried with ``sigma >= smECE_sigma``); ``smooth_ece`` returns ``smECE_sigma*``.

    Reproduces ``relplot.smECE(f, y)`` of the package ``relplot`` 1.0.x (Apple's reference code,
    default ``ReflectedGaussianKernel``, ``config.use_logit_scaling = False``) step by step: linear
    splatting onto ``max(2000, round(20 / sigma)) // 2 + 1`` grid points, discrete convolution with the
    mirrored grid, linear interpolation to ``max(200, round(10 / sigma))`` points, ``1e-4`` added to the
    density, 10 bisection steps from ``sigma = 1`` and the cut-off ``sigma < 0.001``. Computed in float64.
    """
    f, y = _top1(confidences, correct)
    return _smece_with_width(f, y)[0]


@dataclass(frozen=True)
class SmoothReliabilityCurve:
    """Smoothed reliability diagram (:func:`smooth_reliability_curve`); arrays have one entry per mesh point."""

    x: np.ndarray  # mesh of confidences, linspace(0, 1, n_points)
    accuracy: np.ndarray  # kernel-smoothed accuracy E[correct | confidence = x]
    density: np.ndarray  # kernel density estimate of the confidences at x (integrates to about 1)
    sigma: float  # kernel bandwidth: the smooth ECE's fixed point
    smooth_ece: float


def smooth_reliability_curve(
    confidences: Any, correct: Any, *, n_points: int = _PLOT_MESH_PTS
) -> SmoothReliabilityCurve:
    """Smoothed reliability curve and confidence density for a plot, as ``relplot.prepare_rel_diagram``.

    With the bandwidth ``sigma`` of :func:`smooth_ece`, on ``x = linspace(0, 1, n_points)``:
    ``accuracy(x) = sum_i K(x, f_i) y_i / (sum_i K(x, f_i) + 1e-4)`` (the kernel smoother of
    ``relplot.estimators.KernelSmoother``, without bootstrapping) and ``density(x) = (1/N) sum_i K(x, f_i)``
    (``ReflectedGaussianKernel.kde``). Equal to the ``"mesh"``, ``"mu"``, ``"density"``, ``"sigma"`` and
    ``"ce"`` entries of ``relplot.prepare_rel_diagram(f, y, plot_confidence_band=False)`` for the
    default ``n_points=200`` (relplot's ``config.plot_mesh_pts``).
    """
    check_count(n_points, "n_points", minimum=2, expected="must be an integer >= 2")
    f, y = _top1(confidences, correct)
    ce, sigma = _smece_with_width(f, y)
    x = np.linspace(0, 1, int(n_points))
    kernel = _ReflectedGaussian(sigma)
    accuracy, _ = kernel.smooth(f, y, x)
    return SmoothReliabilityCurve(x=x, accuracy=accuracy, density=kernel.kde(f, x), sigma=sigma, smooth_ece=ce)


# --------------------------------------------------------------------------------------------------
# Class-probability inputs: class-wise ECE, Brier score, NLL
# --------------------------------------------------------------------------------------------------


def _probs(probs: Any, labels: Any) -> tuple[np.ndarray, np.ndarray, np.dtype[Any]]:
    """float64 ``(N, C)`` probabilities, their class indices and the input's float dtype."""
    p, dtype = validate_probs(probs)
    return p, check_class_indices(labels, "labels", n=p.shape[0], num_classes=p.shape[1], scores="probs"), dtype


def classwise_calibration_error(probs: Any, labels: Any, n_bins: int = 15) -> float:
    """Class-wise (marginal) ECE: the mean over classes of the one-vs-rest ECE.

        classwise-ECE = (1 / C) sum_k ECE( p[:, k], 1[label == k] )

    where each ECE uses ``n_bins`` equal-width bins ``(lo, hi]`` on [0, 1] (0 in the first bin), the
    default convention of :func:`~modelval.metrics.calibration.expected_calibration_error`. Every class
    counts, including classes that never occur (their scores against all-zero targets).

    Matches ``calibration.get_ece(probs, labels, num_bins=n_bins, mode="marginal")`` of the package
    ``uncertainty-calibration`` (its bin edges are ``i / n_bins``, which can differ from
    ``numpy.linspace`` in the last bit, so a score exactly on an edge may be binned differently).
    netcal and torchmetrics have no class-wise ECE. Computed in float64.
    """
    check_n_bins(n_bins)
    p, y, _ = _probs(probs, labels)
    n, classes = p.shape
    inner = np.linspace(0.0, 1.0, int(n_bins) + 1)[1:-1]  # the edges of _bin_indices (default convention)
    # All classes at once, a block of columns at a time (temporaries of about 4 M entries): one Python step
    # per class took ~47 minutes for 20 million classes. For class k and bin b,
    # ECE_k = sum_b |B_kb| / N * |acc_kb - conf_kb| = sum_b |hits_kb - sum of scores in B_kb| / N.
    width = max(1, (1 << 22) // n)
    total = 0.0
    for start in range(0, classes, width):
        block = p[:, start : start + width]
        cols = block.shape[1]
        bins = _searchsorted_even(inner, block.ravel(), "left").reshape(n, cols)
        cell = bins + int(n_bins) * np.arange(cols)
        scores = np.bincount(cell.ravel(), weights=block.ravel(), minlength=cols * int(n_bins))
        mine = np.flatnonzero((y >= start) & (y < start + cols))  # examples whose class is in this block
        column = y[mine] - start
        hits = np.bincount(cell[mine, column], minlength=cols * int(n_bins))
        total += float(np.abs(hits - scores).reshape(cols, int(n_bins)).sum(axis=1).sum() / n)
    return total / classes


def _probabilities(probs_or_logits: Any, labels: Any, logits: bool) -> tuple[np.ndarray, np.ndarray]:
    if logits:
        z, y = validate_logits(probs_or_logits, labels)
        return softmax(z), y
    p, y, _ = _probs(probs_or_logits, labels)
    return p, y


def brier_score(probs_or_logits: Any, labels: Any, *, logits: bool = False) -> float:
    """Multiclass Brier score: ``(1/N) sum_i sum_k (p_ik - 1[y_i == k])^2``, in [0, 2].

    ``logits=True`` takes ``(N, C)`` logits and uses ``softmax(logits)``.

    Equals scikit-learn's ``brier_score_loss(labels, probs, labels=range(C))`` (>= 1.7) for ``C >= 3``
    classes, where it sums over classes without halving. For ``C = 2`` scikit-learn's default
    (``scale_by_half="auto"``) halves the score to [0, 1], the binary convention; this function does
    not halve, so it equals ``brier_score_loss(..., scale_by_half=False)`` for every ``C``, and twice
    the binary Brier score ``mean((p_1 - y)^2)`` for ``C = 2``. Computed in float64.
    """
    p, y = _probabilities(probs_or_logits, labels, logits)
    rows = np.arange(len(y))
    # sum_k (p_k - onehot_k)^2 = sum_k p_k^2 - 2 p_y + 1, without an (N, C) temporary.
    per_example = np.einsum("ij,ij->i", p, p) - 2.0 * p[rows, y] + 1.0
    return float(np.mean(per_example))


def negative_log_likelihood(probs_or_logits: Any, labels: Any, *, logits: bool = False) -> float:
    """Mean negative log-likelihood of the true class, ``-(1/N) sum_i log p_{i, y_i}``.

    From probabilities (default), as scikit-learn's ``log_loss(labels, probs, labels=range(C))``: the
    probability of the true class is clipped to ``[eps, 1 - eps]`` with ``eps`` the machine epsilon of
    the input's float dtype (2.2e-16 for float64, 1.2e-7 for float32; float64 for non-float input),
    so a zero probability costs ``-log(eps)`` (36.04 for float64) instead of infinity, and the rows are
    not renormalised. scikit-learn computes in the input's dtype, this function always in float64
    (identical for float64 input; for float32 input the results differ by float32 rounding).

    From logits (``logits=True``): the exact log-softmax ``z_y - logsumexp(z)`` without clipping, as
    ``torch.nn.functional.cross_entropy``, so a confidently wrong prediction keeps its full cost. The two
    paths agree up to rounding wherever ``eps <= p_y <= 1 - eps``.
    """
    if logits:
        z, y = validate_logits(probs_or_logits, labels)
        return float(-np.mean(log_softmax(z)[np.arange(len(y)), y]))
    p, y, dtype = _probs(probs_or_logits, labels)
    eps = float(np.finfo(dtype).eps)
    p_true = np.clip(p[np.arange(len(y)), y], eps, 1 - eps)
    return float(-np.mean(np.log(p_true)))


# --------------------------------------------------------------------------------------------------
# Bin counts, ECE at several bin counts, ECE per class group
# --------------------------------------------------------------------------------------------------


def auto_n_bins(n: int) -> int:
    """Cube-root rule for the number of bins: ``ceil(n ** (1/3))``, the smallest ``k`` with ``k^3 >= n``.

    A bin width of order ``n^(-1/3)`` balances a histogram estimator's bias and variance (Freedman &
    Diaconis 1981; numpy's ``histogram_bin_edges(bins="rice")`` uses ``2 n^(1/3)`` bins). scikit-learn
    (checked in 1.9) has no cube-root bin rule of its own: ``calibration_curve`` takes ``n_bins=5``
    unless told otherwise. Computed in exact integer arithmetic, so perfect cubes are not rounded up
    (``auto_n_bins(1000) == 10``, ``auto_n_bins(1001) == 11``).
    """
    n = check_count(n, "n", expected="must be a positive integer (the number of examples)")
    k = max(1, round(n ** (1 / 3)))
    while k**3 < n:
        k += 1
    while k > 1 and (k - 1) ** 3 >= n:
        k -= 1
    return k


def resolve_n_bins(n_bins: int | Literal["auto"], n: int) -> tuple[int, str | None]:
    """``(bins, rule)``: ``auto`` becomes the cube-root rule's count for ``n`` examples."""
    check_n_bins(n_bins, auto=True)
    if n_bins == "auto":
        return auto_n_bins(n), f"auto: ceil(n^(1/3)) for n = {n}"
    return int(n_bins), None


def ece_at_bin_counts(
    confidences: Any,
    correct: Any,
    bin_counts: Iterable[int] = DEFAULT_BIN_COUNTS,
    *,
    adaptive: bool = False,
) -> dict[int, float]:
    """The ECE of :func:`~modelval.metrics.calibration.expected_calibration_error` at each bin count.

    Returns ``{n_bins: ece}`` in the order given (duplicates once). Shows how much a reported ECE
    depends on the bin count, the main source of its bias (Roelofs et al. 2022).
    """
    counts = list(bin_counts)
    if not counts:
        raise InputValidationError("bin_counts is empty; give at least one bin count, e.g. (5, 10, 15)")
    for n_bins in counts:
        check_n_bins(n_bins)
    conf, flags = _top1(confidences, correct)
    return {int(b): expected_calibration_error(conf, flags, int(b), adaptive=adaptive) for b in counts}


@dataclass(frozen=True)
class GroupECE:
    """ECE of the examples whose true label is in one class group (:func:`ece_by_group`)."""

    name: str
    ece: float | None  # None when the group has no examples (never NaN)
    n_examples: int
    n_classes: int  # class ids listed for the group
    reason: str | None = None  # why ece is None


def _group_ids(name: str, ids: Any) -> np.ndarray:
    arr = as_array(list(ids) if isinstance(ids, (set, frozenset)) else ids, f"groups[{name!r}]").reshape(-1)
    integral = arr.size == 0 or np.issubdtype(arr.dtype, np.integer)
    if not integral and np.issubdtype(arr.dtype, np.floating):
        integral = bool(np.isfinite(arr).all() and np.all(np.mod(arr, 1) == 0))
    if not integral:
        raise InputValidationError(f"groups[{name!r}] must list integer class ids, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def ece_by_group(
    confidences: Any,
    correct: Any,
    labels: Any,
    groups: Mapping[str, Any],
    n_bins: int = 15,
    *,
    adaptive: bool = False,
) -> dict[str, GroupECE]:
    """ECE per class group (e.g. many / medium / few shot): for each ``name -> class ids``, the ECE of
    the examples whose **true** label is in the group (``n_bins`` bins, the default convention of
    :func:`~modelval.metrics.calibration.expected_calibration_error`).

    A group without examples (no class ids, or none of its classes in ``labels``) gets ``ece=None`` and a
    ``reason``; no NaN is ever returned. Groups may overlap; examples in no group are ignored.
    """
    check_n_bins(n_bins)
    conf, flags = _top1(confidences, correct)
    y = check_class_indices(labels, "labels", n=len(conf), scores="confidences")
    if not isinstance(groups, Mapping):
        raise InputValidationError(
            f"groups must be a mapping of group name -> class ids, e.g. {{'few': [3, 7]}}, got {type(groups).__name__}"
        )
    if not groups:
        raise InputValidationError("groups is empty; give at least one group of class ids")
    result: dict[str, GroupECE] = {}
    for name, ids in groups.items():
        class_ids = _group_ids(str(name), ids)
        n_classes = int(np.unique(class_ids).size)
        member = np.isin(y, class_ids)
        count = int(member.sum())
        if n_classes == 0:
            result[name] = GroupECE(name, None, 0, 0, "the group lists no classes")
        elif count == 0:
            result[name] = GroupECE(
                name, None, 0, n_classes, f"no example has a true label among the group's {n_classes} class(es)"
            )
        else:
            ece = expected_calibration_error(conf[member], flags[member], n_bins, adaptive=adaptive)
            result[name] = GroupECE(name, ece, count, n_classes)
    return result
