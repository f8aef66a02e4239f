"""Bootstrap confidence intervals for calibration and accuracy numbers.

Every interval is a seeded **percentile bootstrap** (Efron & Tibshirani 1993, ch. 13) whose unit is the example
(``stratify=True``: resampled within each class). A resample is drawn as multinomial counts of the few cells the
statistic depends on (``(class, correct)`` for the accuracy family, ``(bin, correct)`` for ECE/MCE/RMS, whose sum of
confidences per cell is drawn from its normal approximation), so its cost does not grow with the number of
examples; adaptive bin edges are held at the full data's. The method and its checks are in ``docs/uncertainty.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from modelval.errors import InputValidationError
from modelval.metrics.calibration import Convention, _bin_indices, reliability_bins
from modelval.metrics.imbalance import normalize_class_weights, shot_groups
from modelval.metrics.validation import (
    binning_dtype,
    check_class_indices,
    check_confidences,
    check_count,
    check_n_bins,
    check_number,
    validate_labels,
)
from modelval.parsing import check_seed

#: Resamples drawn per chunk: bounds the memory of stratified draws over many classes.
_CHUNK_CELLS = 4_000_000

METHOD = "percentile bootstrap over multinomial cell counts"


@dataclass(frozen=True)
class BootstrapInterval:
    """A point estimate with its percentile bootstrap interval.

    ``n_valid`` counts the resamples where the statistic was defined (a resample can miss a class that
    a reweighted accuracy needs); the percentiles are over those.
    """

    estimate: float
    low: float
    high: float
    level: float
    n_resamples: int
    n_valid: int
    seed: int
    stratified: bool
    #: The mean of the resampled values: ``resample_mean - estimate`` is the bootstrap's estimate of the bias.
    resample_mean: float = math.nan

    @property
    def width(self) -> float:
        return self.high - self.low

    @property
    def contains_estimate(self) -> bool:
        """Whether the point estimate lies inside its own interval (``True`` when either is undefined)."""
        if any(math.isnan(v) for v in (self.estimate, self.low, self.high)):
            return True
        return self.low <= self.estimate <= self.high

    def note(self, name: str) -> str | None:
        """One line when the estimate lies outside its interval: why, and how to read the two (else ``None``).

        A binned calibration error sums ``|acc - conf|`` over bins, so sampling noise can only add to it: it is biased
        upward, and for a well calibrated model every resample can exceed the estimate. The interval is the
        estimator's spread under resampling, not a range the point must be in.

        Parameters
        ----------
        name
            The number's name in the line.
        """
        if self.contains_estimate:
            return None
        side = "below" if self.estimate < self.low else "above"
        bias = self.resample_mean - self.estimate
        return (
            f"{name} {self.estimate:.4f} lies {side} its interval [{self.low:.4f}, {self.high:.4f}]: the binned "
            f"estimator is biased upward (|acc - conf| per bin turns sampling noise into error) and the resamples "
            f"average {bias:+.4f} above the estimate; the interval is the spread of the resampled estimator, and "
            "a calibration error near 0 is not ruled out (see debiased L2)"
        )

    def as_list(self) -> list[float]:
        """``[low, high]``: the ``*_ci95`` fields of the JSON outputs."""
        return [self.low, self.high]


def _check_bootstrap_args(n_resamples: int, level: float) -> None:
    check_count(n_resamples, "n_resamples", hint=" (0 means no interval: skip the call)")
    expected = "must lie strictly between 0 and 1 (0.95 for a 95% interval)"
    check_number(level, "level", above=0, below=1, expected=expected)


def _interval(
    estimate: float, values: np.ndarray, level: float, n_resamples: int, seed: int, stratified: bool
) -> BootstrapInterval:
    valid = values[np.isfinite(values)]
    if valid.size == 0:
        low = high = math.nan
    else:
        tail = (1 - level) / 2 * 100
        low, high = (float(v) for v in np.percentile(valid, [tail, 100 - tail]))
    mean = float(valid.mean()) if valid.size else math.nan
    return BootstrapInterval(
        float(estimate), low, high, level, int(n_resamples), int(valid.size), seed, stratified, mean
    )


def _multinomial_draws(rng: np.random.Generator, cell_counts: np.ndarray, n_resamples: int, stratified: bool) -> Any:
    """Yield ``(chunk, cells)`` arrays of resampled cell counts, in chunks of resamples.

    ``cell_counts`` is ``(G, K)``: ``G`` strata (classes when stratified, else one) of ``K`` cells.
    Without stratification the whole sample is one stratum of size ``N``.
    """
    strata, cells = cell_counts.shape
    totals = cell_counts.sum(axis=1)
    pvals = cell_counts / np.maximum(totals, 1)[:, None]
    chunk = max(1, _CHUNK_CELLS // max(1, strata * cells))
    done = 0
    while done < n_resamples:
        size = min(chunk, n_resamples - done)
        if stratified:
            draws = rng.multinomial(totals, pvals, size=(size, strata))
        else:
            draws = rng.multinomial(int(totals[0]), pvals[0], size=size)[:, None, :]
        done += size
        yield draws


def _intervals(
    estimate: dict[str, float],
    table: np.ndarray,
    resampled: Callable[[np.ndarray, np.random.Generator], Any],
    n_resamples: int,
    seed: int,
    stratify: bool,
    level: float,
) -> dict[str, BootstrapInterval]:
    """Each estimate's interval over the statistics ``resampled(draws, rng)`` of resampled counts of ``table``."""
    rng = np.random.default_rng(check_seed(seed))
    chunks = [resampled(draws, rng) for draws in _multinomial_draws(rng, table, n_resamples, stratify)]
    return {
        name: _interval(estimate[name], np.concatenate([c[name] for c in chunks]), level, n_resamples, seed, stratify)
        for name in estimate
    }


