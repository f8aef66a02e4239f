"""Strict JSON output: every ``--json`` document parses with a strict parser.

Python's :func:`json.dumps` writes ``NaN`` and ``Infinity``, which are not JSON: a researcher's
``jq`` or ``JSON.parse`` rejects the whole document. Here a non-finite number becomes ``null``, and
the object that holds it gains a ``null_reasons`` entry saying why (``{"difference": "..."}``), so a
reader never has to guess whether a ``null`` means "missing" or "undefined".

Callers that know why a value is undefined say so with :class:`Undefined`; a bare NaN gets a
generic reason.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

NAN_REASON = "not a number (undefined: no data to compute it from)"
INF_REASON = "infinite"


@dataclass(frozen=True)
class Undefined:
    """A value that is deliberately absent; written as ``null`` with ``reason`` in ``null_reasons``."""

    reason: str


def _nonfinite_reason(value: float) -> str | None:
    if math.isnan(value):
        return NAN_REASON
    if math.isinf(value):
        return f"{INF_REASON} ({'+' if value > 0 else '-'}inf)"
    return None


def _plain(value: Any) -> Any:
    """numpy scalars and arrays, tuples, sets and paths -> plain Python values."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    if isinstance(value, PurePath):
        return str(value)
    return value


def _clean(value: Any, path: str, reasons: dict[str, str]) -> Any:
    value = _plain(value)
    if isinstance(value, Undefined):
        reasons[path] = value.reason
        return None
    if isinstance(value, float):
        reason = _nonfinite_reason(value)
        if reason is not None:
            reasons[path] = reason
            return None
        return value
    if isinstance(value, Mapping):
        return strict(value)
    if isinstance(value, list):
        return [_clean(item, f"{path}[{i}]", reasons) for i, item in enumerate(value)]
    return value


def strict(obj: Any) -> Any:
    """A copy of ``obj`` that :func:`json.dumps` writes with ``allow_nan=False``.

    In each mapping, non-finite numbers (also inside lists) become ``None`` and their reasons are
    collected under the key ``null_reasons`` of that same mapping.

    Parameters
    ----------
    obj
        A JSON-ready object whose undefined numbers may be NaN or :class:`Undefined`.
    """
    obj = _plain(obj)
    if isinstance(obj, Mapping):
        reasons: dict[str, str] = dict(obj.get("null_reasons") or {})
        out = {str(key): _clean(value, str(key), reasons) for key, value in obj.items() if key != "null_reasons"}
        if reasons:
            out["null_reasons"] = reasons
        return out
    if isinstance(obj, list):
        top: dict[str, str] = {}
        cleaned = [_clean(item, f"[{i}]", top) for i, item in enumerate(obj)]
        if top:
            # A bare list cannot carry reasons; wrap nothing, but make the failure loud in development.
            return [None if isinstance(item, float) and not math.isfinite(item) else item for item in cleaned]
        return cleaned
    return _clean(obj, "", {})


def dumps(obj: Any, **kwargs: Any) -> str:
    """:func:`json.dumps` of :func:`strict` ``(obj)``; raises rather than write ``NaN``.

    Parameters
    ----------
    obj
        The object.
    **kwargs
        ``json.dumps``'s options (``indent``).
    """
    return json.dumps(strict(obj), allow_nan=False, **kwargs)
