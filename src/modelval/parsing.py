"""How a setting's text (a flag, a variable, an ini key, a config value) is read and checked.

Each reader takes the text as written and returns the value, or raises ``ValueError`` saying what is allowed;
:class:`modelval.settings.Setting` names one of them as its ``parse``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path

from modelval.runtime import THREADS, IntRange, device_problem

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def boolean(text: str) -> bool:
    """``1``/``true``/``yes``/``on`` or ``0``/``false``/``no``/``off`` (any case).

    Parameters
    ----------
    text
        The value as written.
    """
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"{text!r} is not true or false; write 1 or 0")


def whole(limits: IntRange) -> Callable[[str], int]:
    """A whole number within ``limits`` (the library's own, :mod:`modelval.runtime`).

    Parameters
    ----------
    limits
        The range the number must lie in.
    """

    def parse(text: str) -> int:
        try:
            number = int(text)
        except (TypeError, ValueError):
            raise ValueError(f"{text!r} is not a whole number; {limits.what}") from None
        problem = limits.problem(number)
        if problem is not None:
            raise ValueError(f"{number} {problem}; {limits.what}")
        return number

    parse.__name__ = "integer"
    return parse


def number(low: float, high: float, what: str, *, low_open: bool = False) -> Callable[[str], float]:
    """A finite number in ``[low, high]`` (``(low, high]`` with ``low_open``).

    Parameters
    ----------
    low, high
        The range.
    what
        What the number is, in words (for the error).
    low_open
        Whether ``low`` itself is out.
    """

    def parse(text: str) -> float:
        try:
            value = float(text)
        except (TypeError, ValueError):
            raise ValueError(f"{text!r} is not a number; {what}") from None
        if not math.isfinite(value) or not (low < value if low_open else low <= value) or not value <= high:
            raise ValueError(f"{text} is out of range; {what}")
        return value

    parse.__name__ = "number"
    return parse


def device(text: str) -> str:
    """``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.

    Parameters
    ----------
    text
        The value as written.
    """
    problem = device_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text


def threads(text: str) -> str:
    """``auto`` or a thread count (kept as text: the runtime resolves ``auto`` when it runs).

    Parameters
    ----------
    text
        The value as written.
    """
    return text if text == "auto" else str(whole(THREADS)(text))


def channels(text: str) -> tuple[float, float, float]:
    """Three comma-separated numbers, one per RGB channel (``0.5,0.5,0.5``).

    Parameters
    ----------
    text
        The value as written.
    """
    parts = [part.strip() for part in str(text).split(",")]
    try:
        values = tuple(float(part) for part in parts)
    except ValueError:
        raise ValueError(f"{text!r}: expected three comma-separated numbers, e.g. 0.5,0.5,0.5") from None
    if len(values) != 3 or not all(math.isfinite(v) for v in values):
        raise ValueError(f"{text!r}: expected three finite comma-separated numbers, e.g. 0.5,0.5,0.5")
    return values[0], values[1], values[2]


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.IGNORECASE)


def size(text: str) -> int:
    """A size in bytes: ``2G``, ``500M``, ``64K`` (powers of 1024) or a number of bytes.

    Parameters
    ----------
    text
        The value as written.
    """
    match = _SIZE.match(str(text))
    if match is None:
        raise ValueError(f"{text!r}: give a size such as 2G, 500M or a number of bytes")
    scale = 1024 ** " KMGT".index(match.group(2).upper() or " ")
    return int(float(match.group(1)) * scale)


def path(text: str) -> Path:
    """A file or folder (``~`` expanded).

    Parameters
    ----------
    text
        The value as written.
    """
    if not str(text).strip():
        raise ValueError("an empty path")
    return Path(text).expanduser()
