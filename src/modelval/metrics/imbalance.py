"""Metrics for long-tailed training evaluated on (usually balanced) test sets.

Per-class accuracy ``acc_c`` is the recall of class ``c`` (NaN without test examples); balanced accuracy their
mean over the classes with examples (``sklearn.metrics.balanced_accuracy_score``); reweighted accuracy
``sum_c w_c acc_c`` with class weights normalised to sum 1, undefined (an error, never a class silently dropped)
when a class with weight > 0 has no test examples. Many/medium/few groups by training count follow OLTR's
``shot_acc`` (Liu et al. 2019): many if ``count > 100``, few if ``count < 20``, medium otherwise.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from modelval.errors import DataError, InputValidationError
from modelval.metrics.classification import class_counts
from modelval.metrics.validation import check_per_class, validate_labels


def per_class_accuracy(labels: Any, preds: Any, num_classes: int) -> np.ndarray:
    """Accuracy on the examples of each class ``0 .. num_classes - 1`` (NaN where a class has none).

    From per-class counts, so 100,001 classes cost kilobytes, not a 74.5 GiB confusion matrix.

    Parameters
    ----------
    labels, preds
        True and predicted classes.
    num_classes
        The number of classes.
    """
    hits, _, support = class_counts(labels, preds, num_classes)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(support > 0, hits / np.where(support > 0, support, 1), np.nan)


def balanced_accuracy(labels: Any, preds: Any, num_classes: int | None = None) -> float:
    """Mean per-class accuracy over the classes that occur in ``labels``.

    Parameters
    ----------
    labels, preds
        True and predicted classes.
    num_classes
        The number of classes; ``None``: the largest class index + 1.
    """
    y, p = validate_labels(labels, preds, num_classes)
    k = int(max(y.max(), p.max()) + 1) if num_classes is None else num_classes
    return float(np.nanmean(per_class_accuracy(y, p, k)))


def normalize_class_weights(weights: Any, num_classes: int | None = None) -> np.ndarray:
    """Non-negative finite weights, one per class and not all zero, scaled to sum 1.

    Parameters
    ----------
    weights
        One weight per class.
    num_classes
        How many there must be (``None``: any number).
    """
    w = check_per_class(weights, "class weights", num_classes)
    if w.sum() == 0:
        raise InputValidationError("class weights are all zero; at least one class needs a positive weight")
    return w / w.sum()


def _read_per_class_json(path: str | Path, what: str, num_classes: int | None = None) -> list[float]:
    """One number per class from a JSON list ``[v0, v1, ...]`` or dict ``{"0": v0, "1": v1, ...}``.

    A dict must have exactly the keys ``"0" .. str(K - 1)`` (K = ``num_classes``, else the number of keys).
    ``what`` names the values in messages ("class weight", "training count").
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise DataError(f"{what} file not found: {path}") from error
    except json.JSONDecodeError as error:
        raise DataError(f'{path} is not valid JSON ({error}); expected a list or a {{"0": value}} dict') from error
    if isinstance(data, dict):
        try:
            keys = sorted(int(k) for k in data)
        except ValueError as error:
            raise DataError(f'{path}: dict keys must be class indices like "0", got {list(data)[:5]}') from error
        k = num_classes if num_classes is not None else len(keys)
        if keys != list(range(k)):
            missing = sorted(set(range(k)) - set(keys))
            extra = sorted(set(keys) - set(range(k)))
            raise DataError(f'{path}: expected keys "0".."{k - 1}"; missing {missing[:10]}, unexpected {extra[:10]}')
        by_index = {int(key): value for key, value in data.items()}
        values = [by_index[i] for i in range(k)]
    elif isinstance(data, list):
        values = data
    else:
        raise DataError(f"{path}: expected a JSON list or dict of {what}s, got {type(data).__name__}")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise DataError(f"{path}: every {what} must be a number")
    return values


def load_class_weights(path: str | Path, num_classes: int | None = None) -> np.ndarray:
    """Read ``class_weights.json`` (a list or a ``{"0": w}`` dict); weights are normalised to sum 1.

    Parameters
    ----------
    path
        The JSON file.
    num_classes
        How many weights there must be (``None``: any number).
    """
    values = _read_per_class_json(path, "class weight", num_classes)
    try:
        return normalize_class_weights(np.asarray(values, dtype=np.float64), num_classes)
    except InputValidationError as error:
        raise DataError(f"{path}: {error}") from error