def accuracy_intervals(
    labels: Any,
    preds: Any,
    num_classes: int | None = None,
    *,
    class_weights: Any = None,
    train_counts: Any = None,
    many_threshold: int = 100,
    few_threshold: int = 20,
    n_resamples: int = 1000,
    seed: int = 0,
    stratify: bool = False,
    level: float = 0.95,
) -> dict[str, BootstrapInterval]:
    """Bootstrap intervals of the accuracy family: accuracy, balanced, reweighted and many/medium/few accuracy.

    Reweighted and shot accuracy (keys ``shot_many`` ...) need their inputs; the definitions are those of
    :mod:`modelval.metrics.imbalance`.

    A resample in which a statistic is undefined (a class with positive weight and no examples, an empty group)
    is left out of its percentiles and counted in ``n_valid``. Exact in distribution: these statistics depend on
    the data only through the per-class right/wrong counts, which are drawn directly.

    Parameters
    ----------
    labels, preds, num_classes
        True and predicted classes, and the number of classes (``None``: the largest index + 1).
    class_weights, train_counts, many_threshold, few_threshold
        As :func:`~modelval.metrics.imbalance.reweighted_accuracy` and :func:`~modelval.metrics.imbalance.shot_groups`.
    n_resamples, seed, stratify, level
        Resamples, their seed, resampling within each class, and the interval's level.
    """
    _check_bootstrap_args(n_resamples, level)
    y, p = validate_labels(labels, preds, num_classes)
    k = int(max(y.max(), p.max()) + 1) if num_classes is None else int(num_classes)
    weights = normalize_class_weights(class_weights, k) if class_weights is not None else None
    groups = None
    if train_counts is not None:
        counts_arr = np.asarray(train_counts)
        if len(counts_arr) != k:
            raise InputValidationError(f"{len(counts_arr)} training counts but {k} classes; give one per class")
        groups = shot_groups(counts_arr, many_threshold=many_threshold, few_threshold=few_threshold)
    cells = np.bincount(y * 2 + (y == p), minlength=2 * k).reshape(k, 2)  # (class, [wrong, right])

    def stats(hits: np.ndarray, totals: np.ndarray) -> dict[str, np.ndarray]:
        # hits, totals: (R, k). Per-class accuracy is NaN where a class has no examples in the resample.
        with np.errstate(invalid="ignore", divide="ignore"):
            per_class = hits / totals
        present = totals > 0
        out = {
            "accuracy": hits.sum(axis=1) / totals.sum(axis=1),
            "balanced_accuracy": _nanmean_rows(per_class, present),
        }
        if weights is not None:
            needed = weights > 0
            defined = np.all(present[:, needed], axis=1)
            value = np.sum(np.where(needed & present, per_class, 0.0) * weights, axis=1)
            out["reweighted_accuracy"] = np.where(defined, value, np.nan)
        if groups is not None:
            for name in ("many", "medium", "few"):
                idx = getattr(groups, name)
                out[f"shot_{name}"] = _nanmean_rows(per_class[:, idx], present[:, idx])
        return out

    def resampled(draws: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        per = draws.reshape(draws.shape[0], k, 2)
        return stats(per[:, :, 1].astype(np.float64), per.sum(axis=2).astype(np.float64))

    estimate = {name: float(v[0]) for name, v in stats(cells[None, :, 1], cells.sum(axis=1)[None, :]).items()}
    table = cells if stratify else cells.reshape(1, -1)
    return _intervals(estimate, table, resampled, n_resamples, seed, stratify, level)


def _nanmean_rows(values: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Mean of each row over its present entries; NaN for a row with none."""
    n = present.sum(axis=1)
    total = np.where(present, values, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, total / np.maximum(n, 1), np.nan)


def calibration_intervals(
    confidences: Any,
    correct: Any,
    n_bins: int = 15,
    *,
    labels: Any = None,
    adaptive: bool = False,
    convention: Convention = "default",
    n_resamples: int = 1000,
    seed: int = 0,
    stratify: bool = False,
    level: float = 0.95,
) -> dict[str, BootstrapInterval]:
    """Bootstrap intervals of top-1 ECE, MCE, RMS and accuracy (keys ``ece``, ``mce``, ``rms``, ``accuracy``).

    Parameters
    ----------
    confidences, correct
        Top-1 confidences in [0, 1] and whether each prediction was right (0/1 or bool).
    n_bins, adaptive, convention
        The bins of :func:`~modelval.metrics.calibration.reliability_bins` (adaptive edges: the full data's).
    labels
        The true class of each example (needed by ``stratify``).
    n_resamples, seed, stratify, level
        Resamples, their seed, resampling within each class, and the interval's level.
    """
    _check_bootstrap_args(n_resamples, level)
    check_n_bins(n_bins)
    conf, flags = check_confidences(confidences, correct)
    conf = conf.astype(binning_dtype(conf.dtype) if convention == "torchmetrics" else np.float64, copy=False)
    idx, _, size = _bin_indices(conf, int(n_bins), adaptive, convention)
    if stratify:
        if labels is None:
            raise InputValidationError("stratify=True needs labels (the true class of each example)")
        y = check_class_indices(labels, "labels", n=conf.shape[0], scores="confidences")
        strata = int(y.max()) + 1
        cell = (y.astype(np.intp) * size + idx) * 2 + flags
    else:
        strata = 1
        cell = idx * 2 + flags
    n_cells = strata * size * 2
    counts = np.bincount(cell, minlength=n_cells)
    conf64 = conf.astype(np.float64, copy=False)
    sums = np.bincount(cell, weights=conf64, minlength=n_cells)
    squares = np.bincount(cell, weights=conf64 * conf64, minlength=n_cells)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
        variances = np.maximum(np.where(counts > 0, squares / np.maximum(counts, 1), 0.0) - means**2, 0.0)
    n = conf.shape[0]

    def stats(m: np.ndarray, s: np.ndarray) -> dict[str, np.ndarray]:
        # m: resampled counts, s: resampled confidence sums; both (R, strata, size, 2).
        per_bin = m.sum(axis=(1, 3))
        right = m[..., 1].sum(axis=1)
        conf_sum = s.sum(axis=(1, 3))
        diff = np.abs(right - conf_sum)  # |B| * |acc(B) - conf(B)|
        with np.errstate(invalid="ignore", divide="ignore"):
            gap = np.where(per_bin > 0, diff / np.maximum(per_bin, 1), -np.inf)
            sq = np.where(per_bin > 0, diff**2 / np.maximum(per_bin, 1), 0.0)
        return {
            "ece": diff.sum(axis=1) / n,
            "mce": gap.max(axis=1),
            "rms": np.sqrt(sq.sum(axis=1) / n),
            "accuracy": right.sum(axis=1) / n,
        }

    shape = (1, strata, size, 2)
    # The point estimates are exactly those of reliability_bins (same summation order as ECE/MCE/RMS).
    point = reliability_bins(conf, flags, int(n_bins), adaptive=adaptive, convention=convention)
    estimate = {"ece": point.ece, "mce": point.mce, "rms": point.rms, "accuracy": float(flags.mean())}

    def resampled(draws: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        m = draws.reshape((draws.shape[0], *shape[1:])).astype(np.float64)
        noise = rng.standard_normal(m.shape)
        return stats(m, m * means.reshape(shape) + np.sqrt(m * variances.reshape(shape)) * noise)

    return _intervals(estimate, counts.reshape(strata, size * 2), resampled, n_resamples, seed, stratify, level)


def naive_bootstrap(
    statistic: Callable[..., float], *arrays: Any, n_resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> BootstrapInterval:
    """The textbook example-level percentile bootstrap: ``n_resamples`` draws of ``N`` indices.

    Slow (``n_resamples`` full passes); it is the reference the fast intervals are checked against.

    Parameters
    ----------
    statistic
        A function of the arrays, returning a number.
    *arrays
        The data, one row per example.
    n_resamples, seed, level
        Resamples, their seed and the interval's level.
    """
    _check_bootstrap_args(n_resamples, level)
    data = [np.asarray(a) for a in arrays]
    n = len(data[0])
    rng = np.random.default_rng(check_seed(seed))
    values = np.empty(n_resamples)
    for r in range(n_resamples):
        pick = rng.integers(0, n, size=n)
        values[r] = statistic(*(a[pick] for a in data))
    return _interval(statistic(*data), values, level, n_resamples, seed, False)


def intervals_json(intervals: Mapping[str, BootstrapInterval], prefix: str = "") -> dict[str, Any]:
    """``{"<name>_ci95": [low, high]}`` for each interval (the JSON outputs' keys).

    Parameters
    ----------
    intervals
        The intervals by name.
    prefix
        Put before each name.
    """
    suffix = f"_ci{round(next(iter(intervals.values())).level * 100)}" if intervals else "_ci95"
    return {f"{prefix}{name}{suffix}": iv.as_list() for name, iv in intervals.items()}


def interval_notes(intervals: Mapping[str, BootstrapInterval], prefix: str = "") -> dict[str, str]:
    """``{"<name>": note}`` for each interval whose point estimate lies outside it (:meth:`BootstrapInterval.note`).

    Parameters
    ----------
    intervals
        The intervals by name.
    prefix
        Put before each name.
    """
    found = {f"{prefix}{name}": iv.note(f"{prefix}{name}") for name, iv in intervals.items()}
    return {name: note for name, note in found.items() if note}


def bootstrap_json(intervals: Mapping[str, BootstrapInterval]) -> dict[str, Any]:
    """How the intervals were made: the ``bootstrap`` object of the JSON outputs.

    Parameters
    ----------
    intervals
        The intervals by name (all made alike).
    """
    first = next(iter(intervals.values()))
    return {
        "method": METHOD,
        "n_resamples": first.n_resamples,
        "seed": first.seed,
        "level": first.level,
        "stratified": first.stratified,
    }
