"""The checks of the metrics' inputs, one function per kind of check (as scikit-learn's ``utils.validation``).

Every metric checks its numpy arrays, lists or torch tensors here, so a bad input gets the same one-line
:class:`~modelval.errors.InputValidationError` from every metric, saying how to fix it. ``validate_*`` check a whole
input (scores with their labels) and return it converted; ``check_*`` check one thing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from modelval.errors import InputValidationError

#: Largest accepted ``|sum(row) - 1|`` of a probability row (float32 softmax over 100k classes stays well inside).
PROB_SUM_TOL = 1e-3
#: How a value outside [0, 1] was probably meant, for each kind of probability.
_LOGITS_FLAG = "for logits pass logits=True; the card: store them as 'logits'"
_LABEL_HINT = " (1 = positive class); for class indices of a multiclass model use the multiclass functions"


def as_array(values: Any, name: str) -> np.ndarray:
    """``values`` as a numpy array: torch tensors (also on a GPU or with grad) and lists are converted.

    Parameters
    ----------
    values, name
        A numpy array, a list or a torch tensor, and its name in the error messages.
    """
    if hasattr(values, "detach"):
        try:
            values = values.detach().cpu().numpy()
        except TypeError as error:  # bfloat16 and other dtypes numpy has no equivalent for
            dtype = getattr(values, "dtype", "?")
            raise InputValidationError(
                f"{name} is a tensor of dtype {dtype}, which numpy cannot represent; convert it first, "
                f"e.g. {name}.float() (float32) or {name}.double() (float64)"
            ) from error
    try:
        return np.asarray(values)
    except (TypeError, ValueError) as error:
        raise InputValidationError(f"{name} could not be converted to an array: {error}") from error


def binning_dtype(dtype: Any) -> type[np.floating[Any]]:
    """float32 for float16/float32 values, float64 otherwise: the precision confidences are binned in.

    Parameters
    ----------
    dtype
        The values' dtype.
    """
    return np.float32 if dtype in (np.float16, np.float32) else np.float64


def sigmoid(z: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-z))`` in float64 without overflow (the two branches of the logistic function).

    Parameters
    ----------
    z
        Logits.
    """
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    positive = z >= 0
    out[positive] = 1.0 / (1.0 + np.exp(-z[positive]))
    e = np.exp(z[~positive])
    out[~positive] = e / (1.0 + e)
    return out


