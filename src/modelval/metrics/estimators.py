"""Calibration estimators beyond the fixed-bin ECE, and proper scoring rules.

Top-1 estimators take ``confidences`` (the largest softmax probability of each example) and ``correct`` (was
the top-1 class right), as :func:`~modelval.metrics.calibration.expected_calibration_error` does;
class-probability estimators take an ``(N, C)`` matrix and ``(N,)`` labels. Each equals a reference package's
number: the definitions, the references and the measured agreement are in ``docs/estimators.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from modelval.errors import InputValidationError
from modelval.metrics.calibration import ReliabilityBins, expected_calibration_error, reliability_bins
from modelval.metrics.validation import (
    check_class_ids,
    check_class_indices,
    check_count,
    check_n_bins,
    check_number,
    validate_top1,
)

#: Bin counts of :func:`ece_at_bin_counts` when none are given.
DEFAULT_BIN_COUNTS: tuple[int, ...] = (5, 10, 15, 20, 30, 50)


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

    Over ``n_bins`` equal-mass bins (``(lo, hi]``, ties never split), with ``n_b`` examples, mean confidence
    ``c_b`` and accuracy ``a_b`` in bin ``b``: ``S = sum_b n_b / N * [(c_b - a_b)^2 - a_b (1 - a_b) / (n_b - 1)]``
    (bins with fewer than two examples add 0); the L2 error is ``sqrt(max(S, 0))``. Equals
    ``calibration.get_top_calibration_error(probs, labels, p=2, debias=True)`` of uncertainty-calibration for
    continuous scores. Computed in float64.

    Parameters
    ----------
    confidences, correct
        Top-1 confidences in [0, 1] and whether each prediction was right (0/1 or bool).
    n_bins
        Equal-mass bins (at most one per example).
    squared
        Return ``S``, an unbiased estimate of the squared error that may be slightly negative.
    """
    check_n_bins(n_bins)
    conf, flags = validate_top1(confidences, correct)
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


@dataclass(frozen=True)
class SweepResult:
    """Result of :func:`ece_sweep`: the calibration error at the chosen bin count."""

    ece: float  # (sum_b n_b / N |acc_b - conf_b|^p)^(1/p) at n_bins
    n_bins: int  # the largest bin count whose bin accuracies are monotone (bins requested)
    effective_bins: int  # non-empty bins at n_bins (fewer with ties or empty equal-width bins)
    p: float
    adaptive: bool


def _lp_error(bins: ReliabilityBins, p: float) -> float:
    if p == 1:
        return bins.ece
    nonempty = bins.counts > 0
    total = float(np.sum(bins.weights[nonempty] * bins.gap[nonempty] ** p))
    return total ** (1.0 / p)


