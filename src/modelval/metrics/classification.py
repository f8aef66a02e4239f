"""Confusion matrix, precision, recall and F1 with scikit-learn's averaging and ``zero_division`` rules.

Rows of the confusion matrix are true classes, columns predicted classes, as in scikit-learn. ``average`` is
``None`` (per class), ``"macro"``, ``"weighted"`` (by true support) or ``"micro"`` (pooled counts: for
single-label data precision = recall = F1 = accuracy); ``zero_division`` (``"warn"``, 0, 1 or NaN, which leaves
undefined classes out of the averages as scikit-learn >= 1.3) is the value of a ratio whose denominator is 0.
The classes are ``range(num_classes)`` when it is given (absent classes count, as in torchmetrics), else the
sorted union of the labels and predictions present.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from modelval.errors import InputValidationError
from modelval.metrics.validation import as_array, check_choice, check_count, check_zero_division, validate_labels

Average = Literal["macro", "micro", "weighted"] | None
AVERAGES: tuple[str | None, ...] = ("macro", "micro", "weighted", None)


def _classes(labels: np.ndarray, preds: np.ndarray, num_classes: int | None) -> np.ndarray:
    if num_classes is not None:
        return np.arange(num_classes)
    return np.union1d(labels, preds)


#: The largest confusion matrix built (cells): 10^8 int64 counts are 0.75 GiB. Past it (100,001 classes ask
#: for 74.5 GiB) the matrix is refused with its size; the per-class metrics need only per-class counts.
MAX_CONFUSION_CELLS = 100_000_000


def confusion_matrix(labels: Any, preds: Any, num_classes: int | None = None) -> np.ndarray:
    """``(K, K)`` integer counts, row = true class, column = predicted class.

    Refused (:class:`InputValidationError`, with the memory it would take) past
    :data:`MAX_CONFUSION_CELLS` cells; :func:`class_counts` gives the per-class numbers of any size.

    Parameters
    ----------
    labels, preds
        True and predicted classes.
    num_classes
        Count the classes ``0 .. num_classes - 1``; ``None``: the classes present.
    """
    y, p = validate_labels(labels, preds, num_classes)
    classes = _classes(y, p, num_classes)
    k = len(classes)
    if k * k > MAX_CONFUSION_CELLS:
        raise InputValidationError(
            f"a {k} x {k} confusion matrix would take {k * k * 8 / 2**30:.1f} GiB; it is built up to "
            f"{MAX_CONFUSION_CELLS:,} cells (per-class precision, recall and accuracy need no matrix)"
        )
    index = np.searchsorted(classes, np.concatenate([y, p]))
    yi, pi = index[: len(y)], index[len(y) :]
    return np.bincount(yi * k + pi, minlength=k * k).reshape(k, k)


def class_counts(labels: Any, preds: Any, num_classes: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(true positives, predictions, support)`` per class: the confusion matrix's diagonal, column and row sums.

    In memory proportional to the number of classes, not its square.

    Parameters
    ----------
    labels, preds, num_classes
        As :func:`confusion_matrix`.
    """
    y, p = validate_labels(labels, preds, num_classes)
    classes = _classes(y, p, num_classes)
    k = len(classes)
    yi, pi = np.searchsorted(classes, y), np.searchsorted(classes, p)
    tp = np.bincount(yi[yi == pi], minlength=k)
    return tp, np.bincount(pi, minlength=k), np.bincount(yi, minlength=k)


def per_class_accuracy_from_confmat(confmat: np.ndarray) -> np.ndarray:
    """Recall of each class from a confusion matrix (rows = true class); NaN for a class with no examples.

    Parameters
    ----------
    confmat
        ``(K, K)`` counts, row = true class.
    """
    support = confmat.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(support > 0, np.diag(confmat) / np.where(support > 0, support, 1), np.nan)


def _divide(num: np.ndarray, den: np.ndarray, zero_division: float | str, what: str) -> np.ndarray:
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    zero = den == 0
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(zero, np.nan, num / np.where(zero, 1, den))
    if zero.any():
        if zero_division == "warn":
            warnings.warn(
                f"{what} is ill-defined for {int(zero.sum())} class(es) and set to 0.0; "
                "pass zero_division=0, 1 or nan to choose the value and silence this warning",
                RuntimeWarning,
                stacklevel=3,
            )
        out = np.where(zero, 0.0 if zero_division == "warn" else float(zero_division), out)
    return out


@dataclass(frozen=True)
class PrecisionRecallF1:
    precision: float | np.ndarray
    recall: float | np.ndarray
    f1: float | np.ndarray
    support: np.ndarray  # true examples per class


