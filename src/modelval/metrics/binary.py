"""Binary calibration: one positive-class probability (or one logit) per example, labels 0/1.

Two calibration errors are named apart: the **positive-class ECE** (:func:`binary_calibration_error`, the
card's ``ece``) compares, per bin of ``p = P(y = 1)``, the mean ``p`` with the fraction of positives, as
torchmetrics' ``binary_calibration_error``, netcal, scikit-learn's ``calibration_curve`` and
uncertainty-calibration do; the **top-label ECE** (:func:`binary_top_label_calibration_error`, the card's
``top_label_ece``) is the multiclass top-1 ECE of ``[1 - p, p]``, which folds the two halves of the reliability
diagram onto each other. Bins, logits, clipping and dtypes follow :mod:`modelval.metrics.calibration` and
:mod:`modelval.metrics.validation`; the conventions and references are in ``docs/binary.md``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import numpy as np

from modelval.metrics.bootstrap import BootstrapInterval, calibration_intervals
from modelval.metrics.calibration import Convention, ReliabilityBins, reliability_bins, top1_confidences
from modelval.metrics.estimators import (
    SmoothReliabilityCurve,
    debiased_l2_calibration_error,
    smooth_ece,
    smooth_reliability_curve,
)
from modelval.metrics.validation import (
    check_choice,
    check_n_bins,
    validate_binary,
    validate_binary_logits,
)
from modelval.metrics.validation import sigmoid as sigmoid  # the logistic link of the logits, also public here

Norm = Literal["l1", "l2", "max"]
NORMS: tuple[str, ...] = ("l1", "l2", "max")

#: ``ReliabilityBins.target`` of positive-class bins: what the reliability diagram's y-axis shows.
FRACTION_OF_POSITIVES = "fraction of positives"


def logit(p: np.ndarray, eps: float = float(np.finfo(np.float64).eps)) -> np.ndarray:
    """``log(p / (1 - p))`` of ``p`` clipped to ``[eps, 1 - eps]`` (float64 machine epsilon by default).

    The clipping keeps 0 and 1 finite (about -36.04 and +36.04) and is netcal's rule for turning
    probabilities into logits; ``log1p`` keeps ``1 - p`` accurate for small ``p``.

    Parameters
    ----------
    p
        Probabilities.
    eps
        The clipping margin.
    """
    clipped = np.clip(np.asarray(p, dtype=np.float64), eps, 1.0 - eps)
    return np.log(clipped) - np.log1p(-clipped)


def _norm_of(bins: ReliabilityBins, norm: Norm) -> float:
    if norm == "l1":
        return bins.ece
    if norm == "l2":
        return bins.rms
    check_choice(norm, "norm", NORMS, hint=" ('l1' ECE, 'l2' RMS, 'max' MCE)")
    return bins.mce


def binary_reliability_bins(
    probs: Any,
    labels: Any,
    n_bins: int = 15,
    *,
    logits: bool = False,
    adaptive: bool = False,
    convention: Convention = "default",
) -> ReliabilityBins:
    """Count, fraction of positives and mean positive-class probability per probability bin.

    The bins of :func:`~modelval.metrics.calibration.reliability_bins` on ``(p, y)``; the result's ``accuracy`` holds
    the fraction of positives and its ``target`` is ``"fraction of positives"``, so ``.ece``, ``.mce``, ``.rms`` are
    the positive-class errors.

    Parameters
    ----------
    probs, labels
        One positive-class probability (or logit) and one 0/1 label per example, shape ``(N,)`` or ``(N, 1)``.
    n_bins
        The number of bins.
    logits
        The scores are logits: ``sigmoid`` is applied.
    adaptive, convention
        As :func:`~modelval.metrics.calibration.reliability_bins`.
    """
    check_n_bins(n_bins)
    p, y = validate_binary(probs, labels, logits=logits)
    bins = reliability_bins(p, y, n_bins, adaptive=adaptive, convention=convention)
    return dataclasses.replace(bins, target=FRACTION_OF_POSITIVES)


def binary_calibration_error(
    probs: Any,
    labels: Any,
    n_bins: int = 15,
    *,
    norm: Norm = "l1",
    logits: bool = False,
    adaptive: bool = False,
    convention: Convention = "default",
) -> float:
    """Positive-class calibration error: ``norm="l1"`` ECE, ``"l2"`` RMS, ``"max"`` MCE.

    ``sum_m |B_m|/N |frac_pos(B_m) - mean_p(B_m)|`` over the bins of :func:`binary_reliability_bins`. Equals
    torchmetrics' ``binary_calibration_error(p, y, n_bins, norm)`` (``convention="torchmetrics"``, float64) and
    netcal's ``ECE(n_bins).measure(p, y)`` (default convention).

    Parameters
    ----------
    probs, labels, n_bins, logits, adaptive, convention
        As :func:`binary_reliability_bins`.
    norm
        ``"l1"``, ``"l2"`` or ``"max"``.
    """
    return _norm_of(
        binary_reliability_bins(probs, labels, n_bins, logits=logits, adaptive=adaptive, convention=convention), norm
    )


def binary_top_label(probs: Any, labels: Any, *, logits: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(confidence, correct)`` of a binary classifier's top label: ``max(1 - p, p)`` and whether it is right.

    The predicted class is the argmax of ``[1 - p, p]`` (a tie at 0.5 predicts the negative class):
    :func:`~modelval.metrics.calibration.top1_confidences` of that two-column matrix.

    Parameters
    ----------
    probs, labels, logits
        As :func:`binary_reliability_bins`.
    """
    p, y = validate_binary(probs, labels, logits=logits)
    two = np.stack([1 - p, p], axis=1)
    return top1_confidences(two, y.astype(np.int64))


