"""Top-1 calibration: reliability bins, ECE, MCE and RMS calibration error.

A prediction contributes its top-1 confidence ``conf`` and whether the top-1 class was right; with the
confidences grouped into bins ``B_1 .. B_M``:

    ECE = sum_m |B_m| / N * |acc(B_m) - conf(B_m)|          (Guo et al. 2017, eq. 3)
    MCE = max_m over non-empty bins |acc(B_m) - conf(B_m)|
    RMS = sqrt(sum_m |B_m| / N * (acc(B_m) - conf(B_m))^2)

``convention="default"``: ``n_bins`` uniform bins ``(lo, hi]`` (edges ``numpy.linspace(0, 1, n_bins + 1)``),
a confidence of exactly 0 in the first, as scikit-learn's ``calibration_curve``. ``convention="torchmetrics"``
reproduces torchmetrics 1.x: bins ``[lo, hi)`` plus a hidden ``[1, 1]`` bin (issue #3510), edges in the
confidences' precision, sums in float64. ``adaptive=True``: equal-mass bins at scikit-learn's quantile edges;
tied confidences are never split, and the empty bins they leave are dropped (``effective_bins`` says how many
bins hold examples). The peers' binning and what is matched to which precision: ``docs/metrics.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from modelval.errors import InputValidationError
from modelval.metrics.validation import (
    binning_dtype,
    check_choice,
    check_class_indices,
    check_confidences,
    check_n_bins,
    validate_probs,
)
from modelval.proportions import wilson_interval

Convention = Literal["default", "torchmetrics"]
CONVENTIONS: tuple[str, ...] = ("default", "torchmetrics")

#: The one default bin count of every ECE in the library and on the command line (``--bins``): 15, as Guo et al. 2017.
DEFAULT_N_BINS = 15


def top1_confidences(probs: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    """Top-1 confidence and correctness from an ``(N, C)`` matrix of probabilities.

    Every row must sum to 1 within ``PROB_SUM_TOL`` (1e-3): sigmoid or multilabel scores are rejected.
    The confidences keep float32 precision for float16/float32 input (float64 otherwise).
    Ties go to the lowest class index (``numpy.argmax``, same as ``torch.max`` on CPU).

    Parameters
    ----------
    probs, labels
        ``(N, C)`` probabilities and the true class of each row.
    """
    p, dtype = validate_probs(probs, min_classes=1, fix="apply softmax to the logits", hint="")
    y = check_class_indices(labels, "labels", n=p.shape[0], num_classes=p.shape[1], scores="probs")
    # float32 probabilities keep float32 confidences, so convention="torchmetrics" bins them in float32.
    return p.max(axis=1).astype(binning_dtype(dtype)), (p.argmax(axis=1) == y).astype(np.float64)


#: What a bin's ``accuracy`` measures: the top-1 accuracy, or (binary, positive-class calibration)
#: the fraction of examples whose label is positive.
TARGETS: tuple[str, ...] = ("accuracy", "fraction of positives")


@dataclass(frozen=True)
class ReliabilityBins:
    """Per-bin statistics. Arrays have one entry per bin; empty bins have NaN accuracy/confidence/gap.

    ``target`` says what ``accuracy`` holds: ``"accuracy"`` (top-1 confidences against right/wrong, the
    default) or ``"fraction of positives"`` (binary positive-class probabilities against 0/1 labels,
    :mod:`modelval.metrics.binary`); the arithmetic is the same, the plots and records name it.
    """

    edges: np.ndarray  # lower and upper edge of every bin, shape (n, 2)
    counts: np.ndarray
    accuracy: np.ndarray
    confidence: np.ndarray
    convention: str
    adaptive: bool
    n_bins: int  # bins requested; torchmetrics' convention adds one hidden bin for conf == 1.0
    target: str = "accuracy"  # one of TARGETS

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    @property
    def effective_bins(self) -> int:
        """Number of non-empty bins (fewer than ``n_bins`` when bins are empty or, adaptive, ties merged)."""
        return int(np.count_nonzero(self.counts))

    @property
    def min_bin_count(self) -> int:
        """Smallest number of examples in a non-empty bin."""
        return int(self.counts[self.counts > 0].min())

    def summary(self) -> dict[str, float | int | str | bool]:
        """ECE, MCE, RMS and how they were binned: the calibration fields of the JSON outputs."""
        return {
            "ece": self.ece,
            "mce": self.mce,
            "rms": self.rms,
            "n_bins": self.n_bins,
            "effective_bins": self.effective_bins,
            "min_bin_count": self.min_bin_count,
            "convention": self.convention,
            "adaptive": self.adaptive,
        }

    @property
    def gap(self) -> np.ndarray:
        """``|accuracy - confidence|`` per bin (NaN for empty bins)."""
        return np.abs(self.accuracy - self.confidence)

    @property
    def weights(self) -> np.ndarray:
        return self.counts / self.total

    @property
    def ece(self) -> float:
        nonempty = self.counts > 0
        return float(np.sum(self.weights[nonempty] * self.gap[nonempty]))

    @property
    def mce(self) -> float:
        nonempty = self.counts > 0
        return float(np.max(self.gap[nonempty]))

    @property
    def rms(self) -> float:
        nonempty = self.counts > 0
        return float(math.sqrt(np.sum(self.weights[nonempty] * self.gap[nonempty] ** 2)))

    @property
    def correct(self) -> np.ndarray:
        """Number of right predictions per bin."""
        return np.rint(np.nan_to_num(self.accuracy) * self.counts).astype(np.int64)

    def accuracy_interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Wilson score interval of each bin's accuracy (NaN for empty bins).

        Parameters
        ----------
        level
            The confidence level.
        """
        return wilson_interval(self.correct, self.counts, level)

    def as_records(self) -> list[dict[str, Any]]:
        """One JSON-friendly dict per bin (NaN for empty bins becomes None), with its Wilson 95% interval.

        The per-bin rate is keyed ``accuracy`` (``accuracy_ci95``), or ``fraction_positive``
        (``fraction_positive_ci95``) for binary positive-class bins.
        """

        def clean(x: float) -> float | None:
            return None if math.isnan(x) else float(x)

        key = "accuracy" if self.target == "accuracy" else "fraction_positive"
        low, high = self.accuracy_interval()
        return [
            {
                "lo": float(lo),
                "hi": float(hi),
                "count": int(c),
                key: clean(a),
                f"{key}_ci95": None if c == 0 else [float(wl), float(wh)],
                "confidence": clean(m),
                "gap": clean(g),
            }
            for (lo, hi), c, a, m, g, wl, wh in zip(
                self.edges, self.counts, self.accuracy, self.confidence, self.gap, low, high, strict=True
            )
        ]


