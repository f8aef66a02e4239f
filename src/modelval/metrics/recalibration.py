"""A post-hoc calibrator fitted on validation logits, scored on test logits before and after it
(``modelval calibration temperature``; :func:`modelval.api.recalibrate` adds the figure).

Logits files are ``.npz`` with arrays ``logits`` (N, C) and ``labels`` (N,), or ``.pt`` with a dict of those
tensors (:func:`~modelval.metrics.temperature.load_logits_file`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np

from modelval import jsonio
from modelval.errors import DataError, InputValidationError
from modelval.metrics.calibration import reliability_bins, top1_confidences
from modelval.metrics.predictions import JSONReport
from modelval.metrics.scoring import brier_score, negative_log_likelihood
from modelval.metrics.temperature import TemperatureSweepPoint, load_logits_file, softmax
from modelval.metrics.validation import check_choice, check_n_bins, validate_logits

#: The methods: logit scalings, then top-label calibrators of the top-1 confidence.
SCALINGS = ("temperature", "vector", "matrix")
TOP_LABEL_CALIBRATORS = ("histogram", "isotonic")
METHODS = SCALINGS + TOP_LABEL_CALIBRATORS
#: Logits given as a file (``.npz`` / ``.pt``) or in memory as ``(logits, labels)``.
LogitsSource = str | os.PathLike[str] | tuple[Any, Any]


@dataclass
class RecalibrationReport(JSONReport):
    """A post-hoc calibrator fitted on validation logits and its NLL/Brier/ECE before and after on test logits
    (``modelval calibration temperature``)."""

    method: str
    n_bins: int
    #: ``nll``, ``brier``, ``ece``, ``mce``, ``rms``, ``effective_bins``, ``min_bin_count``, ``accuracy`` on the
    #: test logits as given (``before``) and after the calibrator (``after``).
    before: dict[str, Any]
    after: dict[str, Any]
    val_examples: int
    test_examples: int
    #: The fitted :class:`~modelval.metrics.temperature.LogitScaler`, or the top-label calibrator.
    calibrator: Any = field(repr=False)
    #: A logit scaling's fit: whether it reached an interior optimum, and its ODIR weights (``None``: none given).
    converged: bool | None = None
    odir: tuple[float, float] | None = None
    #: NLL, ECE and accuracy on the test logits at fixed temperatures (logit scalings only).
    sweep: list[TemperatureSweepPoint] = field(default_factory=list)
    #: The ECE-vs-temperature figure, when one was drawn.
    written: list[Path] = field(default_factory=list)

    @property
    def temperature(self) -> float | None:
        """The fitted temperature of ``method="temperature"``; ``None`` for the other methods."""
        return self.calibrator.temperature if self.method == "temperature" else None

    @property
    def top_label(self) -> bool:
        """A top-label calibrator: it maps the top-1 confidence only, so ``after`` has no NLL or Brier score."""
        return self.method in TOP_LABEL_CALIBRATORS

    def to_dict(self) -> dict[str, Any]:
        """The numbers as the command's ``--json`` prints them."""
        if self.top_label:
            return {"method": self.method, "n_bins": self.n_bins, "before": self.before, "after": self.after}
        result: dict[str, Any] = {
            "method": self.method,
            "temperature": self.temperature,
            "converged": self.converged,
            "odir": None if self.odir is None else list(self.odir),
            "n_bins": self.n_bins,
            "before": self.before,
            "after": self.after,
            "sweep": [vars(point) for point in self.sweep],
        }
        if self.written:
            result["written"] = [str(path) for path in self.written]
        return result


def _logits(source: LogitsSource) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(source, tuple):
        if len(source) != 2:
            raise InputValidationError(f"logits in memory are a pair (logits, labels), got {len(source)} items")
        return validate_logits(*source)
    return load_logits_file(Path(source))


def _scores(logits: np.ndarray, labels: np.ndarray, confidences: np.ndarray, correct: np.ndarray,
            n_bins: int, nll: Any) -> dict[str, Any]:  # fmt: skip
    """NLL and Brier score (``nll`` for both when there is no distribution), the binned top-1 numbers, accuracy."""
    # NLL from the exact log-softmax of the logits (as torch.nn.functional.cross_entropy), never from clipped
    # probabilities: a true-class probability that underflows still gets its exact -log p.
    bins = reliability_bins(confidences, correct, n_bins)
    return {
        "nll": negative_log_likelihood(logits, labels, logits=True) if nll is None else nll,
        "brier": brier_score(logits, labels, logits=True) if nll is None else nll,
        "ece": bins.ece,
        "mce": bins.mce,
        "rms": bins.rms,
        "effective_bins": bins.effective_bins,
        "min_bin_count": bins.min_bin_count,
        "accuracy": float(np.mean(correct)),
    }


def recalibration(
    val: LogitsSource,
    test: LogitsSource,
    *,
    method: Literal["temperature", "vector", "matrix", "histogram", "isotonic"] = "temperature",
    n_bins: int = 15,
    odir: tuple[float, float] | None = None,
    sweep: Sequence[float] = (0.5, 1.0, 1.5, 2.0),
) -> RecalibrationReport:
    """The numbers of :func:`modelval.api.recalibrate`, which also draws their figure.

    Parameters
    ----------
    val, test, method, n_bins, odir, sweep
        As :func:`modelval.api.recalibrate`.
    """
    from modelval.metrics.calibrators import HistogramBinningCalibrator, IsotonicCalibrator, calibrate_top_label
    from modelval.metrics.temperature import fit_scaling, temperature_sweep

    check_choice(method, "method", METHODS)
    check_n_bins(n_bins)
    if odir is not None and len(odir) != 2:
        raise InputValidationError(f"odir is two weights (lambda, mu), got {odir!r}")
    val_z, val_y = _logits(val)
    test_z, test_y = _logits(test)
    if val_z.shape[1] != test_z.shape[1]:
        raise DataError(f"--val has {val_z.shape[1]} classes but --test has {test_z.shape[1]}")
    counts = (len(val_y), len(test_y))
    test_p = softmax(test_z)
    before = _scores(test_z, test_y, *top1_confidences(test_p, test_y), n_bins, None)
    if method in TOP_LABEL_CALIBRATORS:
        # A top-label calibrator maps the top-1 confidence only: the predicted class stays, there is no distribution.
        top: HistogramBinningCalibrator | IsotonicCalibrator = (
            HistogramBinningCalibrator(n_bins) if method == "histogram" else IsotonicCalibrator()
        )
        top.fit_probs(softmax(val_z), val_y)
        calibrated, _ = calibrate_top_label(top, test_p)
        no_nll = jsonio.Undefined(
            "a top-label calibrator maps only the top-1 confidence; it gives no distribution over the classes"
        )
        after = _scores(test_z, test_y, calibrated, top1_confidences(test_p, test_y)[1], n_bins, no_nll)
        return RecalibrationReport(method, n_bins, before, after, *counts, calibrator=top)
    scaling = cast(Literal["temperature", "vector", "matrix"], method)
    scaler = fit_scaling(val_z, val_y, method=scaling, odir=None if odir is None else (odir[0], odir[1]))
    scaled = scaler.transform(test_z)
    probs = softmax(scaled)
    after = _scores(scaled, test_y, probs.max(axis=1), probs.argmax(axis=1) == test_y, n_bins, None)
    points = temperature_sweep(test_z, test_y, list(sweep), n_bins=n_bins) if sweep else []
    return RecalibrationReport(
        method, n_bins, before, after, *counts, calibrator=scaler, converged=scaler.converged,
        odir=scaler.odir if odir is not None else None, sweep=points,
    )  # fmt: skip
