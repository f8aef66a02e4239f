"""Binary calibration: one positive-class probability (or one logit) per example, labels 0/1.

A binary classifier reports, for each example ``i``, ``p_i = P(y_i = 1)`` (or a logit ``z_i`` with
``p_i = sigmoid(z_i)``); the label ``y_i`` is 0 or 1. Two different calibration errors exist, and
this module names them apart:

* **Positive-class ECE** (:func:`binary_calibration_error`, the card's ``ece``): bin the ``p_i`` and
  compare, per bin, the mean ``p`` with the **fraction of positives** (``mean y``):

      ECE = sum_m |B_m| / N * |frac_pos(B_m) - mean_p(B_m)|

  This is what torchmetrics' ``binary_calibration_error`` (despite its docstring's "top-label"),
  netcal's ``ECE`` on 1-D input, scikit-learn's ``calibration_curve`` and uncertainty-calibration on
  1-D probabilities compute. MCE (``norm="max"``) and RMS (``norm="l2"``) follow from the same bins.
* **Top-label ECE of a binary classifier** (:func:`binary_top_label_calibration_error`, the card's
  ``top_label_ece``): the confidence is ``max(p, 1 - p)`` and the outcome whether the predicted class
  (positive iff ``p > 0.5``; a tie at exactly 0.5 predicts the negative class, as ``argmax`` over
  ``[1 - p, p]``) equals the label. It is the multiclass top-1 ECE of the two-column matrix
  ``[1 - p, p]``, and it can be small when the positive-class ECE is not (it folds the two halves of
  the reliability diagram onto each other).

Conventions (shared with :mod:`modelval.metrics.calibration`, whose binning is reused unchanged):

* Bins: ``numpy.linspace(0, 1, n_bins + 1)``, ``(lo, hi]`` with 0 in the first bin
  (``convention="default"``, scikit-learn's ``calibration_curve``); ``convention="torchmetrics"``
  gives ``[lo, hi)`` with a hidden ``[1, 1]`` bin, as torchmetrics 1.x; ``adaptive=True`` gives the
  equal-mass edges of ``calibration_curve(strategy="quantile")``. Empty bins count nowhere (no weight
  in ECE/RMS, skipped by MCE).
* Logits (``logits=True``): ``p = sigmoid(z)`` in float64, computed as ``1 / (1 + exp(-z))`` for
  ``z >= 0`` and ``exp(z) / (1 + exp(z))`` otherwise, so no overflow; ``|z| > 36.7`` gives exactly 1 or
  a value below 1e-16. Probabilities keep float32 precision for float16/float32 input (so
  ``convention="torchmetrics"`` bins them as torchmetrics does); everything else is float64.
* NLL from probabilities clips ``p`` to ``[eps, 1 - eps]`` (``eps`` the machine epsilon of the input's
  float dtype), as scikit-learn's ``log_loss``; from logits it is the exact
  ``softplus(z) - y z`` (``torch.nn.functional.binary_cross_entropy_with_logits``), no clipping.
* Brier: ``mean((p - y)^2)`` in [0, 1], scikit-learn's binary ``brier_score_loss`` (half the
  two-column multiclass Brier score of :func:`~modelval.metrics.estimators.brier_score`).

Inputs: ``probs`` of shape ``(N,)`` or ``(N, 1)`` (numpy, list or torch tensor), ``labels`` of shape
``(N,)`` (or ``(N, 1)``) with values 0/1 or bool. Validation lives in :func:`validate_binary`.
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
    binary_labels,
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


# --------------------------------------------------------------------------------------------------
# Positive-class calibration


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

    The bins of :func:`~modelval.metrics.calibration.reliability_bins` on ``(p, y)``, so every bin
    convention applies unchanged; the result's ``accuracy`` holds the fraction of positives and its
    ``target`` is ``"fraction of positives"`` (the plots label their y-axis with it). ``.ece``,
    ``.mce``, ``.rms`` are the positive-class errors; ``accuracy_interval()`` the Wilson intervals of
    the fractions of positives.
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

    ``sum_m |B_m|/N |frac_pos(B_m) - mean_p(B_m)|`` over the bins of :func:`binary_reliability_bins`.
    Equals ``torchmetrics.functional.classification.binary_calibration_error(p, y, n_bins, norm)`` on
    float64 input with ``convention="torchmetrics"``, and netcal's ``ECE(n_bins).measure(p, y)`` with
    the default convention (both differ only for a probability exactly on an inner bin edge).
    """
    return _norm_of(
        binary_reliability_bins(probs, labels, n_bins, logits=logits, adaptive=adaptive, convention=convention), norm
    )


# --------------------------------------------------------------------------------------------------
# Top-label calibration of a binary classifier