def _searchsorted_even(edges: np.ndarray, values: np.ndarray, side: Literal["left", "right"]) -> np.ndarray:
    """Exactly ``np.searchsorted(edges, values, side)`` for strictly increasing, evenly spaced ``edges``.

    A binary search per value is the slowest step of binning 10 million confidences. Here the
    position is guessed arithmetically and then checked against the defining inequalities
    ``edges[s-1] <= v < edges[s]`` (side="right"; ``<`` / ``<=`` swapped for "left"); only values
    that fail the check (a rounding slip right at an edge) go through ``np.searchsorted``. The
    result is therefore identical to searchsorted, not an approximation.
    """
    m = len(edges)
    if m < 2 or not np.all(np.diff(edges) > 0):
        return np.searchsorted(edges, values, side=side)
    scale = (m - 1) / float(edges[-1] - edges[0])
    guess = values - edges[0]
    guess *= scale
    np.floor(guess, out=guess)
    positions = guess.astype(np.intp)
    positions += 1
    np.clip(positions, 0, m, out=positions)
    inf = np.array([np.inf], dtype=edges.dtype)
    below = np.concatenate([-inf, edges])  # below[s] = edges[s-1], -inf for s = 0
    above = np.concatenate([edges, inf])  # above[s] = edges[s], +inf for s = m
    low, high = np.take(below, positions), np.take(above, positions)
    if side == "right":
        wrong = (low > values) | (high <= values)
    else:
        wrong = (low >= values) | (high < values)
    slips = np.flatnonzero(wrong)
    if slips.size:
        positions[slips] = np.searchsorted(edges, values[slips], side=side)
    return positions


