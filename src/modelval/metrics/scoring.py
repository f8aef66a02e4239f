"""Class-probability estimators: the class-wise ECE and the proper scoring rules (Brier score, NLL).

They take an ``(N, C)`` matrix of probabilities (rows summing to 1), or logits with ``logits=True``, and
``(N,)`` integer labels; the references they equal and the measured agreement are in ``docs/estimators.md``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from modelval.metrics.calibration import _searchsorted_even
from modelval.metrics.temperature import log_softmax, softmax
from modelval.metrics.validation import check_class_indices, check_n_bins, validate_logits, validate_probs


def _probs(probs: Any, labels: Any) -> tuple[np.ndarray, np.ndarray, np.dtype[Any]]:
    """float64 ``(N, C)`` probabilities, their class indices and the input's float dtype."""
    p, dtype = validate_probs(probs)
    return p, check_class_indices(labels, "labels", n=p.shape[0], num_classes=p.shape[1], scores="probs"), dtype


def classwise_calibration_error(probs: Any, labels: Any, n_bins: int = 15) -> float:
    """Class-wise (marginal) ECE: the mean over classes of the one-vs-rest ECE of ``p[:, k]`` against ``label == k``.

    Each ECE uses ``n_bins`` equal-width ``(lo, hi]`` bins; every class counts, also one that never occurs.
    Equals ``calibration.get_ece(probs, labels, num_bins=n_bins, mode="marginal")`` of uncertainty-calibration.

    Parameters
    ----------
    probs, labels
        ``(N, C)`` probabilities and the true class of each row.
    n_bins
        Bins of each class's ECE.
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
    """Multiclass Brier score: ``(1/N) sum_i sum_k (p_ik - 1[y_i == k])^2``, in [0, 2], computed in float64.

    Equals scikit-learn's ``brier_score_loss(labels, probs, labels=range(C), scale_by_half=False)``: not halved,
    so twice the binary Brier score for ``C = 2``.

    Parameters
    ----------
    probs_or_logits, labels
        ``(N, C)`` probabilities (or logits) and the true class of each row.
    logits
        The scores are logits: ``softmax(logits)`` is scored.
    """
    p, y = _probabilities(probs_or_logits, labels, logits)
    rows = np.arange(len(y))
    # sum_k (p_k - onehot_k)^2 = sum_k p_k^2 - 2 p_y + 1, without an (N, C) temporary.
    per_example = np.einsum("ij,ij->i", p, p) - 2.0 * p[rows, y] + 1.0
    return float(np.mean(per_example))


def negative_log_likelihood(probs_or_logits: Any, labels: Any, *, logits: bool = False) -> float:
    """Mean negative log-likelihood of the true class, ``-(1/N) sum_i log p_{i, y_i}``, computed in float64.

    From probabilities as scikit-learn's ``log_loss``: ``p_y`` clipped to ``[eps, 1 - eps]`` with ``eps`` the
    machine epsilon of the input's float dtype, rows not renormalised. From logits the exact log-softmax, as
    ``torch.nn.functional.cross_entropy``, so a confidently wrong prediction keeps its full cost.

    Parameters
    ----------
    probs_or_logits, labels
        ``(N, C)`` probabilities (or logits) and the true class of each row.
    logits
        The scores are logits.
    """
    if logits:
        z, y = validate_logits(probs_or_logits, labels)
        return float(-np.mean(log_softmax(z)[np.arange(len(y)), y]))
    p, y, dtype = _probs(probs_or_logits, labels)
    eps = float(np.finfo(dtype).eps)
    p_true = np.clip(p[np.arange(len(y)), y], eps, 1 - eps)
    return float(-np.mean(np.log(p_true)))
