"""The calibration and the imbalance-aware metrics of one prediction JSONL file (``modelval calibration
reliability`` and ``modelval metrics``).

Prediction files are JSONL rows ``{"label": int, "pred": int, "conf": float}``, read by
:func:`modelval.metrics.io.read_predictions` (whose rules decide which rows are dropped). The results have
``.to_dict()``, the JSON object the command's ``--json`` prints, and ``.to_json()``, its strict JSON text.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from modelval import jsonio
from modelval.errors import DataError
from modelval.metrics.bootstrap import BootstrapInterval, bootstrap_json, calibration_intervals, intervals_json
from modelval.metrics.calibration import Convention, ReliabilityBins, reliability_bins
from modelval.metrics.estimators import resolve_n_bins
from modelval.metrics.io import PredictionFile
from modelval.metrics.validation import check_count, check_n_bins, check_per_class

#: Without ``num_classes``, the class count comes from the data; past this it is more likely a broken label than
#: a real head (the confusion matrix alone would need K^2 x 8 bytes: 80 GB at 100,000).
MAX_DERIVED_CLASSES = 30_000
#: One number per class given as a JSON file (a list or a ``{"0": value}`` dict) or in memory.
PerClass = str | os.PathLike[str] | Sequence[float] | np.ndarray


class JSONReport:
    """``to_json()``: the strict JSON text of ``to_dict()`` (an undefined number becomes null, with the reason)."""

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - every report defines it
        raise NotImplementedError

    def to_json(self, indent: int | None = 2) -> str:
        """The strict JSON text of :meth:`to_dict`: what the command's ``--json`` prints.

        Parameters
        ----------
        indent
            Spaces per level; ``None``: one line.
        """
        return jsonio.dumps(self.to_dict(), indent=indent)


def file_calibration(
    data: PredictionFile,
    n_bins: int | Literal["auto"],
    *,
    adaptive: bool = False,
    convention: Convention = "default",
    n_bootstrap: int = 0,
    seed: int = 0,
    stratify: bool = False,
) -> tuple[ReliabilityBins, dict[str, BootstrapInterval]]:
    """The reliability bins of a file's rows and the bootstrap intervals of their ECE, MCE, RMS and accuracy.

    Parameters
    ----------
    data
        The rows (:func:`~modelval.metrics.io.read_predictions`), every one with a valid ``conf``.
    n_bins, adaptive, convention
        The bins (``"auto"``: the cube-root rule on the rows).
    n_bootstrap, seed, stratify
        As :func:`~modelval.metrics.bootstrap.calibration_intervals`; 0 resamples: no intervals (``{}``).
    """
    bins_used, _ = resolve_n_bins(n_bins, data.rows_used)
    correct = data.labels == data.preds
    bins = reliability_bins(data.conf, correct, bins_used, adaptive=adaptive, convention=convention)
    if not n_bootstrap:
        return bins, {}
    return bins, calibration_intervals(
        data.conf, correct, bins_used, labels=data.labels, adaptive=adaptive, convention=convention,
        n_resamples=n_bootstrap, seed=seed, stratify=stratify,
    )  # fmt: skip


@dataclass
class ReliabilityReport(JSONReport):
    """The reliability bins of one prediction file, its ECE/MCE/RMS and the figures written
    (``modelval calibration reliability``)."""

    path: Path
    bins: ReliabilityBins
    rows_used: int
    rows_dropped: int
    #: Bootstrap 95% intervals of ``ece``, ``mce``, ``rms`` and ``accuracy``; ``None`` with ``bootstrap=0``.
    intervals: dict[str, BootstrapInterval] | None = None
    #: The diagram named by ``figure`` (else the one in ``report_dir``): the JSON's ``out``.
    figure: Path | None = None
    #: Every file written: the diagrams, then ``report_dir/reliability.json``.
    written: list[Path] = field(default_factory=list)

    @property
    def ece(self) -> float:
        return self.bins.ece

    @property
    def mce(self) -> float:
        return self.bins.mce

    def record(self) -> dict[str, Any]:
        """The result without ``written``: what ``report_dir/reliability.json`` holds."""
        result: dict[str, Any] = {"path": str(self.path), "out": None if self.figure is None else str(self.figure)}
        result.update(self.bins.summary())
        if self.intervals:
            result.update(intervals_json(self.intervals), bootstrap=bootstrap_json(self.intervals))
        result.update(rows_used=self.rows_used, rows_dropped=self.rows_dropped, bins=self.bins.as_records())
        return result

    def to_dict(self) -> dict[str, Any]:
        """:meth:`record` and ``written``: the command's ``--json``."""
        return {**self.record(), "written": [str(path) for path in self.written]}