def binary_top_label_calibration_error(
    probs: Any,
    labels: Any,
    n_bins: int = 15,
    *,
    norm: Norm = "l1",
    logits: bool = False,
    adaptive: bool = False,
    convention: Convention = "default",
) -> float:
    """Top-label calibration error of a binary classifier (confidence ``max(p, 1 - p)``), not the positive-class one.

    The multiclass top-1 error of ``[1 - p, p]``: torchmetrics' ``multiclass_calibration_error`` with
    ``num_classes=2`` and uncertainty-calibration's ``get_ece(probs2, labels, mode="top-label")``. Its
    confidences lie in [0.5, 1], so the bins below 0.5 stay empty.

    Parameters
    ----------
    probs, labels, n_bins, logits, adaptive, convention
        As :func:`binary_reliability_bins`.
    norm
        ``"l1"`` (ECE), ``"l2"`` (RMS) or ``"max"`` (MCE).
    """
    conf, correct = binary_top_label(probs, labels, logits=logits)
    return _norm_of(reliability_bins(conf, correct, n_bins, adaptive=adaptive, convention=convention), norm)


def binary_brier_score(probs: Any, labels: Any, *, logits: bool = False) -> float:
    """Binary Brier score ``(1/N) sum_i (p_i - y_i)^2``, in [0, 1]: scikit-learn's binary ``brier_score_loss``.

    Parameters
    ----------
    probs, labels, logits
        As :func:`binary_reliability_bins`.
    """
    p, y = validate_binary(probs, labels, logits=logits)
    diff = p.astype(np.float64) - y
    return float(np.mean(diff * diff))


def binary_negative_log_likelihood(probs: Any, labels: Any, *, logits: bool = False) -> float:
    """Mean binary cross-entropy ``-(1/N) sum_i [y_i log p_i + (1 - y_i) log(1 - p_i)]``, in float64.

    From probabilities ``p`` is clipped to ``[eps, 1 - eps]`` (the input's machine epsilon), as scikit-learn's
    ``log_loss``; from logits it is the exact ``softplus(z) - y z``, as
    ``torch.nn.functional.binary_cross_entropy_with_logits``.

    Parameters
    ----------
    probs, labels, logits
        As :func:`binary_reliability_bins`.
    """
    if logits:
        z, y = validate_binary_logits(probs, labels)
        losses = np.maximum(z, 0.0) - z * y + np.log1p(np.exp(-np.abs(z)))
        return float(np.mean(losses))
    p, y = validate_binary(probs, labels)
    eps = float(np.finfo(p.dtype).eps)
    q = np.clip(p.astype(np.float64), eps, 1 - eps)
    return float(-np.mean(np.where(y, np.log(q), np.log1p(-q))))


def binary_debiased_l2_calibration_error(
    probs: Any, labels: Any, n_bins: int = 15, *, logits: bool = False, squared: bool = False
) -> float:
    """Debiased L2 calibration error of the positive-class probability (Kumar, Liang & Ma 2019).

    :func:`~modelval.metrics.estimators.debiased_l2_calibration_error` on ``(p, y)``.

    Parameters
    ----------
    probs, labels, logits
        As :func:`binary_reliability_bins`.
    n_bins, squared
        As :func:`~modelval.metrics.estimators.debiased_l2_calibration_error`.
    """
    p, y = validate_binary(probs, labels, logits=logits)
    return debiased_l2_calibration_error(p, y, n_bins, squared=squared)


def binary_smooth_ece(probs: Any, labels: Any, *, logits: bool = False) -> float:
    """Smooth ECE of the positive-class probability (Blasiok & Nakkiran 2023): ``relplot.smECE(p, y)``.

    Parameters
    ----------
    probs, labels, logits
        As :func:`binary_reliability_bins`.
    """
    p, y = validate_binary(probs, labels, logits=logits)
    return smooth_ece(p, y)


def binary_smooth_reliability_curve(
    probs: Any, labels: Any, *, logits: bool = False, n_points: int = 200
) -> SmoothReliabilityCurve:
    """Smoothed fraction of positives against ``p``: :func:`~modelval.metrics.estimators.smooth_reliability_curve`.

    Parameters
    ----------
    probs, labels, logits
        As :func:`binary_reliability_bins`.
    n_points
        Points of the mesh.
    """
    p, y = validate_binary(probs, labels, logits=logits)
    return smooth_reliability_curve(p, y, n_points=n_points)


def binary_calibration_intervals(
    probs: Any,
    labels: Any,
    n_bins: int = 15,
    *,
    logits: bool = False,
    adaptive: bool = False,
    convention: Convention = "default",
    n_resamples: int = 1000,
    seed: int = 0,
    stratify: bool = False,
    level: float = 0.95,
) -> dict[str, BootstrapInterval]:
    """Percentile bootstrap intervals of the positive-class ECE, MCE, RMS and the positive rate.

    :func:`~modelval.metrics.bootstrap.calibration_intervals` on ``(p, y)``, its ``accuracy`` renamed
    ``positive_rate``; ``stratify=True`` keeps the numbers of positives and negatives fixed.

    Parameters
    ----------
    probs, labels, n_bins, logits, adaptive, convention
        As :func:`binary_reliability_bins`.
    n_resamples, seed, stratify, level
        As :func:`~modelval.metrics.bootstrap.calibration_intervals`.
    """
    p, y = validate_binary(probs, labels, logits=logits)
    found = calibration_intervals(
        p,
        y,
        n_bins,
        labels=y.astype(np.int64),
        adaptive=adaptive,
        convention=convention,
        n_resamples=n_resamples,
        seed=seed,
        stratify=stratify,
        level=level,
    )
    return {("positive_rate" if name == "accuracy" else name): value for name, value in found.items()}
