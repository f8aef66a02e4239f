"""Exceptions with messages written for the person running the tool.

Every error modelval raises on purpose derives from :class:`ModelvalError`; the CLI prints its
message and exits non-zero without a traceback. Each message says what was wrong and how to fix it.
"""

from __future__ import annotations


class ModelvalError(Exception):
    """Base class of all errors raised deliberately by modelval."""


class DataError(ModelvalError, ValueError):
    """The stimulus folder, an image, a decision file or another input file is not as expected."""


class ChecksumError(DataError):
    """A file's SHA-256 digest differs from the one it must have."""


class DownloadError(ModelvalError):
    """A download failed (no network, refused connection, timeout, HTTP error)."""


class WeightsNotAvailableError(ModelvalError):
    """Model weights are neither cached nor downloadable (offline or download failed)."""


class InputValidationError(ModelvalError, ValueError):
    """Arguments of a metric function are malformed (shape, range, NaN, ...)."""