def precision_recall_f1(
    labels: Any,
    preds: Any,
    *,
    average: Average = "macro",
    num_classes: int | None = None,
    zero_division: float | str = "warn",
) -> PrecisionRecallF1:
    """Precision, recall and F1 like ``sklearn.metrics.precision_recall_fscore_support``.

    Per class ``c``: precision ``TP / (TP + FP)``, recall ``TP / (TP + FN)`` and F1
    ``2 TP / (2 TP + FP + FN)``, averaged as scikit-learn does (see the module docstring for ``average``
    and ``zero_division``).

    Parameters
    ----------
    labels
        True classes, non-negative integers (numpy array, torch tensor or list).
    preds
        Predicted classes, the same length.
    average
        ``"macro"`` (unweighted mean over classes), ``"micro"`` (pooled counts), ``"weighted"`` (mean
        weighted by each class's support) or ``None`` (one value per class).
    num_classes
        Score the classes ``0 .. num_classes - 1`` (absent classes count, as in torchmetrics); ``None``: the
        classes present in ``labels`` or ``preds`` (scikit-learn's default).
    zero_division
        The value of a ratio whose denominator is 0: ``"warn"`` (0 with a ``RuntimeWarning``), 0, 1 or NaN.

    Returns
    -------
    PrecisionRecallF1
        ``precision``, ``recall`` and ``f1`` (floats, or arrays with ``average=None``) and ``support``, the
        number of true examples of each class.

    Examples
    --------
    >>> from modelval.metrics import precision_recall_f1
    >>> labels = [0, 0, 0, 0, 0, 1, 1, 2]
    >>> preds = [0, 0, 0, 1, 1, 1, 0, 2]
    >>> per_class = precision_recall_f1(labels, preds, average=None)
    >>> per_class.precision.round(4).tolist(), per_class.recall.tolist(), per_class.support.tolist()
    ([0.75, 0.3333, 1.0], [0.6, 0.5, 1.0], [5, 2, 1])
    >>> macro = precision_recall_f1(labels, preds)
    >>> round(macro.precision, 4), round(macro.recall, 4), round(macro.f1, 4)
    (0.6944, 0.7, 0.6889)
    >>> precision_recall_f1(labels, preds, average="micro").f1  # single-label data: the accuracy
    0.625
    """
    check_choice(average, "average", AVERAGES)
    check_zero_division(zero_division)
    hits, predicted, support = class_counts(labels, preds, num_classes)
    tp = hits.astype(np.float64)
    pred_count = predicted.astype(np.float64)
    if average == "micro":
        tp, pred_count, true_count = (
            tp.sum(keepdims=True),
            pred_count.sum(keepdims=True),
            support.sum(keepdims=True),
        )
    else:
        true_count = support.astype(np.float64)
    precision = _divide(tp, pred_count, zero_division, "precision")
    recall = _divide(tp, true_count, zero_division, "recall")
    # F1 from counts, as scikit-learn does: it is defined (0) when TP = 0 but FP + FN > 0.
    f1 = _divide(2 * tp, 2 * tp + (pred_count - tp) + (true_count - tp), zero_division, "F1")
    if average == "micro":
        return PrecisionRecallF1(float(precision[0]), float(recall[0]), float(f1[0]), support)
    if average is None:
        return PrecisionRecallF1(precision, recall, f1, support)
    weights = np.ones_like(tp) if average == "macro" else support.astype(np.float64)

    def reduce(values: np.ndarray) -> float:
        # scikit-learn's _nanaverage: NaN (zero_division=nan) classes are left out; all NaN gives NaN;
        # if the remaining weights are all zero, the plain mean of the remaining values is used.
        keep = ~np.isnan(values)
        if not keep.any():
            return math.nan
        w = weights[keep]
        return float(np.average(values[keep], weights=w if w.sum() > 0 else None))

    return PrecisionRecallF1(reduce(precision), reduce(recall), reduce(f1), support)


class ClassificationReport:
    """Accumulates labels and predictions over batches (torchmetrics-style ``update``/``compute``).

    ``compute()`` returns a dict with accuracy, balanced accuracy, per-class accuracy, the confusion
    matrix and precision/recall/F1 for every averaging mode.
    """

    def __init__(self, num_classes: int, *, zero_division: float | str = 0.0) -> None:
        self.num_classes = check_count(num_classes, "num_classes")
        check_zero_division(zero_division)
        self.zero_division = zero_division
        self.reset()

    def reset(self) -> None:
        self.confmat = np.zeros((self.num_classes, self.num_classes), dtype=np.int64)

    def update(self, labels: Any, preds: Any) -> None:
        """Add a batch.

        Parameters
        ----------
        labels
            True classes.
        preds
            Predicted classes, or ``(N, C)`` scores (their argmax is taken).
        """
        p = as_array(preds, "preds")
        if p.ndim == 2:  # (N, C) scores or probabilities
            p = p.argmax(axis=1)
        self.confmat += confusion_matrix(labels, p, self.num_classes)

    def compute(self) -> dict[str, Any]:
        if self.confmat.sum() == 0:
            raise InputValidationError("ClassificationReport.compute() called before any update()")
        # Expand the confusion matrix back into (label, pred) pairs so every metric shares one code path.
        rows, cols = np.nonzero(self.confmat)
        counts = self.confmat[rows, cols]
        y, p = np.repeat(rows, counts), np.repeat(cols, counts)
        per_class = per_class_accuracy_from_confmat(self.confmat)
        result: dict[str, Any] = {
            "n": int(self.confmat.sum()),
            "accuracy": float(np.trace(self.confmat) / self.confmat.sum()),
            "balanced_accuracy": float(np.nanmean(per_class)),
            "per_class_accuracy": per_class,
            "confusion_matrix": self.confmat.copy(),
        }
        for average in ("macro", "micro", "weighted", None):
            prf = precision_recall_f1(
                y, p, average=average, num_classes=self.num_classes, zero_division=self.zero_division
            )
            key = average or "per_class"
            result[f"precision_{key}"] = prf.precision
            result[f"recall_{key}"] = prf.recall
            result[f"f1_{key}"] = prf.f1
        return result
