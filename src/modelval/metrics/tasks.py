"""Which calibration a set of scores needs: binary, multiclass or multilabel, detected from shapes and ranges.

:func:`detect_task` returns a :class:`TaskInput`: the task, the arrays in the form that task's functions take,
and one sentence saying how the task was decided. ``(N,)`` scores with 0/1 labels are binary; ``(N, C)`` scores
with class indices multiclass; ``(N, L)`` scores with a 0/1 label matrix multilabel, unless every row holds
exactly one 1 and the scores are logits or a softmax: that input is refused as ambiguous, as are ``(N,)``
"logits" that all lie in [0, 1], with a reason that names ``task=`` (``--task``). The rules, and what a forced
task also accepts, are in ``docs/binary.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from modelval.errors import InputValidationError
from modelval.metrics.validation import PROB_SUM_TOL, as_array, check_choice

Task = Literal["binary", "multiclass", "multilabel"]
TASKS: tuple[str, ...] = ("binary", "multiclass", "multilabel")


@dataclass(frozen=True)
class TaskInput:
    """The detected (or given) task, with scores and labels shaped for it."""

    task: Task
    scores: np.ndarray  # binary: (N,); multiclass: (N, C); multilabel: (N, L)
    labels: np.ndarray  # binary: (N,) 0/1; multiclass: (N,) class indices; multilabel: (N, L) 0/1
    from_logits: bool
    detection: str  # how the task was decided, one sentence


def _zero_one(labels: np.ndarray) -> bool:
    if labels.dtype == np.bool_:
        return True
    if not np.issubdtype(labels.dtype, np.number) or labels.size == 0:
        return False
    return bool(np.isin(labels, (0, 1)).all())


def _rows_sum_to_one(p: np.ndarray) -> bool:
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.abs(p.astype(np.float64).sum(axis=1) - 1.0) <= PROB_SUM_TOL))


def _all_in_unit_interval(s: np.ndarray) -> bool:
    if not np.issubdtype(s.dtype, np.number) or s.size == 0:
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.all((s >= 0) & (s <= 1)))


def _flat(arr: np.ndarray) -> np.ndarray:
    return arr[:, 0] if arr.ndim == 2 and arr.shape[1] == 1 else arr


_FORCE = "pass task='{task}' (--task {task})"
_EITHER = "pass task='multiclass' or task='multilabel' (--task multiclass or --task multilabel)"
_ONE = {"logits": "logit", "probs": "probability"}


def detect_task(labels: Any, *, logits: Any = None, probs: Any = None, task: str | None = None) -> TaskInput:
    """Decide binary / multiclass / multilabel from the shapes and ranges (see the module docstring).

    ``task`` (``"binary"``, ``"multiclass"``, ``"multilabel"``) skips the detection and only checks
    that the arrays fit it; ``None`` or ``"auto"`` detects. Exactly one of ``logits`` and ``probs``.
    Values are not validated beyond what the decision needs (NaN, ranges and label values are checked
    by the task's own functions afterwards).

    Parameters
    ----------
    labels
        Class indices ``(N,)``, 0/1 labels ``(N,)`` or an ``(N, L)`` 0/1 label matrix.
    logits, probs
        The scores, exactly one of them.
    task
        The task, or ``None``/``"auto"`` to detect it.
    """
    if (logits is None) == (probs is None):
        raise InputValidationError("give exactly one of logits and probs")
    from_logits = logits is not None
    kind = "logits" if from_logits else "probs"
    s = as_array(logits if from_logits else probs, kind)
    y = as_array(labels, "labels")
    if task in (None, "auto"):
        return _detect(s, y, from_logits, kind)
    check_choice(task, "task", TASKS, hint=" or 'auto'")
    given = f"given: task='{task}'"
    if task == "binary":
        return _as_binary(s, y, from_logits, kind, given)
    if task == "multiclass":
        return _as_multiclass(s, y, from_logits, kind, given)
    return _as_multilabel(s, y, from_logits, kind, given)


def _as_binary(s: np.ndarray, y: np.ndarray, from_logits: bool, kind: str, given: str) -> TaskInput:
    s = _flat(s)
    if s.ndim == 2 and s.shape[1] == 2:
        if from_logits:
            s = s[:, 1].astype(np.float64) - s[:, 0]
            given += "; (N, 2) logits: the positive-class logit is column 1 minus column 0"
        else:
            if not _rows_sum_to_one(s):
                raise InputValidationError(
                    "task='binary' with (N, 2) probs needs rows that sum to 1 (a two-class softmax, column 1 = "
                    "positive); these do not. For two independent scores use task='multilabel'"
                )
            s = s[:, 1]
            given += "; (N, 2) softmax: column 1 is the positive class"
    if s.ndim != 1:
        raise InputValidationError(
            f"task='binary' needs one {_ONE[kind]} per example, shape (N,) or (N, 1) (or an (N, 2) softmax), "
            f"got {s.shape}"
        )
    y = _flat(y)
    if y.ndim != 1:
        raise InputValidationError(f"task='binary' needs labels of shape (N,) with values 0/1, got shape {y.shape}")
    return TaskInput("binary", s, y, from_logits, given)


def _as_multiclass(s: np.ndarray, y: np.ndarray, from_logits: bool, kind: str, given: str) -> TaskInput:
    if s.ndim != 2 or s.shape[1] < 2:
        raise InputValidationError(
            f"task='multiclass' needs (N, C) {kind} with C >= 2 classes, got shape {s.shape}; one score per "
            "example is a binary task"
        )
    if y.ndim == 2:
        if y.shape != s.shape or not _zero_one(y) or not np.all(y.sum(axis=1) == 1):
            raise InputValidationError(
                f"task='multiclass' needs labels as (N,) class indices or one-hot (N, C) rows; got shape {y.shape}"
                + ("" if y.shape != s.shape else " with rows that are not one-hot")
            )
        y = np.argmax(y, axis=1)
        given += "; one-hot labels converted to class indices"
    return TaskInput("multiclass", s, y, from_logits, given)


def _as_multilabel(s: np.ndarray, y: np.ndarray, from_logits: bool, kind: str, given: str) -> TaskInput:
    if s.ndim != 2:
        raise InputValidationError(f"task='multilabel' needs (N, L) {kind}, got shape {s.shape}")
    if y.shape != s.shape:
        raise InputValidationError(
            f"task='multilabel' needs an (N, L) 0/1 label matrix of the scores' shape {s.shape}, got {y.shape}"
        )
    return TaskInput("multilabel", s, y, from_logits, given)


def _detect(s: np.ndarray, y: np.ndarray, from_logits: bool, kind: str) -> TaskInput:
    one_score = s.ndim == 1 or (s.ndim == 2 and s.shape[1] == 1)
    if one_score:
        s, y = _flat(s), _flat(y)
        if y.ndim != 1 or y.shape[0] != s.shape[0]:
            raise InputValidationError(
                f"one {_ONE[kind]} per example (shape {s.shape}) is a binary task: labels must be (N,) 0/1, got "
                f"shape {y.shape}"
            )
        if not _zero_one(y):
            raise InputValidationError(
                f"one {_ONE[kind]} per example is a binary task, but the labels are not all 0/1 (found "
                f"{np.unique(y)[:5].tolist()}...); a multiclass model needs (N, C) scores"
            )
        if from_logits and _all_in_unit_interval(s):
            raise InputValidationError(
                "ambiguous: every one of the (N,) 'logits' lies in [0, 1], so they look like probabilities; store "
                "them as 'probs', or " + _FORCE.format(task="binary") + " to read them as logits"
            )
        return TaskInput(
            "binary", s, y, from_logits, f"detected: one {_ONE[kind]} per example and 0/1 labels, 1 = positive class"
        )
    if s.ndim != 2:
        raise InputValidationError(f"{kind} must be (N,), (N, 1) or (N, C), got shape {s.shape}")
    if y.ndim == 1:
        note = f"detected: (N, {s.shape[1]}) {kind} with one class index per example"
        if s.shape[1] == 2:
            note += " (for the positive-class calibration of column 1 pass task='binary')"
        return TaskInput("multiclass", s, y, from_logits, note)
    if y.ndim != 2 or y.shape != s.shape:
        raise InputValidationError(
            f"labels of shape {y.shape} fit neither task: (N,) class indices (multiclass) or an (N, L) 0/1 "
            f"matrix of the scores' shape {s.shape} (multilabel)"
        )
    if not _zero_one(y):
        raise InputValidationError(
            f"labels of shape {y.shape} must be a 0/1 matrix (multilabel: 1 = label present); found other values"
        )
    one_hot = bool(np.all(y.sum(axis=1) == 1))
    if not one_hot:
        return TaskInput(
            "multilabel", s, y, from_logits, f"detected: (N, L) {kind} with an (N, L) 0/1 label matrix whose rows "
            "do not each hold exactly one 1",
        )  # fmt: skip
    if not from_logits and not _rows_sum_to_one(s):
        return TaskInput(
            "multilabel", s, y, from_logits, "detected: (N, L) probs whose rows do not sum to 1 (not a softmax) with "
            "an (N, L) 0/1 label matrix",
        )  # fmt: skip
    what = "logits" if from_logits else "probs whose rows sum to 1"
    raise InputValidationError(
        f"ambiguous: (N, L) {what} with exactly one positive label per row fit both a softmax with one-hot labels "
        f"and L independent labels; {_EITHER}"
    )