def _bin_indices(conf: np.ndarray, n_bins: int, adaptive: bool, convention: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Return (bin index per example, (n, 2) edges, number of bins)."""
    if convention == "torchmetrics":
        if adaptive:
            raise InputValidationError(
                "torchmetrics has no adaptive binning; use convention='default' with adaptive=True"
            )
        import torch  # torch is a core dependency; its linspace is what torchmetrics compares against

        torch_dtype = torch.float64 if conf.dtype == np.float64 else torch.float32
        bounds = torch.linspace(0, 1, n_bins + 1, dtype=torch_dtype).numpy()
        # bucketize(right=True) - 1 == searchsorted(side="right") - 1: bins [lo, hi); 1.0 -> index n_bins
        idx = _searchsorted_even(bounds, conf.astype(bounds.dtype, copy=False), "right")
        idx -= 1
        lows = bounds.astype(np.float64)
        edges = np.stack([lows, np.append(lows[1:], 1.0)], axis=1)
        return idx, edges, n_bins + 1
    check_choice(convention, "convention", CONVENTIONS)
    if adaptive:
        # Same edges as sklearn.calibration.calibration_curve(strategy="quantile").
        bounds = np.percentile(conf, np.linspace(0, 1, n_bins + 1) * 100)
    else:
        bounds = np.linspace(0.0, 1.0, n_bins + 1)
    # searchsorted(side="left") on the inner edges gives (lo, hi]; values <= first inner edge -> bin 0.
    # Quantile edges may repeat or be uneven, so only uniform edges take the arithmetic shortcut.
    search = np.searchsorted if adaptive else _searchsorted_even
    idx = search(bounds[1:-1], conf, side="left")
    edges = np.stack([bounds[:-1], bounds[1:]], axis=1)
    return idx, edges, n_bins


def reliability_bins(
    confidences: Any, correct: Any, n_bins: int = 15, *, adaptive: bool = False, convention: Convention = "default"
) -> ReliabilityBins:
    """Count, accuracy and mean confidence per confidence bin (see the module docstring for the edges).

    The bins from which ECE, MCE and RMS are computed, and which a reliability diagram draws: bin ``m`` holds
    the predictions whose top-1 confidence falls in it, ``accuracy[m]`` is the fraction of them that are right
    and ``confidence[m]`` their mean confidence. ``convention="default"``: ``n_bins`` uniform bins
    ``(lo, hi]`` with a confidence of 0 in the first; ``"torchmetrics"``: torchmetrics 1.x's ``[lo, hi)`` bins
    plus a hidden ``[1, 1]`` bin; ``adaptive``: equal-mass bins (scikit-learn's quantile edges), ties kept
    in one bin and empty bins dropped.

    Parameters
    ----------
    confidences
        Top-1 confidences in [0, 1], one per prediction (numpy array, torch tensor or list).
    correct
        Whether each prediction was right: 0/1 or bool, the same length.
    n_bins
        The number of bins requested (15, as Guo et al. 2017).
    adaptive
        Equal-mass (quantile) bins instead of uniform ones.
    convention
        ``"default"`` or ``"torchmetrics"`` (see the module docstring).

    Returns
    -------
    ReliabilityBins
        Per-bin ``edges``, ``counts``, ``accuracy`` and ``confidence`` (NaN for an empty bin), with ``ece``,
        ``mce``, ``rms``, ``effective_bins`` (non-empty bins), ``min_bin_count`` and each bin's Wilson
        interval (``accuracy_interval()``).

    Examples
    --------
    >>> from modelval.metrics import reliability_bins
    >>> conf = [0.0, 0.25, 0.5, 0.5, 0.75, 1.0, 1.0, 0.6, 0.9, 0.3]
    >>> correct = [0, 1, 0, 1, 1, 1, 0, 1, 1, 0]
    >>> bins = reliability_bins(conf, correct, n_bins=4)
    >>> bins.counts.tolist(), bins.accuracy.round(4).tolist()
    ([2, 3, 2, 3], [0.5, 0.3333, 1.0, 0.6667])
    >>> bins.confidence.round(4).tolist(), round(bins.ece, 4), round(bins.mce, 4)
    ([0.125, 0.4333, 0.675, 0.9667], 0.26, 0.375)
    """
    check_n_bins(n_bins)
    conf, flags = check_confidences(confidences, correct)
    # torchmetrics bins float32 input in float32 and float64 input in float64; the default convention uses float64.
    conf = conf.astype(binning_dtype(conf.dtype) if convention == "torchmetrics" else np.float64, copy=False)
    idx, edges, size = _bin_indices(conf, int(n_bins), adaptive, convention)
    # One integer bincount gives per-bin counts of wrong (column 0) and right (column 1) predictions:
    # the same numbers as summing 0/1 weights, without converting 10 million flags to float64.
    pairs = idx * 2
    pairs += flags
    both = np.bincount(pairs, minlength=2 * size).reshape(size, 2)
    counts = both.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = both[:, 1] / counts
        confidence = np.bincount(idx, weights=conf, minlength=size) / counts
    if adaptive:
        # Ties are never split (the bin depends on the value only); the empty bins they leave are dropped.
        keep = counts > 0
        edges, counts, accuracy, confidence = edges[keep], counts[keep], accuracy[keep], confidence[keep]
    return ReliabilityBins(
        edges=edges,
        counts=counts,
        accuracy=accuracy,
        confidence=confidence,
        convention=convention,
        adaptive=adaptive,
        n_bins=int(n_bins),
    )


def expected_calibration_error(
    confidences: Any, correct: Any, n_bins: int = 15, *, adaptive: bool = False, convention: Convention = "default"
) -> float:
    """ECE: bin-mass-weighted mean of ``|accuracy - confidence|`` over the confidence bins.

    The binned top-1 expected calibration error of Guo et al. (2017, eq. 3),
    ``sum_m |B_m| / N * |acc(B_m) - conf(B_m)|``, with the bins of :func:`reliability_bins`: ``n_bins``
    uniform bins ``(lo, hi]`` with a confidence of 0 in the first (``convention="default"``, as scikit-learn's
    ``calibration_curve``), torchmetrics 1.x's ``[lo, hi)`` bins (``"torchmetrics"``), or equal-mass bins
    (``adaptive``). For an interval see :func:`modelval.metrics.bootstrap.calibration_intervals`.

    Parameters
    ----------
    confidences
        Top-1 confidences in [0, 1], one per prediction (numpy array, torch tensor or list); for an ``(N, C)``
        probability matrix use :func:`top1_confidences` first.
    correct
        Whether each prediction was right: 0/1 or bool, the same length.
    n_bins
        The number of bins; default 15 (:data:`DEFAULT_N_BINS`, as Guo et al. 2017), as every ECE of the library
        and the commands' ``--bins``.
    adaptive
        Equal-mass (quantile) bins instead of uniform ones.
    convention
        ``"default"`` or ``"torchmetrics"`` (see the module docstring).

    Returns
    -------
    float
        The ECE, in [0, 1].

    Examples
    --------
    Confidences on the edges of 4 bins, where the two conventions bin differently:

    >>> from modelval.metrics import expected_calibration_error
    >>> conf = [0.0, 0.25, 0.5, 0.5, 0.75, 1.0, 1.0, 0.6, 0.9, 0.3]
    >>> correct = [0, 1, 0, 1, 1, 1, 0, 1, 1, 0]
    >>> round(expected_calibration_error(conf, correct, n_bins=4), 4)
    0.26
    >>> round(expected_calibration_error(conf, correct, n_bins=4, convention="torchmetrics"), 4)
    0.22
    """
    return reliability_bins(confidences, correct, n_bins, adaptive=adaptive, convention=convention).ece


def maximum_calibration_error(
    confidences: Any, correct: Any, n_bins: int = 15, *, adaptive: bool = False, convention: Convention = "default"
) -> float:
    """MCE: the largest ``|accuracy - confidence|`` over the non-empty bins.

    Parameters
    ----------
    confidences, correct, n_bins, adaptive, convention
        As :func:`expected_calibration_error`.
    """
    return reliability_bins(confidences, correct, n_bins, adaptive=adaptive, convention=convention).mce


def rms_calibration_error(
    confidences: Any, correct: Any, n_bins: int = 15, *, adaptive: bool = False, convention: Convention = "default"
) -> float:
    """RMS calibration error (torchmetrics' ``norm="l2"`` without debiasing).

    Parameters
    ----------
    confidences, correct, n_bins, adaptive, convention
        As :func:`expected_calibration_error`.
    """
    return reliability_bins(confidences, correct, n_bins, adaptive=adaptive, convention=convention).rms


class CalibrationError:
    """Accumulates top-1 confidences over batches; ``compute()`` returns the :class:`ReliabilityBins`.

    ``update(confidences, correct)`` takes 1-D confidences and 0/1 flags; ``update_probs(probs, labels)``
    takes an ``(N, C)`` probability matrix. Inputs are validated on every update, so a bad batch is
    reported where it happens.
    """

    def __init__(self, n_bins: int = 15, *, adaptive: bool = False, convention: Convention = "default") -> None:
        check_n_bins(n_bins)
        check_choice(convention, "convention", CONVENTIONS)
        self.n_bins = int(n_bins)
        self.adaptive = adaptive
        self.convention: Convention = convention
        self.reset()

    def reset(self) -> None:
        self._conf: list[np.ndarray] = []
        self._correct: list[np.ndarray] = []

    def update(self, confidences: Any, correct: Any) -> None:
        """Add a batch.

        Parameters
        ----------
        confidences, correct
            Top-1 confidences in [0, 1] and whether each prediction was right (0/1 or bool).
        """
        conf, flags = check_confidences(confidences, correct)
        # float32 batches stay float32 (binned in float32 by convention="torchmetrics"); others become float64
        self._conf.append(conf.astype(binning_dtype(conf.dtype)))
        self._correct.append(flags.astype(np.float64))

    def update_probs(self, probs: Any, labels: Any) -> None:
        """Add a batch of probabilities.

        Parameters
        ----------
        probs, labels
            ``(N, C)`` probabilities and the true class of each row.
        """
        self.update(*top1_confidences(probs, labels))

    def compute(self) -> ReliabilityBins:
        if not self._conf:
            raise InputValidationError("CalibrationError.compute() called before any update()")
        return reliability_bins(
            np.concatenate(self._conf),
            np.concatenate(self._correct),
            self.n_bins,
            adaptive=self.adaptive,
            convention=self.convention,
        )
