"""Where a command's result goes: stdout carries the result and nothing else.

Model code may print while it loads or runs (a factory calling a library that says "Loaded pretrained
weights ..."); with ``--json`` such a line before the object makes stdout unparsable. :func:`main`
therefore points ``sys.stdout`` at stderr while a command runs (:func:`results_to_stdout`), and the
commands write their result with :func:`out` / :func:`out_json`, which go to the real stdout.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Iterator
from typing import Any, TextIO

_result_stream: list[TextIO] = []


@contextlib.contextmanager
def results_to_stdout() -> Iterator[None]:
    """Inside the block, ``print`` goes to stderr and :func:`out` to the stdout of the caller."""
    _result_stream.append(sys.stdout)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _result_stream.pop()


def out(text: str = "") -> None:
    """Write one line of the command's result to stdout (not to wherever model code prints)."""
    stream = _result_stream[-1] if _result_stream else sys.stdout
    print(text, file=stream)
    stream.flush()


def out_json(payload: Any) -> None:
    """The command's ``--json`` result: strict JSON (undefined numbers are null with their reason)."""
    from modelval import jsonio

    out(payload if isinstance(payload, str) else jsonio.dumps(payload, indent=2))


def warn(message: str) -> None:
    """A one-line note on stderr that does not change the exit status."""
    print(f"modelval: warning: {message}", file=sys.stderr)


def fmt(x: float | None, digits: int = 4) -> str:
    """A number with ``digits`` decimals, ``-`` for none or NaN (the calibration and metrics tables)."""
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def fmt_interval(interval: Any, digits: int = 4) -> str:
    """``[low, high]`` of an interval object or pair, ``-`` for none."""
    if interval is None:
        return "-"
    low, high = (interval.low, interval.high) if hasattr(interval, "low") else interval
    return f"[{fmt(low, digits)}, {fmt(high, digits)}]"


def fmt_ci_list(interval: list[float] | None) -> str:
    """``  95% CI [low, high]``, or nothing where there is no interval."""
    return f"  95% CI {fmt_interval(interval)}" if interval else ""