def reweighted_accuracy(labels: Any, preds: Any, class_weights: Any) -> float:
    """``sum_c w_c * acc_c`` with ``w`` normalised to sum 1 (one weight per class).

    ``acc_c`` is the accuracy on the test examples of class ``c`` (its recall); the weights are usually the
    training-set class frequencies, so the number estimates the accuracy on the training distribution
    from a (balanced) test set. A class with weight > 0 but no test examples makes it undefined: that is an
    error, not a class silently dropped.

    Parameters
    ----------
    labels
        True classes ``0 .. K - 1`` (numpy array, torch tensor or list).
    preds
        Predicted classes, the same length.
    class_weights
        ``K`` weights, finite, 0 or more, not all 0 (e.g. training images per class); normalised here.

    Returns
    -------
    float
        The reweighted accuracy, in [0, 1].

    Examples
    --------
    Per-class accuracies 0.8, 0.5 and 1.0, weighted 1 : 2 : 1:

    >>> from modelval.metrics import reweighted_accuracy
    >>> labels = [0, 0, 0, 0, 0, 1, 1, 2]
    >>> preds = [0, 0, 0, 0, 1, 1, 0, 2]
    >>> round(reweighted_accuracy(labels, preds, [1, 2, 1]), 4)  # (0.8 + 2 * 0.5 + 1.0) / 4
    0.7
    """
    w = normalize_class_weights(class_weights)
    y, p = validate_labels(labels, preds, len(w))
    acc = per_class_accuracy(y, p, len(w))
    missing = np.flatnonzero(np.isnan(acc) & (w > 0))
    if missing.size:
        raise InputValidationError(
            f"class(es) {missing[:10].tolist()} have a positive weight but no test examples, so the "
            "reweighted accuracy is undefined; give them weight 0 or add test examples"
        )
    return float(np.sum(np.where(w > 0, acc, 0.0) * w))


@dataclass(frozen=True)
class ShotGroups:
    many: np.ndarray
    medium: np.ndarray
    few: np.ndarray
    many_threshold: int
    few_threshold: int


def shot_groups(train_counts: Any, *, many_threshold: int = 100, few_threshold: int = 20) -> ShotGroups:
    """Split classes by training count: many ``> many_threshold``, few ``< few_threshold``, else medium.

    Parameters
    ----------
    train_counts
        Training images per class.
    many_threshold, few_threshold
        The group boundaries.
    """
    c = check_per_class(train_counts, "train counts")
    if few_threshold > many_threshold:
        raise InputValidationError(f"few_threshold ({few_threshold}) must not exceed many_threshold ({many_threshold})")
    many = np.flatnonzero(c > many_threshold)
    few = np.flatnonzero(c < few_threshold)
    medium = np.flatnonzero((c >= few_threshold) & (c <= many_threshold))
    return ShotGroups(many, medium, few, many_threshold, few_threshold)


def shot_accuracy(
    labels: Any, preds: Any, train_counts: Any, *, many_threshold: int = 100, few_threshold: int = 20
) -> dict[str, float]:
    """Mean per-class accuracy within the many/medium/few groups (NaN for an empty group).

    Classes without test examples are left out of their group's mean.

    Parameters
    ----------
    labels, preds
        True and predicted classes.
    train_counts, many_threshold, few_threshold
        As :func:`shot_groups`.
    """
    groups = shot_groups(train_counts, many_threshold=many_threshold, few_threshold=few_threshold)
    n = len(np.asarray(train_counts))
    acc = per_class_accuracy(labels, preds, n)
    out = {}
    for name in ("many", "medium", "few"):
        idx = getattr(groups, name)
        vals = acc[idx]
        vals = vals[~np.isnan(vals)]
        out[name] = float(vals.mean()) if vals.size else math.nan
    return out


def load_train_counts(path: str | Path) -> np.ndarray:
    """Read training counts per class: a JSON list or a ``{"0": n}`` dict.

    Parameters
    ----------
    path
        The JSON file.
    """
    try:
        return check_per_class(_read_per_class_json(path, "training count"), "training counts")
    except InputValidationError as error:  # said of the file, as every problem of a file is
        raise DataError(f"{path}: training counts must be finite and >= 0") from error
