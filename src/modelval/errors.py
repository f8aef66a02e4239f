"""Exceptions with messages written for the person running the tool.

Every error modelval raises on purpose derives from :class:`ModelvalError`; the CLI prints its
message and exits non-zero without a traceback. Each message says what was wrong and how to fix it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator


class ModelvalError(Exception):
    """Base class of all errors raised deliberately by modelval."""


class DataError(ModelvalError, ValueError):
    """The stimulus folder, an image, a decision file or another input file is not as expected."""


class ChecksumError(DataError):
    """A file's SHA-256 digest differs from the one it must have."""


class DownloadError(ModelvalError):
    """A download failed (no network, refused connection, timeout, HTTP error)."""


class NetworkError(DownloadError):
    """A host could not be reached (its name did not resolve, the connection was refused or timed out): the
    network, not the file asked for."""


class WeightsNotAvailableError(ModelvalError):
    """Model weights are neither cached nor downloadable (offline or download failed)."""


class InputValidationError(ModelvalError, ValueError):
    """Arguments of a metric function are malformed (shape, range, NaN, ...)."""


class UserCodeError(ModelvalError):
    """The user's model code raised: a factory file at import or in its call, a torch.hub entry, a forward.

    The message is one line naming the file or callable and the exception; the original exception is
    chained (``__cause__``), so ``--debug`` (or ``raise ... from``) still shows its traceback.
    """


class DeviceMismatchError(ModelvalError):
    """A forward met tensors on two devices: the inputs modelval fed on one, (part of) the model on another.

    Raised instead of :class:`UserCodeError` because the usual cause is not a bug in the user's code but where
    the model and modelval's inputs were put; the message names the input device and how to line them up.
    """