@dataclass
class PredictionMetricsReport(JSONReport):
    """Accuracy, balanced/reweighted/shot accuracy, precision/recall/F1 and (when rows carry ``conf``)
    calibration of one prediction file (``modelval metrics``)."""

    path: Path
    rows_used: int
    rows_dropped: int
    num_classes: int
    accuracy: float
    balanced_accuracy: float
    #: ``sum_c w_c acc_c`` with the class weights normalised to sum 1; ``None`` without class weights.
    reweighted_accuracy: float | None
    #: Mean per-class accuracy of the many/medium/few-shot classes; ``None`` without training counts.
    shot_accuracy: dict[str, float] | None
    #: Bootstrap 95% intervals of the accuracy family (``accuracy``, ``balanced_accuracy``,
    #: ``reweighted_accuracy``, ``shot_many`` ...); empty with ``bootstrap=0``.
    intervals: dict[str, BootstrapInterval]
    #: ``ece``, ``mce``, ``rms``, the bins, their intervals and ``ece_by_group``; or ``ece`` undefined with the
    #: reason when not every row carries a valid ``conf``.
    calibration: dict[str, Any]
    #: ``{"macro" | "micro" | "weighted": {"precision", "recall", "f1"}}``.
    averages: dict[str, dict[str, float]]
    #: One dict per class: ``class``, ``support``, ``accuracy`` (``None`` without examples), precision, recall, F1.
    per_class: list[dict[str, Any]]
    #: ``(K, K)`` counts, row = true class; ``None`` past :data:`~modelval.metrics.classification.MAX_CONFUSION_CELLS`.
    confusion_matrix: np.ndarray | None
    many: int = 100
    few: int = 20
    bootstrap: int = 1000
    seed: int = 0
    stratify: bool = False

    @property
    def ece(self) -> float | None:
        """The top-1 ECE, or ``None`` when not every used row carries a valid ``conf`` (see ``calibration``)."""
        value = self.calibration.get("ece")
        return value if isinstance(value, float) else None

    def to_dict(self) -> dict[str, Any]:
        """The numbers as the command's ``--json`` prints them."""
        out: dict[str, Any] = {name: getattr(self, name) for name in (
            "rows_used", "rows_dropped", "num_classes", "accuracy", "balanced_accuracy")}  # fmt: skip
        out = {"path": str(self.path), **out}
        if self.reweighted_accuracy is not None:
            out["reweighted_accuracy"] = self.reweighted_accuracy
        if self.shot_accuracy is not None:
            out["shot_accuracy"] = self.shot_accuracy
        if self.intervals:
            for name in ("accuracy", "balanced_accuracy", "reweighted_accuracy"):
                if name in self.intervals:
                    out[f"{name}_ci95"] = self.intervals[name].as_list()
            if self.shot_accuracy is not None:
                shots = ("many", "medium", "few")
                out["shot_accuracy_ci95"] = {g: self.intervals[f"shot_{g}"].as_list() for g in shots}
            out["bootstrap"] = bootstrap_json(self.intervals)
        out.update(self.calibration)
        out.update(self.averages)
        out["per_class"] = self.per_class
        k = self.num_classes
        if self.confusion_matrix is not None:
            out["confusion_matrix"] = self.confusion_matrix.tolist()
        else:  # the per-class numbers need no matrix; a 74.5 GiB one is never attempted
            out["confusion_matrix"] = jsonio.Undefined(f"{k} classes: a {k} x {k} matrix is not built")
        return out


