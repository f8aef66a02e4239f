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
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads on first use: listing models or parsing specs stays light
    import torch

from modelval.errors import ModelvalError

#: Batch size of the CLI and of evaluate(): measured in docs/performance.md (CPU: 32 and 64 are within
#: noise once the allocator is tuned; 32 halves the activation memory).
DEFAULT_BATCH_SIZE = 32


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
    from modelval.settings import value  # the settings read this module's limits: imported when used

    if not value("tune_allocator") or platform.system() != "Linux":
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

    if threads is None:
        from modelval.settings import setting

        threads = setting("threads").from_env()  # $MODELVAL_THREADS, else None: torch's default
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
    mps = getattr(torch.backends, "mps", None)
    if device.startswith("mps") and not (mps is not None and mps.is_available()):
        # torch says so only when the first tensor moves, after the stimuli and the weights loaded (was exit 3)
        raise ModelvalError(f"--device {device} was requested but MPS (Apple's GPU) is not available on this machine")
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