def ece_sweep(
    confidences: Any, correct: Any, *, adaptive: bool = True, p: float = 1, max_bins: int | None = None
) -> SweepResult:
    """ECE sweep of Roelofs, Cain, Shlens & Mozer, "Mitigating bias in calibration error estimation" (2022).

    For ``b = 1, 2, ...`` the confidences are binned into ``b`` bins of
    :func:`~modelval.metrics.calibration.reliability_bins`; the sweep stops at the first ``b`` whose non-empty
    bins' accuracies are not monotonically non-decreasing and reports
    ``(sum_b |B_b| / N * |acc(B_b) - conf(B_b)|^p)^(1/p)`` at ``b - 1`` bins (the paper's equation 8). Each step
    bins all examples once: ``O(max_bins * N)`` on data that stay monotone.

    Parameters
    ----------
    confidences, correct
        Top-1 confidences in [0, 1] and whether each prediction was right (0/1 or bool).
    adaptive
        Equal-mass bins (the paper's ECE_sweep_em, the default) or equal-width ones.
    p
        The norm: 1 for the ECE, 2 for the L2 error.
    max_bins
        The largest bin count tried (default: the number of examples).
    """
    conf, flags = validate_top1(confidences, correct)
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
        ece=_lp_error(chosen, float(p)),
        n_bins=best,
        effective_bins=chosen.effective_bins,
        p=float(p),
        adaptive=adaptive,
    )


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
    """Smooth ECE (smECE) of Blasiok & Nakkiran (2023): principled reliability diagrams via kernel smoothing.

    The residuals ``f_i - y_i`` are smoothed with a Gaussian kernel reflected at 0 and 1; smECE is the mean
    absolute smoothed residual under the kernel density, at the bandwidth that equals its own smECE (found by
    bisection). Reproduces ``relplot.smECE(f, y)`` of relplot 1.0.x step by step, in float64.

    Parameters
    ----------
    confidences, correct
        Top-1 confidences in [0, 1] and whether each prediction was right (0/1 or bool).
    """
    f, y = validate_top1(confidences, correct)
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

    On ``x = linspace(0, 1, n_points)`` with the bandwidth of :func:`smooth_ece`: the kernel-smoothed accuracy
    and the kernel density of the confidences (relplot's ``"mesh"``, ``"mu"``, ``"density"``, ``"sigma"`` and
    ``"ce"`` for ``plot_confidence_band=False``).

    Parameters
    ----------
    confidences, correct
        Top-1 confidences in [0, 1] and whether each prediction was right (0/1 or bool).
    n_points
        Points of the mesh (relplot's ``config.plot_mesh_pts``, 200).
    """
    check_count(n_points, "n_points", minimum=2, expected="must be an integer >= 2")
    f, y = validate_top1(confidences, correct)
    ce, sigma = _smece_with_width(f, y)
    x = np.linspace(0, 1, int(n_points))
    kernel = _ReflectedGaussian(sigma)
    accuracy, _ = kernel.smooth(f, y, x)
    return SmoothReliabilityCurve(x=x, accuracy=accuracy, density=kernel.kde(f, x), sigma=sigma, smooth_ece=ce)


def auto_n_bins(n: int) -> int:
    """Cube-root rule for the number of bins: ``ceil(n ** (1/3))``, the smallest ``k`` with ``k^3 >= n``.

    A bin width of order ``n^(-1/3)`` balances a histogram estimator's bias and variance (Freedman & Diaconis
    1981). Exact integer arithmetic: ``auto_n_bins(1000) == 10``, ``auto_n_bins(1001) == 11``.

    Parameters
    ----------
    n
        The number of examples.
    """
    n = check_count(n, "n", expected="must be a positive integer (the number of examples)")
    k = max(1, round(n ** (1 / 3)))
    while k**3 < n:
        k += 1
    while k > 1 and (k - 1) ** 3 >= n:
        k -= 1
    return k


def resolve_n_bins(n_bins: int | Literal["auto"], n: int) -> tuple[int, str | None]:
    """``(bins, rule)``: ``"auto"`` becomes the cube-root rule's count for ``n`` examples, with the rule said.

    Parameters
    ----------
    n_bins
        A bin count or ``"auto"``.
    n
        The number of examples.
    """
    check_n_bins(n_bins, auto=True)
    if n_bins == "auto":
        return auto_n_bins(n), f"auto: ceil(n^(1/3)) for n = {n}"
    return int(n_bins), None


def ece_at_bin_counts(
    confidences: Any, correct: Any, bin_counts: Iterable[int] = DEFAULT_BIN_COUNTS, *, adaptive: bool = False
) -> dict[int, float]:
    """``{n_bins: ece}`` at each bin count (the order given, duplicates once): how much an ECE depends on the bins.

    Parameters
    ----------
    confidences, correct
        Top-1 confidences in [0, 1] and whether each prediction was right (0/1 or bool).
    bin_counts
        The bin counts.
    adaptive
        Equal-mass bins instead of uniform ones.
    """
    counts = list(bin_counts)
    if not counts:
        raise InputValidationError("bin_counts is empty; give at least one bin count, e.g. (5, 10, 15)")
    for n_bins in counts:
        check_n_bins(n_bins)
    conf, flags = validate_top1(confidences, correct)
    return {int(b): expected_calibration_error(conf, flags, int(b), adaptive=adaptive) for b in counts}


@dataclass(frozen=True)
class GroupECE:
    """ECE of the examples whose true label is in one class group (:func:`ece_by_group`)."""

    name: str
    ece: float | None  # None when the group has no examples (never NaN)
    n_examples: int
    n_classes: int  # class ids listed for the group
    reason: str | None = None  # why ece is None


def ece_by_group(
    confidences: Any, correct: Any, labels: Any, groups: Mapping[str, Any], n_bins: int = 15, *, adaptive: bool = False
) -> dict[str, GroupECE]:
    """ECE of the examples whose **true** label is in each class group (e.g. many / medium / few shot).

    A group without examples gets ``ece=None`` and a ``reason``, never NaN. Groups may overlap; examples in no
    group are ignored.

    Parameters
    ----------
    confidences, correct
        Top-1 confidences in [0, 1] and whether each prediction was right (0/1 or bool).
    labels
        The true class of each example.
    groups
        Group name -> class ids.
    n_bins, adaptive
        The bins of each ECE.
    """
    check_n_bins(n_bins)
    conf, flags = validate_top1(confidences, correct)
    y = check_class_indices(labels, "labels", n=len(conf), scores="confidences")
    if not isinstance(groups, Mapping):
        raise InputValidationError(
            f"groups must be a mapping of group name -> class ids, e.g. {{'few': [3, 7]}}, got {type(groups).__name__}"
        )
    if not groups:
        raise InputValidationError("groups is empty; give at least one group of class ids")
    result: dict[str, GroupECE] = {}
    for name, ids in groups.items():
        class_ids = check_class_ids(ids, f"groups[{str(name)!r}]")
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