def _calibration_of_rows(
    data: PredictionFile, n_bins: int | Literal["auto"], counts: np.ndarray | None, many: int, few: int,
    bootstrap: int, seed: int, stratify: bool,
) -> dict[str, Any]:  # fmt: skip
    """ECE/MCE/RMS (with intervals) and ECE per many/medium/few group, when every used row has a valid ``conf``."""
    from modelval.metrics.estimators import ece_by_group
    from modelval.metrics.imbalance import shot_groups

    rows = data.rows_used
    valid = int(np.isfinite(data.conf).sum())
    if valid != rows:
        why = f"only {valid} of {rows} rows carry a valid conf (a number in [0, 1])"
        return {"ece": jsonio.Undefined(f"no calibration numbers: {why}")}
    bins, intervals = file_calibration(data, n_bins, n_bootstrap=bootstrap, seed=seed, stratify=stratify)
    out: dict[str, Any] = {**bins.summary()}
    out.pop("adaptive")
    out.update({f"{name}_ci95": intervals[name].as_list() for name in ("ece", "mce", "rms") if intervals})
    if counts is not None:
        groups = shot_groups(counts, many_threshold=many, few_threshold=few)
        members = {g: getattr(groups, g) for g in ("many", "medium", "few")}
        per_group = ece_by_group(data.conf, data.labels == data.preds, data.labels, members, bins.n_bins)
        out["ece_by_group"] = {
            name: result.ece if result.ece is not None else jsonio.Undefined(result.reason or "no examples")
            for name, result in per_group.items()
        }
    return out


def _classes(
    y: np.ndarray, p: np.ndarray, k: int, per_class: np.ndarray
) -> tuple[dict[str, dict[str, float]], list[dict[str, Any]]]:
    """Precision, recall and F1 averaged three ways, and one row per class with its accuracy."""
    from modelval.metrics.classification import precision_recall_f1

    averages: dict[str, dict[str, float]] = {}
    for average in ("macro", "micro", "weighted"):
        prf = precision_recall_f1(y, p, average=average, num_classes=k, zero_division=0)
        averages[average] = {"precision": float(prf.precision), "recall": float(prf.recall), "f1": float(prf.f1)}
    per = precision_recall_f1(y, p, average=None, num_classes=k, zero_division=0)
    precision, recall, f1 = (np.asarray(v) for v in (per.precision, per.recall, per.f1))
    rows = [
        {"class": c, "support": int(per.support[c]), "accuracy": None if math.isnan(acc) else float(acc),
         "precision": float(precision[c]), "recall": float(recall[c]), "f1": float(f1[c])}
        for c, acc in enumerate(per_class)
    ]  # fmt: skip
    return averages, rows