class OutOfMemory(UserCodeError):
    """A forward ran out of device memory (CUDA's, MPS's or the host's).

    :func:`modelval.evaluation.model_outputs` retries a batch that ran out at half its size; this error reaches the
    caller only when one image at a time does not fit either. An illegal memory access is never this error (it is
    a defect, not a lack of memory, and the device is not usable after it), so it is never retried.
    """


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is torch saying that a device ran out of memory (never an illegal memory access).

    Parameters
    ----------
    error
        What torch raised.
    """
    text = str(error)
    if "illegal memory access" in text.lower():
        return False
    if type(error).__name__ == "OutOfMemoryError":  # torch.OutOfMemoryError, torch.cuda.OutOfMemoryError
        return True
    return isinstance(error, RuntimeError) and (
        "CUDA out of memory" in text or "MPS backend out of memory" in text or "DefaultCPUAllocator: can't allocate"
        in text
    )


@contextlib.contextmanager
def placing(what: str, device: object) -> Iterator[None]:
    """Move ``what`` (a model's weights) to ``device`` inside the block; running out of memory is one line.

    Parameters
    ----------
    what
        What is being moved, in words.
    device
        Where to.
    """
    try:
        yield
    except Exception as error:
        if not is_out_of_memory(error):
            raise
        raise OutOfMemory(
            f"{what} does not fit in the memory of {device} ({describe_exception(error, limit=160)}): use a device "
            "with more free memory, or --device cpu"
        ) from error


class ModelOutputError(ModelvalError, ValueError):
    """A model's output cannot be a classifier's answer: not a tensor, the wrong shape, NaN or infinite."""


def failure_class(error: BaseException) -> str:
    """What kind of failure ``error`` is, by its type: ``out of memory``, ``model outputs`` (not a classifier's
    answer: NaN, infinite, the wrong shape), ``load`` (weights, downloads, the model's own code), ``data`` or
    ``error`` (the nightly's page shows it per failed cell).

    Parameters
    ----------
    error
        The exception a case failed with.
    """
    classes: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], str], ...] = (
        (OutOfMemory, "out of memory"), (ModelOutputError, "model outputs"), (DataError, "data"),
        ((WeightsNotAvailableError, DownloadError, UserCodeError, DeviceMismatchError), "load"),
    )  # fmt: skip
    return next((name for kind, name in classes if isinstance(error, kind)), "error")


def describe_exception(error: BaseException, *, limit: int = 300) -> str:
    """``"RuntimeError: first line of the message"``: an exception in one line, cut at ``limit`` characters.

    Parameters
    ----------
    error
        The exception.
    limit
        The longest the text may be.
    """
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: torch's wordings of "these tensors sit on different devices" (CUDA kernels, cuDNN, RNNs, indexing, meta),
#: matched case-insensitively against the whole message. Conv's "Input type (...) and weight type (...)" is
#: also torch's dtype mismatch, so it is read apart (:func:`is_device_mismatch`).
_DEVICE_WORDINGS = re.compile(
    r"expected all tensors to be on the same device"
    r"|is not on the expected device"
    r"|tensors are not at the same device"
    r"|to have the same device as tensor"
    r"|expected object of device type"
    r"|is on (?:cpu|gpu)\b.*but expected (?:it|them) to be on"
    r"|on the same device as the indexed tensor",
    re.IGNORECASE,
)
_TYPE_PAIR = re.compile(r"input type \(([^)]*)\) and (?:weight|bias) type \(([^)]*)\) should be the same", re.I)
_DEVICE_TAGS = ("cuda", "mps", "xpu", "meta")


def _device_of_type(name: str) -> str:
    """``torch.cuda.FloatTensor`` / ``CUDAFloatType`` -> ``cuda``; a type naming no accelerator is on the CPU."""
    lowered = name.lower()
    return next((tag for tag in _DEVICE_TAGS if tag in lowered), "cpu")


def is_device_mismatch(error: BaseException) -> bool:
    """Whether ``error`` is torch saying that one operation got tensors on two devices.

    ``Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same`` is one;
    ``Input type (double) and bias type (float) should be the same`` is a dtype mismatch on one device and is not.

    Parameters
    ----------
    error
        What torch raised.
    """
    if not isinstance(error, RuntimeError):
        return False
    message = str(error)
    pair = _TYPE_PAIR.search(message)
    if pair is not None:
        return _device_of_type(pair.group(1)) != _device_of_type(pair.group(2))
    return _DEVICE_WORDINGS.search(message) is not None


@contextlib.contextmanager
def user_code(what: str, *, inputs_on: str | None = None) -> Iterator[None]:
    """Run the user's code inside the block; an exception it raises becomes one :class:`UserCodeError` line.

    ``what`` names the code (``"the factory nets.py:build()"``): the message is ``"<what> raised
    <Type>: <message>"``. A :class:`ModelvalError` passes through unchanged (it is already a message for
    the user), as do ``KeyboardInterrupt`` and ``SystemExit``.

    ``inputs_on`` (a forward: the device modelval fed the inputs on) turns torch's device-mismatch errors into
    one :class:`DeviceMismatchError` line saying where the inputs were and how to put the model there: such a
    failure comes from where the model and the inputs were placed, not from a bug in the code.

    Parameters
    ----------
    what
        The code that runs, in words (``the model factory nets.py:build()``).
    inputs_on
        The device modelval's inputs are on, for a device mismatch's message.
    """
    try:
        yield
    except ModelvalError:
        raise
    except Exception as error:
        if inputs_on is not None and is_out_of_memory(error):
            reason = describe_exception(error, limit=200)
            raise OutOfMemory(f"{what} ran out of memory on {inputs_on}: {reason}") from error
        if inputs_on is not None and is_device_mismatch(error):
            raise DeviceMismatchError(
                f"{what} found its tensors on different devices ({describe_exception(error, limit=200)}); modelval "
                f"fed the inputs on {inputs_on}: move the whole model there (model.to({inputs_on!r})) or pass "
                "device= naming the device the model's weights are on"
            ) from error
        raise UserCodeError(f"{what} raised {describe_exception(error)}") from error
