"""Per-example prediction files (JSONL): one object per line, ``{"label": int, "pred": int, "conf": float}``.

Other keys are ignored; ``conf`` is the top-1 probability, in [0, 1]. A file whose first row has no ``conf``
cannot be evaluated for calibration and is *skipped* with the reason (confidence is never reconstructed); a
malformed row is dropped and counted by reason, or raises :class:`~modelval.errors.DataError` with ``strict``.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from modelval.errors import DataError


@dataclass
class PredictionFile:
    path: Path
    labels: np.ndarray
    preds: np.ndarray
    conf: np.ndarray
    rows_used: int = 0
    rows_dropped: int = 0
    drop_reasons: Counter[str] = field(default_factory=Counter)
    skipped: bool = False
    reason: str | None = None


#: The largest class index a prediction row may carry (ImageNet-21k has 21,841 classes).
MAX_CLASS_INDEX = 1_000_000


def _row_problem(row: Any, require_conf: bool = True) -> tuple[str | None, tuple[int, int, float] | None]:
    if not isinstance(row, dict):
        return "not a JSON object", None
    for key in ("label", "pred", "conf") if require_conf else ("label", "pred"):
        if key not in row:
            return f"missing {key}", None
    label, pred, conf = row["label"], row["pred"], row.get("conf", math.nan)
    for key, value in (("label", label), ("pred", pred)):
        # bool is an int in Python but never a class index here
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f"{key} not a non-negative integer", None
        if value > MAX_CLASS_INDEX:
            # JSON integers are unbounded; numpy's are 64-bit. Past this no classifier has a class.
            return f"{key} above {MAX_CLASS_INDEX} (not a class index)", None
    problem = _conf_problem(conf)
    if not require_conf:
        # The row counts for accuracy either way; its conf is kept only where it is valid.
        return None, (label, pred, math.nan if problem else float(conf))
    if problem:
        return problem, None
    return None, (label, pred, float(conf))


def _conf_problem(conf: Any) -> str | None:
    if isinstance(conf, bool) or not isinstance(conf, (int, float)):
        return "conf not a number"
    if math.isnan(conf):
        return "conf is NaN"
    if not 0.0 <= conf <= 1.0:
        return "conf outside [0, 1]"
    return None


def read_predictions(path: str | Path, *, strict: bool = False, require_conf: bool = True) -> PredictionFile:
    """Read one JSONL prediction file under the rules in the module docstring.

    Parameters
    ----------
    path
        The file.
    strict
        A malformed row is a :class:`~modelval.errors.DataError` instead of being dropped and counted.
    require_conf
        ``False`` (accuracy and F1 need no confidence): every row with a valid ``label`` and ``pred`` is kept,
        its ``conf`` where it is valid and NaN where it is missing or bad.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as error:
        raise DataError(f"prediction file not found: {path}") from error
    except UnicodeDecodeError as error:
        raise DataError(f"{path}: not UTF-8 text ({error}); expected JSONL") from error
    empty = np.zeros(0, dtype=np.int64)
    result = PredictionFile(path, empty, empty, np.zeros(0))
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        result.skipped, result.reason = True, "empty file (no rows)"
        return result
    first_line = lines[0][1]
    try:
        first = json.loads(first_line)
    except json.JSONDecodeError:
        first = None
    if require_conf and isinstance(first, dict) and "conf" not in first:
        # Seed rule: no conf -> no ECE; such a file is never repaired.
        result.skipped, result.reason = True, "no 'conf' key in the first row; ECE is undefined for this file"
        return result
    labels: list[int] = []
    preds: list[int] = []
    confs: list[float] = []
    problem: str | None
    values: tuple[int, int, float] | None
    for line_no, line in lines:
        try:
            row = json.loads(line)  # Python's json reads NaN/Infinity; _row_problem rejects them
        except json.JSONDecodeError:
            problem, values = "invalid JSON", None
        else:
            problem, values = _row_problem(row, require_conf)
        if problem is not None:
            if strict:
                raise DataError(f"{path}:{line_no}: {problem} (drop --strict to skip and count bad rows)")
            result.drop_reasons[problem] += 1
            continue
        assert values is not None  # _row_problem returns values exactly when there is no problem
        label, pred, conf = values
        labels.append(label)
        preds.append(pred)
        confs.append(conf)
    result.labels = np.asarray(labels, dtype=np.int64)
    result.preds = np.asarray(preds, dtype=np.int64)
    result.conf = np.asarray(confs, dtype=np.float64)
    result.rows_used = len(labels)
    result.rows_dropped = sum(result.drop_reasons.values())
    if result.rows_used == 0:
        result.skipped, result.reason = True, f"no valid rows ({result.rows_dropped} dropped)"
    return result