def check_count(value: Any, name: str, *, minimum: int = 1, expected: str = "must be a positive integer",
                hint: str = "") -> int:  # fmt: skip
    """``value`` as an ``int``: an integer (never a bool) of at least ``minimum``.

    Parameters
    ----------
    value, name, minimum, expected, hint
        The setting, its name, the smallest value allowed, what it must be and what follows the value (messages).
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise InputValidationError(f"{name} {expected}, got {value!r}{hint}")
    return int(value)


def check_n_bins(n_bins: Any, *, auto: bool = False) -> None:
    """A bin count: a positive integer, or ``"auto"`` (the cube-root rule) where ``auto`` allows it.

    Parameters
    ----------
    n_bins, auto
        The bin count, and whether ``"auto"`` is allowed.
    """
    if not (auto and n_bins == "auto"):
        check_count(n_bins, "n_bins", expected="must be a positive integer" + (" or 'auto'" if auto else ""))


def check_number(value: Any, name: str, *, expected: str, minimum: float | None = None, above: float | None = None,
                 below: float | None = None) -> float:  # fmt: skip
    """``value`` as a ``float``: a finite real number (never a bool) in the bounds given.

    Parameters
    ----------
    value, name, expected, minimum, above, below
        The setting, its name, what it must be; ``value >= minimum``, ``> above``, ``< below`` (``None``: no bound).
    """
    ok = isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
    ok = ok and math.isfinite(value) and (minimum is None or value >= minimum)
    if not (ok and (above is None or value > above) and (below is None or value < below)):
        raise InputValidationError(f"{name} {expected}, got {value!r}")
    return float(value)


def check_choice(value: Any, name: str, choices: Sequence[Any], *, hint: str = "") -> None:
    """``value`` is one of ``choices``.

    Parameters
    ----------
    value, name, choices, hint
        The setting, its name, the values allowed and text after the choices in the message.
    """
    if value not in choices:
        raise InputValidationError(f"{name} must be one of {tuple(choices)}{hint}, got {value!r}")


def check_per_class(values: Any, name: str, num_classes: int | None = None) -> np.ndarray:
    """One finite number ``>= 0`` per class (class weights, training counts), as float64.

    Parameters
    ----------
    values, name, num_classes
        The numbers, their name and how many there must be (``None``: any number but 0).
    """
    w = as_array(values, name)
    if w.ndim != 1 or w.size == 0:
        raise InputValidationError(f"{name} must be a flat list (one per class), got shape {w.shape}")
    if not np.issubdtype(w.dtype, np.number):
        raise InputValidationError(f"{name} must be numbers, got dtype {w.dtype}")
    w = w.astype(np.float64)
    if num_classes is not None and len(w) != num_classes:
        raise InputValidationError(f"expected {num_classes} {name} (one per class), got {len(w)}")
    for problem, bad in (("NaN/inf", ~np.isfinite(w)), ("negative", w < 0)):
        if bad.any():
            classes = np.flatnonzero(bad)[:10].tolist()
            raise InputValidationError(f"{name} must be finite numbers >= 0; {problem} at class(es) {classes}")
    return w


def _real(values: np.ndarray, name: str) -> np.ndarray:
    if not np.issubdtype(values.dtype, np.number) or np.issubdtype(values.dtype, np.complexfloating):
        raise InputValidationError(f"{name} must be real numbers, got dtype {values.dtype}")
    return values


def _check_unit_interval(values: np.ndarray, name: str, *, must: str, fix: str) -> None:
    """Refuse NaN and values outside [0, 1]: one min and one max pass, the details only on failure (NaN
    propagates through both), so 10 million confidences need no float64 copy."""
    if not values.size:
        return
    low, high = values.min(), values.max()
    if not (np.isnan(low) or np.isnan(high)) and low >= 0 and high <= 1:
        return
    nan = np.isnan(values)
    if nan.any():
        raise InputValidationError(f"{name} contain {int(nan.sum())} NaN value(s); drop or fix those examples")
    bad = values[(values < 0) | (values > 1)]
    raise InputValidationError(
        f"{name} must {must} in [0, 1]; {bad.size} value(s) outside, e.g. {float(bad[0])!r}: {fix}"
    )


def _flags(values: Any, name: str = "correct", hint: str = "") -> np.ndarray:
    """0/1 or bool flags (right or wrong, positive or negative) as a bool array."""
    flags = as_array(values, name)
    if flags.dtype == bool:
        return flags
    if not np.issubdtype(flags.dtype, np.number):
        raise InputValidationError(f"{name} must be bool or 0/1, got dtype {flags.dtype}{hint}")
    ones = flags == 1
    if not (ones | (flags == 0)).all():
        bad = flags[~(ones | (flags == 0))]
        raise InputValidationError(
            f"{name} must contain only 0/1 (or True/False) values, found e.g. {bad.flat[0]!r}{hint}"
        )
    return ones


def check_confidences(
    confidences: Any, correct: Any = None, *, matrix_hint: str = "top1_confidences(probs, labels) first"
) -> tuple[np.ndarray, np.ndarray]:
    """1-D top-1 confidences in [0, 1] (in their own real dtype, no copy) and matching flags (bool).

    Parameters
    ----------
    confidences
        One top-1 confidence per prediction.
    correct
        Whether each prediction was right, 0/1 or bool; ``None`` (a calibrator's new confidences): no flags
        are checked and an empty input is allowed.
    matrix_hint
        What to call instead with an ``(N, C)`` probability matrix.
    """
    conf = as_array(confidences, "confidences")
    flags = as_array([] if correct is None else correct, "correct")
    if conf.ndim != 1 or flags.ndim != 1:
        if correct is None:
            what, shapes = "confidences", f"shape {conf.shape}"
        else:
            what, shapes = "confidences and correct", f"shapes {conf.shape} and {flags.shape}"
        raise InputValidationError(
            f"{what} must be 1-D (one value per example), got {shapes}; for an (N, C) probability matrix use "
            + matrix_hint
        )
    if correct is not None:
        if conf.shape != flags.shape:
            raise InputValidationError(
                f"confidences and correct must have the same length, got {conf.shape[0]} and {flags.shape[0]}"
            )
        if conf.size == 0:
            raise InputValidationError("no examples: calibration error is undefined for an empty set")
    if conf.size:
        _real(conf, "confidences")
    fix = "did you pass logits? apply softmax and take the maximum"
    _check_unit_interval(conf, "confidences", must="lie", fix=fix)
    return conf, _flags(flags) if correct is not None else flags.astype(bool)


def validate_top1(
    confidences: Any, correct: Any, minimum: int = 1, what: str = "", hint: str = ""
) -> tuple[np.ndarray, np.ndarray]:
    """Top-1 confidences and correctness flags (:func:`check_confidences`), both as float64.

    Parameters
    ----------
    confidences, correct, minimum, what, hint
        Top-1 confidences and 0/1 flags; the fewest allowed, what needs them and what to do instead (message).
    """
    conf, flags = check_confidences(confidences, correct)
    if conf.size < minimum:
        raise InputValidationError(f"{what} needs at least {minimum} fit examples, got {conf.size}; {hint}")
    return conf.astype(np.float64), flags.astype(np.float64)


def check_class_ids(ids: Any, name: str) -> np.ndarray:
    """A group's class ids (a list, set or array of integers; integral floats accepted) as flat int64.

    Parameters
    ----------
    ids, name
        The class ids and their name in the message.
    """
    arr = as_array(list(ids) if isinstance(ids, (set, frozenset)) else ids, name).reshape(-1)
    integral = arr.size == 0 or np.issubdtype(arr.dtype, np.integer)
    if not integral and np.issubdtype(arr.dtype, np.floating):
        integral = bool(np.isfinite(arr).all() and np.all(np.mod(arr, 1) == 0))
    if not integral:
        raise InputValidationError(f"{name} must list integer class ids, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def check_zero_division(zero_division: Any) -> None:
    """``zero_division`` is ``"warn"``, 0, 1 or NaN (scikit-learn's values).

    Parameters
    ----------
    zero_division
        The setting.
    """
    number = isinstance(zero_division, int | float) and not isinstance(zero_division, bool)
    if zero_division != "warn" and not (number and (math.isnan(zero_division) or zero_division in (0, 1))):
        raise InputValidationError(f"zero_division must be 'warn', 0, 1 or nan, got {zero_division!r}")


def check_class_indices(values: Any, name: str, *, n: int | None = None, num_classes: int | None = None,
                        scores: str | None = None) -> np.ndarray:  # fmt: skip
    """Class indices as int64: integers (integral floats accepted) ``>= 0`` and below ``num_classes``.

    Parameters
    ----------
    values, name, n, num_classes
        The class indices, their name, how many there must be and the number of classes (``None``: no check).
    scores
        What the indices index (``"logits"``, ``"probs"``), for the messages; ``None``: ``num_classes``.
    """
    y = as_array(values, name)
    if n is not None and y.shape != (n,):
        raise InputValidationError(f"{name} must have shape ({n},) to match the {scores or 'scores'}, got {y.shape}")
    if not np.issubdtype(y.dtype, np.number) or np.issubdtype(y.dtype, np.complexfloating):
        raise InputValidationError(f"{name} must be integer class indices, got dtype {y.dtype}")
    if not np.issubdtype(y.dtype, np.integer):
        if not (np.isfinite(y).all() and np.all(np.mod(y, 1) == 0)):
            raise InputValidationError(f"{name} must be integer class indices; found NaN or fractional values")
        y = y.astype(np.int64)
    if y.size and ((y < 0).any() or (num_classes is not None and (y >= num_classes).any())):
        values_found = f"got values from {y.min()} to {y.max()}"
        if num_classes is None:
            raise InputValidationError(f"{name} must be >= 0; {values_found}")
        limit = f"num_classes={num_classes}" if scores is None else f"{num_classes} {scores} columns"
        raise InputValidationError(
            f"{name} must lie in [0, {num_classes - 1}] (>= 0 and < {num_classes}: {limit}); {values_found}"
        )
    return y.astype(np.int64, copy=False)


def validate_labels(labels: Any, preds: Any, num_classes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Equal-length 1-D class indices of the true and the predicted classes.

    Parameters
    ----------
    labels, preds, num_classes
        True and predicted classes, and the number of classes (``None``: no upper bound).
    """
    y, p = as_array(labels, "labels"), as_array(preds, "preds")
    if y.ndim != 1 or p.ndim != 1:
        raise InputValidationError(
            f"labels and preds must be 1-D class indices, got shapes {y.shape} and {p.shape} "
            "(for (N, C) scores pass scores.argmax(1))"
        )
    if y.shape != p.shape:
        raise InputValidationError(f"labels and preds must have the same length, got {y.shape[0]} and {p.shape[0]}")
    if y.size == 0:
        raise InputValidationError("no examples: labels and preds are empty")
    if num_classes is not None:
        check_count(num_classes, "num_classes")
    y = check_class_indices(y, "labels", num_classes=num_classes)
    return y, check_class_indices(p, "preds", num_classes=num_classes)


def validate_probs(probs: Any, *, min_classes: int = 2, fix: str = "pass logits=True (or apply softmax first)",
                   hint: str = "; for top-1 confidences use the top-1 estimators",
                   allow_empty: bool = False) -> tuple[np.ndarray, np.dtype[Any]]:  # fmt: skip
    """An ``(N, C)`` matrix of probabilities whose rows sum to 1, as float64, and the input's float dtype.

    Parameters
    ----------
    probs, min_classes, allow_empty
        The matrix, the fewest columns allowed, and whether ``N = 0`` is.
    fix, hint
        What to do with logits, and what to call with another shape, for the messages.
    """
    given = as_array(probs, "probs")
    if given.ndim != 2 or given.shape[1] < min_classes:
        at_least = " with C >= 2 classes" if min_classes == 2 else ""
        shape = given.shape
        raise InputValidationError(f"probs must be an (N, C) probability matrix{at_least}, got shape {shape}{hint}")
    if given.shape[0] == 0 and not allow_empty:
        raise InputValidationError("no examples: the metric is undefined for an empty set")
    p = _real(given, "probs").astype(np.float64)
    _check_unit_interval(p, "probs", must="be probabilities", fix=f"for logits {fix}")
    off = np.abs(p.sum(axis=1) - 1.0) > PROB_SUM_TOL
    if off.any():
        row = int(np.flatnonzero(off)[0])
        raise InputValidationError(
            f"probs rows must sum to 1 (within {PROB_SUM_TOL:g}); {int(off.sum())} of {len(p)} row(s) do not, "
            f"e.g. row {row} sums to {p[row].sum():.6g}. Sigmoid or multilabel scores are not one distribution "
            f"over the classes: for a single-label classifier {fix}; for multilabel scores use the per-label "
            "calibration of modelval.metrics.multilabel (the calibration card takes them with an (N, L) 0/1 "
            "label matrix)"
        )
    return p, given.dtype if np.issubdtype(given.dtype, np.floating) else np.dtype(np.float64)


def validate_logits(logits: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    """Finite ``(N, C)`` logits (float64, ``C >= 2``) and their ``(N,)`` class indices in ``[0, C)``.

    Parameters
    ----------
    logits, labels
        The logits and the true class of each row.
    """
    z = as_array(logits, "logits")
    if z.ndim != 2 or z.shape[1] < 2:
        raise InputValidationError(f"logits must have shape (N, C) with C >= 2 classes, got {z.shape}")
    y = check_class_indices(labels, "labels", n=z.shape[0], num_classes=z.shape[1], scores="logits")
    if z.shape[0] == 0:
        raise InputValidationError("no examples: the logits are empty")
    return _finite(_real(z, "logits").astype(np.float64)), y


def _finite(z: np.ndarray, name: str = "logits") -> np.ndarray:
    if not np.isfinite(z).all():
        bad = int((~np.isfinite(z)).sum())
        raise InputValidationError(f"{name} contain {bad} NaN or infinite value(s); fix or drop those examples")
    return z


def _column(values: Any, name: str) -> np.ndarray:
    """``(N,)`` from ``(N,)`` or ``(N, 1)``; anything else is refused with what to pass instead."""
    arr = as_array(values, name)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise InputValidationError(
            f"{name} must have shape (N,) or (N, 1): one score per example for a binary classifier, got "
            f"{arr.shape}; for an (N, 2) softmax take column 1 (probs[:, 1], or logits[:, 1] - logits[:, 0]); "
            "for (N, L) multilabel scores use modelval.metrics.multilabel"
        )
    return arr


def _scores(scores: Any, name: str, allow_empty: bool) -> np.ndarray:
    s = _column(scores, name)
    if s.size == 0 and not allow_empty:
        raise InputValidationError("no examples: calibration is undefined for an empty set")
    return _real(s, name)


def _binary_labels(labels: Any, n: int) -> np.ndarray:
    """0/1 (or bool) labels of shape ``(N,)`` or ``(N, 1)``, ``n`` of them (one per score), as bool."""
    y = _column(labels, "labels")
    if y.shape != (n,):
        raise InputValidationError(f"labels must have shape ({n},), one 0/1 label per score, got {y.shape}")
    return _flags(y, "labels", _LABEL_HINT)


def binary_logits(scores: Any, *, allow_empty: bool = False) -> np.ndarray:
    """Finite float64 logits, one per example (shape ``(N,)`` or ``(N, 1)``).

    Parameters
    ----------
    scores, allow_empty
        The logits, and whether no examples is allowed.
    """
    return _finite(_scores(scores, "logits", allow_empty).astype(np.float64))


def binary_probabilities(scores: Any, *, logits: bool = False, allow_empty: bool = False) -> np.ndarray:
    """Positive-class probabilities in [0, 1], one per example: float32 for float16/float32 input, else float64.

    Parameters
    ----------
    scores, logits, allow_empty
        The probabilities, shape ``(N,)`` or ``(N, 1)``, or logits (their sigmoid is returned); no examples allowed.
    """
    if logits:
        return sigmoid(binary_logits(scores, allow_empty=allow_empty))
    p = _scores(scores, "probs", allow_empty)
    p = p.astype(binning_dtype(p.dtype))
    _check_unit_interval(p, "probs", must="be positive-class probabilities", fix=_LOGITS_FLAG)
    return p


def validate_binary(probs: Any, labels: Any, *, logits: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Positive-class probabilities (:func:`binary_probabilities`) and their 0/1 labels (bool).

    Parameters
    ----------
    probs, labels, logits
        One score and one 0/1 label per example, shape ``(N,)`` or ``(N, 1)``; logits: their sigmoid is returned.
    """
    p = binary_probabilities(probs, logits=logits)
    return p, _binary_labels(labels, p.shape[0])


def validate_binary_logits(logits: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    """Finite float64 logits (:func:`binary_logits`) and their 0/1 labels (bool).

    Parameters
    ----------
    logits, labels
        One logit and one 0/1 label per example, shape ``(N,)`` or ``(N, 1)``.
    """
    z = binary_logits(logits)
    return z, _binary_labels(labels, z.shape[0])


def validate_multilabel(scores: Any, labels: Any, *, logits: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(N, L)`` probabilities (float32 for float16/float32 input, else float64) and ``(N, L)`` bool labels.

    Parameters
    ----------
    scores, labels, logits
        One score and one 0/1 label per example and label; logits: their sigmoid (float64) is returned.
    """
    name = "logits" if logits else "probs"
    s, y = as_array(scores, name), as_array(labels, "labels")
    if s.ndim != 2:
        raise InputValidationError(
            f"{name} must be an (N, L) matrix (one score per example and label), got shape {s.shape}; for "
            "one score per example use modelval.metrics.binary"
        )
    if s.shape[0] == 0 or s.shape[1] == 0:
        raise InputValidationError(f"no examples or no labels: {name} has shape {s.shape}")
    if y.shape != s.shape:
        raise InputValidationError(
            f"labels must be an (N, L) 0/1 matrix of the scores' shape {s.shape}, got {y.shape}; a multilabel "
            "target marks every label present in an example (class indices (N,) belong to a multiclass model)"
        )
    _real(s, name)
    flags = _flags(y, "labels", " (1 = label present)")
    if logits:
        return sigmoid(_finite(s.astype(np.float64))), flags
    p = s.astype(binning_dtype(s.dtype))
    _check_unit_interval(p, "probs", must="be per-label probabilities", fix=_LOGITS_FLAG)
    return p, flags
