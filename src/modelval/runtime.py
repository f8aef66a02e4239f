"""Process-level CPU settings that decide inference speed on CPU: the allocator and torch's threads.

Why the allocator: glibc serves every allocation above its mmap threshold (128 KiB, growing to at
most 32 MiB) with a fresh ``mmap`` and returns it with ``munmap`` on free. A CNN forward on CPU
allocates activations of 10-100 MB per layer (batch 64: 64 x 32 x 112 x 112 floats = 103 MB), so
every layer of every batch faults in and zeroes new pages in the kernel. On the 2-core machine this
was half of the wall time as *sys* time, and it grows with the batch size (measured in
docs/performance.md). Raising the mmap threshold and the trim threshold with ``mallopt`` makes
glibc keep and reuse those blocks on its heap: same results, no page-fault storm. It does not
change any number computed, only where the memory comes from.

Opt out with ``MODELVAL_NO_MALLOPT=1`` (e.g. when another allocator such as jemalloc is preloaded).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

import torch

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


def set_threads(threads: int | None = None) -> int:
    """Set torch's intra-op threads to ``threads``, else ``$MODELVAL_THREADS``, else leave torch's default.

    Returns the number in effect. Thread count changes speed only; decisions are checked to be the same.
    """
    if threads is None and os.environ.get(THREADS_ENV):
        threads = int(os.environ[THREADS_ENV])
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    return torch.get_num_threads()
