"""Process-level CPU settings that decide inference speed on CPU: the allocator and torch's threads.

Why the allocator: glibc serves every allocation above its mmap threshold (128 KiB, growing to at
most 32 MiB) with a fresh ``mmap`` and returns it with ``munmap`` on free. A CNN forward on CPU
allocates activations of 10-100 MB per layer (batch 64: 64 x 32 x 112 x 112 floats = 103 MB), so
every layer of every batch faults in and zeroes new pages in the kernel. On the 2-core machine this
was half of the wall time as *sys* time, and it grows with the batch size (measured in
docs/performance.md). Raising the mmap threshold and the trim threshold with ``mallopt`` makes
glibc keep and reuse those blocks on its heap: same results, no page-fault storm. It does not
change any number computed, only where the memory comes from.

It changes the whole process, so a library call never does it: the ``modelval`` command line applies
it (opt out with ``MODELVAL_NO_MALLOPT=1``, e.g. when another allocator such as jemalloc is preloaded),
and a program of your own may call :func:`tune_allocator` itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import platform
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads on first use: listing models or parsing specs stays light
    import torch

from modelval.errors import ModelvalError

#: Batch size of the CLI and of evaluate(): measured in docs/performance.md (CPU: 32 and 64 are within
#: noise once the allocator is tuned; 32 halves the activation memory).
DEFAULT_BATCH_SIZE = 32

NO_MALLOPT_ENV = "MODELVAL_NO_MALLOPT"
THREADS_ENV = "MODELVAL_THREADS"

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 1 << 30  # 1 GiB: larger than any activation of the registered models at batch 64
_TRIM_THRESHOLD = 1 << 30  # keep up to 1 GiB of freed heap for the next batch instead of returning it

_tuned: bool | None = None


def tune_allocator() -> bool:
    """Make glibc reuse large freed blocks (see the module docstring). Idempotent; True if applied.

    Does nothing (False) off glibc Linux, or when ``$MODELVAL_NO_MALLOPT`` is 1/true/yes.
    """
    global _tuned
    if _tuned is not None:
        return _tuned
    _tuned = False
    if os.environ.get(NO_MALLOPT_ENV, "").lower() in ("1", "true", "yes") or platform.system() != "Linux":
        return _tuned
    if platform.libc_ver()[0] != "glibc":
        return _tuned
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return _tuned
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _tuned = bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
    return _tuned


def set_threads(threads: int | str | None = None) -> int:
    """Set torch's intra-op threads: a number, "auto" (:func:`auto_threads`), or None for
    ``$MODELVAL_THREADS`` if set, else torch's default. Returns the number in effect.

    The thread count changes speed only; tests check that decisions stay the same.

    Parameters
    ----------
    threads
        A number, ``"auto"`` or ``None`` (``$MODELVAL_THREADS``, else torch's default).
    """
    import torch

    if threads is None and os.environ.get(THREADS_ENV):
        threads = os.environ[THREADS_ENV]
    if threads == "auto":
        threads = auto_threads()
    if threads is not None:
        threads = int(threads)
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def auto_threads() -> int:
    """Threads worth using now: the CPUs this process may run on minus those other processes keep busy.

    Measured on the shared 2-core machine (docs/performance.md): with another job on one core, two
    OpenMP threads run 2-5x *slower* than one (the spinning thread waits for the descheduled one).
    So count the 1-minute load average as busy cores, and never go above torch's default or below 1.
    """
    import torch

    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    try:
        busy = round(os.getloadavg()[0])
    except OSError:
        busy = 0
    return max(1, min(torch.get_num_threads(), cpus - busy))


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``auto`` (CUDA when available, else CPU), ``cpu``, ``cuda`` or ``cuda:N``; a ``torch.device`` passes through.

    The one resolver of modelval: the front door resolves a string once and hands the ``torch.device`` down,
    so one run sees one answer to "auto" (and the functions below it do not ask again).

    Parameters
    ----------
    device
        ``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``mps`` or a ``torch.device``.
    """
    import torch

    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelvalError(f"--device {device} was requested but CUDA is not available on this machine")
    return torch.device(device)


def canonical_device(device: str | torch.device) -> torch.device:
    """``device`` with its index filled in, so that ``cuda`` and ``cuda:0`` compare equal when 0 is the current one.

    A tensor always reports an indexed accelerator (``cuda:0``) while ``torch.device("cuda")`` has no index:
    comparing them as they are would move a model that already sits where it should.

    Parameters
    ----------
    device
        A device name or ``torch.device``.
    """
    import torch

    device = torch.device(device)
    if device.type in ("cpu", "meta"):  # one of each: a tensor reports "cpu" even when "cpu:0" was asked for
        return torch.device(device.type)
    if device.index is not None:
        return device
    current = getattr(getattr(torch, device.type, None), "current_device", None)  # torch.cuda, torch.xpu
    return torch.device(device.type, int(current()) if callable(current) else 0)  # mps: one device, index 0


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


@contextlib.contextmanager
def torch_threads(threads: int | str | None) -> Iterator[int | None]:
    """Use ``threads`` torch threads inside the block and restore the caller's setting after it.

    ``None`` leaves torch alone (and yields ``None``); the setting is process-wide, so a library call
    must not leave it changed.

    Parameters
    ----------
    threads
        A thread count, ``"auto"`` (:func:`auto_threads`) or ``None``.
    """
    if threads is None:
        yield None
        return
    import torch

    previous = torch.get_num_threads()
    try:
        yield set_threads(threads)
    finally:
        torch.set_num_threads(previous)
