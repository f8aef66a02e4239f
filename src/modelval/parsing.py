"""How a setting's value is read and checked: from its text, and against its limits.

Each reader takes the text as written (a flag, a variable, an ini key) and returns the value, or raises
``ValueError`` saying what is allowed; :class:`modelval.settings.Setting` names one of them as its ``parse``.
The limits (:class:`IntRange`, :func:`device_problem`, ...) are checked with the same code and the same words by
the command line, the library's options and the pytest plugin.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path

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


#: numpy's seeds are whole numbers from 0 to 2**128 - 1; a command-line --seed is far below that.
def check_seed(seed: object) -> int:
    """``seed`` when numpy's random generator can take it; else one line (a negative ``--seed`` was a traceback).

    Every seeded computation (bootstrap, permutation test) checks its seed here before drawing.

    Parameters
    ----------
    seed
        The seed given.
    """
    import numbers

    from modelval.errors import InputValidationError

    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or int(seed) < 0:
        raise InputValidationError(f"the seed must be a whole number >= 0, got {seed!r}")
    return int(seed)


# --- the limits of the settings, in one place: the command line's argument types and the library's options
# --- (EvaluationOptions, ModelOptions, the pytest plugin) check them with the same code and the same words.


class IntRange:
    """A setting that is a whole number from ``low`` to ``high``; ``what`` says so in words (the error's end)."""

    def __init__(self, low: int, high: int, what: str) -> None:
        self.low, self.high, self.what = low, high, what

    def problem(self, value: object) -> str | None:
        """What is wrong with ``value`` (``"is out of range"``), or None when it is allowed.

        Parameters
        ----------
        value
            The value given.
        """
        import numbers

        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            return "is not a whole number"
        if not self.low <= int(value) <= self.high:
            return "is out of range"
        return None

    def check(self, value: object, name: str) -> int:
        """``value`` as an int, or an :class:`~modelval.errors.InputValidationError` naming ``name``.

        Parameters
        ----------
        value
            The value given.
        name
            Its name, for the error.
        """
        problem = self.problem(value)
        if problem is not None:
            from modelval.errors import InputValidationError

            raise InputValidationError(f"{name}={value!r} {problem}; {self.what}")
        return int(value)  # type: ignore[call-overload]


#: Generous upper bounds: past them a value is a typo (or an attack on memory), not a setting.
MAX_BATCH_SIZE = 65_536
MAX_WORKERS = 256
MAX_THREADS = 1024
MAX_BOOTSTRAP = 100_000
MAX_PERMUTATIONS = 1_000_000
BATCH_SIZE = IntRange(1, MAX_BATCH_SIZE, f"the batch size is 1 to {MAX_BATCH_SIZE}")
WORKERS = IntRange(0, MAX_WORKERS, f"decoding workers are 0 (decode in this process) to {MAX_WORKERS}")
THREADS = IntRange(1, MAX_THREADS, f"threads are 'auto' or 1 to {MAX_THREADS}")
BOOTSTRAP = IntRange(0, MAX_BOOTSTRAP, f"bootstrap resamples are 0 (off) to {MAX_BOOTSTRAP}")
PERMUTATIONS = IntRange(0, MAX_PERMUTATIONS, f"permutations are 0 (no test) to {MAX_PERMUTATIONS}")

_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
DEVICE_CHOICES = "auto, cpu, cuda, cuda:N or mps"


def device_problem(device: object) -> str | None:
    """``"unknown device 'tpu'; use auto, cpu, cuda, cuda:N or mps"``, or None for a device modelval runs on.

    A ``torch.device`` passes (it is resolved already). The command line's ``--device``, the plugin's
    ``--modelval-device`` and :class:`~modelval.api.options.ModelOptions` all ask this one function.

    Parameters
    ----------
    device
        The device given.
    """
    if not isinstance(device, str):
        return None if type(device).__name__ == "device" else f"a device is a name ({DEVICE_CHOICES}), got {device!r}"
    if not _DEVICE.match(device):
        return f"unknown device {device!r}; use {DEVICE_CHOICES}"
    return None


def check_device(device: object) -> object:
    """``device`` when :func:`device_problem` finds nothing; else an ``InputValidationError`` with its words.

    Parameters
    ----------
    device
        The device given.
    """
    problem = device_problem(device)
    if problem is not None:
        from modelval.errors import InputValidationError

        raise InputValidationError(problem)
    return device


def check_threads(threads: object) -> object:
    """``None``, ``"auto"`` or a thread count from 1 to :data:`MAX_THREADS`.

    Parameters
    ----------
    threads
        The thread count given.
    """
    if threads is None or threads == "auto":
        return threads
    if isinstance(threads, str) and threads.strip().isdigit():
        return str(THREADS.check(int(threads), "threads"))
    return THREADS.check(threads, "threads")