def prediction_metrics(
    path: str | os.PathLike[str],
    *,
    num_classes: int | None = None,
    class_weights: PerClass | None = None,
    train_counts: PerClass | None = None,
    many: int = 100,
    few: int = 20,
    bootstrap: int = 1000,
    seed: int = 0,
    stratify: bool = False,
    strict: bool = False,
    n_bins: int | Literal["auto"] = 15,
) -> PredictionMetricsReport:
    """The imbalance-aware metrics of one prediction JSONL file (``modelval metrics``).

    Accuracy, balanced and reweighted accuracy, many/medium/few-shot accuracy, precision/recall/F1 and the
    confusion matrix (the definitions of :mod:`modelval.metrics.imbalance` and
    :mod:`modelval.metrics.classification`, with ``zero_division=0``), and, when every row carries a valid
    ``conf``, the binned top-1 ECE/MCE/RMS and the ECE within each shot group. Rows need ``label`` and ``pred``;
    a row without a valid ``conf`` still counts for accuracy. Intervals are seeded percentile bootstrap 95%
    intervals over predictions.

    Parameters
    ----------
    path
        The prediction file (JSONL rows ``{label, pred[, conf]}``).
    num_classes
        The number of classes; default: the length of ``class_weights`` or ``train_counts``, else the largest
        class index found + 1 (refused past 30,000: say it explicitly).
    class_weights
        One weight per class (a JSON list or ``{"0": w}`` dict file, or values): gives the reweighted accuracy.
    train_counts
        Training images per class (a JSON file or values): gives the many/medium/few-shot accuracy.
    many
        Many-shot: more than ``many`` training images.
    few
        Few-shot: fewer than ``few`` training images.
    bootstrap
        Bootstrap resamples of the 95% intervals; 0 turns them off.
    seed
        Seed of the bootstrap.
    stratify
        Resample within each true class (class counts stay fixed).
    strict
        A malformed row is an error instead of being dropped and counted.
    n_bins
        Bins of the ECE, or ``"auto"`` for ``ceil(n^(1/3))``.

    Returns
    -------
    PredictionMetricsReport
        The numbers as attributes (``accuracy``, ``balanced_accuracy``, ``per_class``, ``ece`` ...);
        ``to_dict()`` is the command's ``--json``.

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> from modelval.api import prediction_metrics
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = Path(tmp.name)
    >>> pairs = [(0, 0), (0, 0), (0, 0), (0, 0), (0, 1), (1, 1), (1, 0), (2, 2)]  # (label, pred)
    >>> rows = [{"label": y, "pred": p} for y, p in pairs]
    >>> _ = (folder / "preds.jsonl").write_text("".join(json.dumps(row) + "\\n" for row in rows))
    >>> report = prediction_metrics(folder / "preds.jsonl", class_weights=[1, 2, 1], bootstrap=0)
    >>> report.num_classes, report.accuracy, round(report.balanced_accuracy, 4), round(report.reweighted_accuracy, 4)
    (3, 0.75, 0.7667, 0.7)
    >>> [c["accuracy"] for c in report.per_class], round(report.averages["macro"]["f1"], 4)
    ([0.8, 0.5, 1.0], 0.7667)
    >>> report.ece is None  # the rows carry no conf: no calibration numbers (the JSON says why)
    True
    >>> tmp.cleanup()
    """
    from modelval.metrics.bootstrap import accuracy_intervals
    from modelval.metrics.classification import MAX_CONFUSION_CELLS, confusion_matrix
    from modelval.metrics.imbalance import (
        load_class_weights,
        load_train_counts,
        normalize_class_weights,
        per_class_accuracy,
        reweighted_accuracy,
        shot_accuracy,
    )  # fmt: skip
    from modelval.metrics.io import read_predictions

    check_n_bins(n_bins, auto=True)
    check_count(bootstrap, "bootstrap", minimum=0, expected="is a number of resamples, 0 (no intervals) or more")
    if num_classes is not None:
        check_count(num_classes, "num_classes")
    path = Path(path)
    data = read_predictions(path, strict=strict, require_conf=False)
    if data.skipped:
        raise DataError(f"{path}: no usable rows: {data.reason}")
    from_file = (str, os.PathLike)
    weights = counts = None
    if class_weights is not None:
        weights = (load_class_weights(Path(class_weights), num_classes) if isinstance(class_weights, from_file)
                   else normalize_class_weights(class_weights, num_classes))  # fmt: skip
    if train_counts is not None:
        counts = (load_train_counts(Path(train_counts)) if isinstance(train_counts, from_file)
                  else check_per_class(train_counts, "train_counts"))  # fmt: skip
    y, p = data.labels, data.preds
    k = (
        num_classes
        or len(weights if weights is not None else counts if counts is not None else [])
        or int(max(y.max(), p.max()) + 1)
    )
    if not num_classes and weights is None and counts is None and k > MAX_DERIVED_CLASSES:
        raise DataError(
            f"{path}: the largest class index is {k - 1}, which would make {k} classes (a {k} x {k} "
            f"confusion matrix); if that is right, say so with --num-classes {k}, else check the labels"
        )
    if counts is not None and len(counts) != k:
        where = train_counts if isinstance(train_counts, from_file) else "train_counts"
        raise DataError(f"{where}: {len(counts)} training counts but {k} classes")
    if max(y.max(), p.max()) >= k:
        raise DataError(f"{path}: class {int(max(y.max(), p.max()))} found but there are only {k} classes")
    intervals = {} if not bootstrap else accuracy_intervals(
        y, p, k, class_weights=weights, train_counts=counts, many_threshold=many, few_threshold=few,
        n_resamples=bootstrap, seed=seed, stratify=stratify,
    )  # fmt: skip
    accuracy_of_class = per_class_accuracy(y, p, k)
    averages, per_class = _classes(y, p, k, accuracy_of_class)
    return PredictionMetricsReport(
        path=path, rows_used=data.rows_used, rows_dropped=data.rows_dropped, num_classes=k,
        accuracy=float(np.mean(y == p)), balanced_accuracy=float(np.nanmean(accuracy_of_class)),
        reweighted_accuracy=None if weights is None else reweighted_accuracy(y, p, weights),
        shot_accuracy=None if counts is None else shot_accuracy(y, p, counts, many_threshold=many, few_threshold=few),
        intervals=intervals,
        calibration=_calibration_of_rows(data, n_bins, counts, many, few, bootstrap, seed, stratify),
        averages=averages, per_class=per_class,
        confusion_matrix=confusion_matrix(y, p, k) if k * k <= MAX_CONFUSION_CELLS else None,
        many=many, few=few, bootstrap=bootstrap, seed=seed, stratify=stratify,
    )  # fmt: skip
