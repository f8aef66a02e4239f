"""Multilabel calibration: ``(N, L)`` sigmoid scores against an ``(N, L)`` 0/1 label matrix.

Each label is its own binary problem: every number is computed per label with the estimators of
:mod:`modelval.metrics.binary` (positive-class ECE, MCE, RMS, Brier, NLL, debiased L2, smooth ECE) and then
summarised as ``macro`` (the mean over labels), ``weighted`` (weighted by each label's positives, scikit-learn's
``average="weighted"``; undefined when no label has one) and ``micro`` (on the ``N * L`` pooled pairs, which
equals macro for the Brier score and the NLL). ``docs/binary.md`` has the details.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from modelval.errors import InputValidationError
from modelval.metrics.binary import (
    NORMS,
    binary_brier_score,
    binary_calibration_error,
    binary_calibration_intervals,
    binary_negative_log_likelihood,
    binary_reliability_bins,
)
from modelval.metrics.calibration import Convention, ReliabilityBins
from modelval.metrics.estimators import debiased_l2_calibration_error, smooth_ece
from modelval.metrics.validation import check_choice, check_n_bins, validate_multilabel

Average = Literal["macro", "micro", "weighted"]
AVERAGES: tuple[str, ...] = ("macro", "micro", "weighted")
#: The per-label numbers that are summarised (keys of :meth:`MultilabelCalibration.summary`).
METRICS: tuple[str, ...] = ("ece", "mce", "rms", "brier", "nll", "debiased_l2", "smece")

_NO_POSITIVES = "no label has a positive example, so the positive-weighted average is 0/0"


@dataclass(frozen=True)
class LabelCalibration:
    """The binary calibration numbers of one label (one row of the per-label table)."""

    index: int
    name: str
    n_positive: int
    prevalence: float  # fraction of examples with the label
    ece: float
    mce: float
    rms: float
    brier: float
    nll: float
    debiased_l2: float
    smece: float
    bins: ReliabilityBins  # fraction of positives per bin (target "fraction of positives")
    ece_ci95: tuple[float, float] | None = None  # percentile bootstrap of this label's ECE (examples resampled)

    def record(self) -> dict[str, Any]:
        """The JSON row of the per-label table (no bins)."""
        row: dict[str, Any] = {
            "label": self.name,
            "index": self.index,
            "n_positive": self.n_positive,
            "prevalence": self.prevalence,
        }
        row.update({metric: getattr(self, metric) for metric in METRICS})
        if self.ece_ci95 is not None:
            row["ece_ci95"] = list(self.ece_ci95)
        row["effective_bins"] = self.bins.effective_bins
        return row


@dataclass(frozen=True)
class MultilabelCalibration:
    """Per-label calibration and its macro / micro / weighted summaries (:func:`multilabel_calibration`)."""

    labels: tuple[LabelCalibration, ...]
    micro: dict[str, float]  # each metric of METRICS on the pooled (p_ik, y_ik) pairs
    micro_bins: ReliabilityBins  # the pooled reliability bins
    n: int
    n_bins: int
    convention: str
    adaptive: bool

    @property
    def n_labels(self) -> int:
        return len(self.labels)

    def summary(self, metric: str = "ece") -> dict[str, float | None]:
        """``{"macro": ..., "micro": ..., "weighted": ...}`` for one of :data:`METRICS`.

        ``weighted`` is ``None`` when no label has a positive example (the weights would be 0/0).

        Parameters
        ----------
        metric
            The number summarised.
        """
        check_choice(metric, "metric", METRICS)
        values = np.array([getattr(label, metric) for label in self.labels], dtype=np.float64)
        macro, weighted = _averages(values, np.array([label.n_positive for label in self.labels]))
        return {"macro": macro, "micro": self.micro[metric], "weighted": weighted}

    def table(self) -> list[dict[str, Any]]:
        """The per-label table: one JSON-ready row per label."""
        return [label.record() for label in self.labels]


def _names(label_names: Sequence[str] | None, count: int) -> list[str]:
    if label_names is None:
        return [str(k) for k in range(count)]
    names = [str(n) for n in label_names]
    if len(names) != count:
        raise InputValidationError(f"label_names has {len(names)} names for {count} label columns; give one per column")
    return names


def _averages(values: np.ndarray, positives: np.ndarray) -> tuple[float, float | None]:
    """The mean over labels, and the mean weighted by their positives (``None`` when no label has one)."""
    weights = positives.astype(np.float64)
    return float(values.mean()), float(np.dot(weights, values) / weights.sum()) if weights.sum() > 0 else None


def _binary_numbers(p: np.ndarray, y: np.ndarray, n_bins: int, bins_options: dict[str, Any]) -> dict[str, Any]:
    bins = binary_reliability_bins(p, y, n_bins, **bins_options)
    return {
        "bins": bins,
        "ece": bins.ece,
        "mce": bins.mce,
        "rms": bins.rms,
        "brier": binary_brier_score(p, y),
        "nll": binary_negative_log_likelihood(p, y),
        "debiased_l2": debiased_l2_calibration_error(p, y, n_bins),
        "smece": smooth_ece(p, y),
    }


def multilabel_calibration(
    probs: Any,
    labels: Any,
    n_bins: int = 15,
    *,
    logits: bool = False,
    adaptive: bool = False,
    convention: Convention = "default",
    label_names: Sequence[str] | None = None,
    n_bootstrap: int = 0,
    seed: int = 0,
    stratify: bool = False,
) -> MultilabelCalibration:
    """Per-label binary calibration of ``(N, L)`` scores and its summaries (see the module docstring).

    ``n_bootstrap > 0`` adds each label's percentile bootstrap interval of the ECE
    (:func:`~modelval.metrics.binary.binary_calibration_intervals` of that column). No interval is given for the
    summaries: resampling an example moves its ``L`` label decisions together, which the cell bootstrap (it draws
    each pair independently) cannot reproduce.

    Parameters
    ----------
    probs, labels
        ``(N, L)`` scores and the ``(N, L)`` 0/1 label matrix.
    n_bins, logits, adaptive, convention
        As :func:`~modelval.metrics.binary.binary_reliability_bins`.
    label_names
        One name per label column (default: the column indices).
    n_bootstrap, seed, stratify
        As :func:`~modelval.metrics.bootstrap.calibration_intervals`; 0 resamples: no intervals.
    """
    check_n_bins(n_bins)
    p, y = validate_multilabel(probs, labels, logits=logits)
    n, count = p.shape
    names = _names(label_names, count)
    bins_options: dict[str, Any] = {"adaptive": adaptive, "convention": convention}
    rows = []
    for k in range(count):
        interval = None
        if n_bootstrap:
            found = binary_calibration_intervals(
                p[:, k], y[:, k], int(n_bins), **bins_options, n_resamples=n_bootstrap, seed=seed, stratify=stratify
            )["ece"]
            interval = (found.low, found.high)
        numbers = _binary_numbers(p[:, k], y[:, k], int(n_bins), bins_options)
        positives, prevalence = int(y[:, k].sum()), float(y[:, k].mean())
        rows.append(LabelCalibration(k, names[k], positives, prevalence, ece_ci95=interval, **numbers))
    pooled = _binary_numbers(p.reshape(-1), y.reshape(-1), int(n_bins), bins_options)
    micro_bins = pooled.pop("bins")
    return MultilabelCalibration(tuple(rows), pooled, micro_bins, int(n), int(n_bins), convention, adaptive)


def multilabel_calibration_error(
    probs: Any,
    labels: Any,
    n_bins: int = 15,
    *,
    average: Average | None = "macro",
    norm: Literal["l1", "l2", "max"] = "l1",
    logits: bool = False,
    adaptive: bool = False,
    convention: Convention = "default",
) -> float | np.ndarray:
    """Multilabel positive-class calibration error: ``norm="l1"`` ECE, ``"l2"`` RMS, ``"max"`` MCE.

    ``average="macro"`` (mean over labels), ``"weighted"`` (weighted by each label's positives),
    ``"micro"`` (pooled pairs), or ``None`` for the ``(L,)`` per-label values. Raises
    :class:`~modelval.errors.InputValidationError` for ``"weighted"`` when no label has a positive.

    Parameters
    ----------
    probs, labels
        ``(N, L)`` scores and the ``(N, L)`` 0/1 label matrix.
    n_bins, logits, adaptive, convention
        As :func:`~modelval.metrics.binary.binary_reliability_bins`.
    average
        ``"macro"``, ``"weighted"``, ``"micro"`` or ``None``.
    norm
        ``"l1"`` (ECE), ``"l2"`` (RMS) or ``"max"`` (MCE).
    """
    check_n_bins(n_bins)
    if average is not None:
        check_choice(average, "average", AVERAGES, hint=" or None (per label)")
    check_choice(norm, "norm", NORMS, hint=" ('l1' ECE, 'l2' RMS, 'max' MCE)")
    p, y = validate_multilabel(probs, labels, logits=logits)
    options: dict[str, Any] = {"norm": norm, "adaptive": adaptive, "convention": convention}
    if average == "micro":
        return binary_calibration_error(p.reshape(-1), y.reshape(-1), n_bins, **options)
    per_label = np.array([binary_calibration_error(p[:, k], y[:, k], n_bins, **options) for k in range(p.shape[1])])
    if average is None:
        return per_label
    macro, weighted = _averages(per_label, y.sum(axis=0))
    if average == "macro":
        return macro
    if weighted is None:
        raise InputValidationError(f"average='weighted' is undefined: {_NO_POSITIVES}; use average='macro'")
    return weighted