def binary_top_label(probs: Any, labels: Any, *, logits: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(confidence, correct)`` of a binary classifier's top label: ``max(1 - p, p)`` and 0/1 right.

    The predicted class is the argmax of ``[1 - p, p]``: positive iff ``p > 0.5``, negative at exactly
    0.5 (ties to the lowest index, as ``numpy.argmax`` and ``torch.argmax``). Computed by
    :func:`~modelval.metrics.calibration.top1_confidences` on that two-column matrix, so it is exactly
    the multiclass top-1 input of a two-class softmax.
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
    """Top-label calibration error of a binary classifier (confidence ``max(p, 1 - p)``), NOT the
    positive-class error of :func:`binary_calibration_error`.

    Equals the multiclass top-1 ECE of ``[1 - p, p]``: ``torchmetrics``' ``multiclass_calibration_error``
    with ``num_classes=2`` (``convention="torchmetrics"``) and uncertainty-calibration's
    ``get_ece(probs2, labels, mode="top-label")``. Its confidences lie in [0.5, 1], so the bins below
    0.5 stay empty.
    """
    conf, correct = binary_top_label(probs, labels, logits=logits)
    return _norm_of(reliability_bins(conf, correct, n_bins, adaptive=adaptive, convention=convention), norm)


# --------------------------------------------------------------------------------------------------
# Proper scoring rules, debiased and smooth estimators


def binary_brier_score(probs: Any, labels: Any, *, logits: bool = False) -> float:
    """Binary Brier score ``(1/N) sum_i (p_i - y_i)^2``, in [0, 1].

    Equals scikit-learn's ``brier_score_loss(labels, p)`` (binary input, default ``scale_by_half``),
    which is half the two-column multiclass score of :func:`~modelval.metrics.estimators.brier_score`.
    Computed in float64.
    """
    p, y = validate_binary(probs, labels, logits=logits)
    diff = p.astype(np.float64) - y
    return float(np.mean(diff * diff))


def binary_negative_log_likelihood(probs: Any, labels: Any, *, logits: bool = False) -> float:
    """Mean binary cross-entropy ``-(1/N) sum_i [y_i log p_i + (1 - y_i) log(1 - p_i)]``.

    From probabilities: ``p`` clipped to ``[eps, 1 - eps]`` with ``eps`` the machine epsilon of the
    input's float dtype (float64 for non-float input), as scikit-learn's ``log_loss(labels, p)``; a
    probability of exactly 0 for a positive costs ``-log(eps)`` (36.04 in float64). From logits
    (``logits=True``): ``softplus(z) - y z = max(z, 0) - y z + log1p(exp(-|z|))`` exactly, as
    ``torch.nn.functional.binary_cross_entropy_with_logits``, no clipping. Computed in float64.
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

    :func:`~modelval.metrics.estimators.debiased_l2_calibration_error` on ``(p, y)``: equal-mass bins,
    ``(lo, hi]``. Equals ``calibration.get_calibration_error(p, y, p=2, debias=True)`` of
    uncertainty-calibration on 1-D (binary) input with continuous scores.
    """
    p, y = validate_binary(probs, labels, logits=logits)
    return debiased_l2_calibration_error(p, y, n_bins, squared=squared)


def binary_smooth_ece(probs: Any, labels: Any, *, logits: bool = False) -> float:
    """Smooth ECE of the positive-class probability (Blasiok & Nakkiran 2023): ``relplot.smECE(p, y)``.

    :func:`~modelval.metrics.estimators.smooth_ece` on ``(p, y)``; relplot's own definition is binary.
    """
    p, y = validate_binary(probs, labels, logits=logits)
    return smooth_ece(p, y)


def binary_smooth_reliability_curve(
    probs: Any, labels: Any, *, logits: bool = False, n_points: int = 200
) -> SmoothReliabilityCurve:
    """Smoothed fraction of positives against ``p`` (:func:`~modelval.metrics.estimators.smooth_reliability_curve`).

    Returns a :class:`~modelval.metrics.estimators.SmoothReliabilityCurve` whose ``accuracy`` is the
    kernel-smoothed fraction of positives.
    """
    p, y = validate_binary(probs, labels, logits=logits)
    return smooth_reliability_curve(p, y, n_points=n_points)


# --------------------------------------------------------------------------------------------------
# Bootstrap intervals


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

    :func:`~modelval.metrics.bootstrap.calibration_intervals` on ``(p, y)`` (multinomial cell counts,
    the same bins), with its ``accuracy`` renamed ``positive_rate`` (the fraction of positives, which
    is what it is here). ``stratify=True`` keeps the number of positives and negatives fixed.
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


def positive_rate(labels: Any) -> float:
    """Fraction of positive labels.

    Parameters
    ----------
    labels
        0/1 labels, shape ``(N,)`` or ``(N, 1)``.
    """
    return float(binary_labels(labels).mean())
