"""What identifies a model in a run's record and in the output cache's key: its weights, architecture and state.

The weights and architecture digests are remembered per model object (:func:`state_dict_digest`,
:func:`architecture_digest`): hashing a ViT-L's 1.2 GB of weights takes longer than its forward over hundreds
of images, and every evaluation needs the digest for its output-cache key and its record. A remembered digest
is reused only while the model provably holds the same tensors (see :func:`state_dict_digest`);
:data:`DIGESTS_COMPUTED` counts the digests actually computed. Nothing here imports torch at module level;
:func:`state_dict_digest` works on any object with a ``state_dict()``.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import hashlib
import os
import threading
import weakref
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelval.errors import ModelvalError

if TYPE_CHECKING:
    import numpy as np
    import torch


#: Digests computed (not served from memory), by kind: ``weights``, ``architecture``, ``stimuli``. Tests read it
#: to see that a second evaluation of one model hashes nothing again.
DIGESTS_COMPUTED: Counter[str] = Counter()

#: Accelerator tensors go to the host through one pinned buffer of at most this many bytes: small tensors are
#: queued into it together and waited for once (a ViT has ~300 tensors: one wait per tensor added up), a tensor
#: larger than the buffer is streamed through it in pieces. Each byte crosses to the host once.
HOST_CHUNK_BYTES = 64 << 20

_LOCK = threading.Lock()
#: model -> (the signature of its tensors when hashed, the digest)
_WEIGHTS: weakref.WeakKeyDictionary[Any, tuple[list[tuple[str, Any, tuple[Any, ...]]], str]] = (
    weakref.WeakKeyDictionary()
)
#: model -> (class name and repr, the class's source file stamp, the digest)
_ARCHITECTURES: weakref.WeakKeyDictionary[Any, tuple[str, tuple[Any, ...] | None, str]] = weakref.WeakKeyDictionary()


def _remembered(memo: weakref.WeakKeyDictionary[Any, Any], model: Any) -> Any:
    try:
        with _LOCK:
            return memo.get(model)
    except TypeError:  # not hashable or not weak-referenceable: nothing is remembered for it
        return None


def _remember(memo: weakref.WeakKeyDictionary[Any, Any], model: Any, value: Any) -> None:
    try:
        with _LOCK:
            memo[model] = value
    except TypeError:
        pass


def forget_digests(model: Any) -> None:
    """Drop what is remembered of ``model``'s digests: the next one is computed from its tensors.

    Only needed after a write torch does not count (through ``tensor.data`` or a NumPy view of a CPU tensor,
    see :func:`state_dict_digest`).

    Parameters
    ----------
    model
        The module (anything else: nothing is remembered).
    """
    for memo in (_WEIGHTS, _ARCHITECTURES):
        try:
            with _LOCK:
                memo.pop(model, None)
        except TypeError:
            pass


@contextlib.contextmanager
def values_kept(model: Any) -> Iterator[None]:
    """modelval re-lays the model's tensors inside the block without changing a value (``module.to(device)``,
    ``module.to(memory_format=...)``): a weights digest that was valid before the block stays valid after it.

    Without it, modelval's own move or channels-last round trip would make every evaluation hash the weights
    again. Only the layout change itself may run inside the block, never the model's code: a weight the
    model writes is then seen as a change.

    Parameters
    ----------
    model
        The module whose tensors are re-laid inside the block.
    """
    state_dict = getattr(model, "state_dict", None)
    remembered = _remembered(_WEIGHTS, model) if callable(state_dict) else None
    digest = remembered[1] if remembered is not None and _unchanged(remembered[0], _state(state_dict)) else None
    yield
    if digest is not None:
        signature = _signature(_state(state_dict))
        if signature is not None:
            _remember(_WEIGHTS, model, (signature, digest))


def _state(state_dict: Any) -> list[tuple[str, torch.Tensor]]:
    """The state dict's tensors, in name order, as the module holds them (no detached copies, no host copies)."""
    import torch

    try:
        items = state_dict(keep_vars=True).items()
    except TypeError:  # a state_dict() of its own, without keep_vars
        items = state_dict().items()
    return sorted(((name, t) for name, t in items if isinstance(t, torch.Tensor)), key=lambda item: item[0])


def _stamp(tensor: torch.Tensor) -> tuple[Any, ...]:
    """What changes when a tensor's values may have changed, read without touching its data.

    torch's version counter counts every in-place write (``add_``, ``copy_`` in ``load_state_dict``, an
    optimizer step); the data pointer, dtype, shape and strides see a tensor swapped under the same object
    (``param.data = other``); the device sees a move.
    """
    return (tensor._version, tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tensor.stride(), tensor.device)


def _signature(entries: Sequence[tuple[str, torch.Tensor]]) -> list[tuple[str, Any, tuple[Any, ...]]] | None:
    """``[(name, weak reference to the tensor, its stamp)]``, or ``None`` when a tensor cannot be tracked.

    The weak reference (not ``id``) makes a freed tensor never pass for a new one that reuses its address.
    Inference tensors keep no version counter: a model made under ``torch.inference_mode()`` is hashed each time.
    """
    try:
        return [(name, weakref.ref(tensor), _stamp(tensor)) for name, tensor in entries]
    except (RuntimeError, TypeError):
        return None


def _unchanged(signature: list[tuple[str, Any, tuple[Any, ...]]], entries: Sequence[tuple[str, torch.Tensor]]) -> bool:
    if len(signature) != len(entries):
        return False
    try:
        return all(
            name == current and ref() is tensor and stamp == _stamp(tensor)
            for (name, ref, stamp), (current, tensor) in zip(signature, entries, strict=True)
        )
    except RuntimeError:
        return False


def state_dict_digest(model: Any) -> str | None:
    """SHA-256 over a module's state dict (names, dtypes, shapes and bytes, in name order); ``None`` without one.

    The digest identifies the weights whatever file or hub they came from: the same tensors give the same
    digest, one changed value gives another.

    It is computed once per model object and remembered while the module holds the same tensors, unchanged:
    each tensor's identity, torch's version counter (every in-place write: ``add_``, ``load_state_dict``, an
    optimizer step), data pointer, dtype, shape, strides and device are compared on the next call, which reads no
    tensor data. A replaced parameter, a ``load_state_dict`` or a move gives a fresh digest (a move: the same
    value). Writes torch does not count are not seen: through ``tensor.data`` (a tensor with its own counter) or
    a NumPy array sharing a CPU tensor's memory; call :func:`forget_digests` after those.

    Parameters
    ----------
    model
        The module (anything without ``state_dict``: ``None``).
    """
    state_dict = getattr(model, "state_dict", None)
    if not callable(state_dict):
        return None
    entries = _state(state_dict)
    remembered = _remembered(_WEIGHTS, model)
    if remembered is not None and _unchanged(remembered[0], entries):
        return str(remembered[1])
    signature = _signature(entries)  # before hashing: a write during the hash makes the next call hash again
    digest = _tensors_digest(entries)
    DIGESTS_COMPUTED["weights"] += 1
    if signature is not None:
        _remember(_WEIGHTS, model, (signature, digest))
    return digest


def _tensors_digest(
    entries: Sequence[tuple[str, torch.Tensor]],
    *,
    staged: tuple[str, ...] = ("cuda",),
    chunk_bytes: int = HOST_CHUNK_BYTES,
) -> str:
    """SHA-256 of ``name|dtype|shape|`` and the raw bytes of each tensor, in the order given.

    A CPU tensor is hashed where it lies (no copy when contiguous); a tensor on a device of ``staged`` goes
    through one pinned host buffer (:class:`_HostStaging`); any other device's tensor is copied to the host once.
    ``staged`` and ``chunk_bytes`` are parameters so that the batching can be tested without a GPU: the digest
    does not depend on them.
    """
    digest = hashlib.sha256()
    moving = [t for _, t in entries if t.device.type in staged]
    total = sum(t.numel() * t.element_size() for t in moving)
    pin = any(t.device.type == "cuda" for t in moving)  # page-locked memory: the fast, asynchronous copy from CUDA
    staging = _HostStaging(digest, max(1, min(chunk_bytes, total)), pin=pin)
    for name, tensor in entries:
        data = tensor.detach()
        header = f"{name}|{data.dtype}|{tuple(data.shape)}|".encode()
        if data.device.type == "meta":
            raise ModelvalError(
                f"the model's tensor {name} is on the meta device and holds no values to identify the weights by: "
                "load its weights (load_state_dict(..., assign=True) or to_empty()) before evaluating it"
            )
        if data.device.type in staged:
            staging.add(header, data)
            continue
        staging.flush()
        digest.update(header)
        if data.numel():
            digest.update(_host_bytes(data.contiguous().to("cpu")))
    staging.flush()
    return digest.hexdigest()


def _host_bytes(data: torch.Tensor) -> memoryview:
    """A contiguous CPU tensor's bytes, over its own memory: hashlib reads them without a copy."""
    import torch

    return data.reshape(-1).view(torch.uint8).numpy().data


class _HostStaging:
    """Accelerator tensors on their way into the hash, through one pinned host buffer.

    Small tensors are queued into the buffer with asynchronous copies and waited for together; a tensor larger
    than the buffer goes through it piece by piece. The bytes are hashed in the order they were added, so the
    digest is that of the tensors one by one.
    """

    def __init__(self, digest: Any, capacity: int, *, pin: bool) -> None:
        self.digest = digest
        self.capacity = capacity
        self.pin = pin
        self.buffer: torch.Tensor | None = None
        self.host: np.ndarray | None = None
        self.used = 0
        self.queued: list[tuple[bytes, int, int]] = []  # (header, offset, size)
        self.devices: set[Any] = set()

    def _buffer(self) -> tuple[torch.Tensor, np.ndarray]:
        if self.buffer is None or self.host is None:
            import torch

            self.buffer = torch.empty(self.capacity, dtype=torch.uint8, pin_memory=self.pin)
            self.host = self.buffer.numpy()
        return self.buffer, self.host

    def _copy(self, flat: torch.Tensor, offset: int) -> None:
        buffer, _ = self._buffer()
        buffer[offset : offset + flat.numel()].copy_(flat, non_blocking=True)
        self.devices.add(flat.device)

    def _wait(self) -> None:
        import torch

        for device in self.devices:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        self.devices.clear()

    def add(self, header: bytes, data: torch.Tensor) -> None:
        import torch

        flat = data.contiguous().reshape(-1).view(torch.uint8)  # a copy on its own device only when not contiguous
        size = flat.numel()
        if size > self.capacity:
            self.flush()
            self.digest.update(header)
            for start in range(0, size, self.capacity):
                piece = flat[start : start + self.capacity]
                self._copy(piece, 0)
                self._wait()
                self.digest.update(self._buffer()[1][: piece.numel()].data)
            return
        if self.used + size > self.capacity:
            self.flush()
        if size:
            self._copy(flat, self.used)
        self.queued.append((header, self.used, size))
        self.used += size

    def flush(self) -> None:
        """Hash what is queued, in order, once its copies have arrived."""
        if not self.queued:
            return
        self._wait()
        host = self._buffer()[1] if self.used else None
        for header, offset, size in self.queued:
            self.digest.update(header)
            if size and host is not None:
                self.digest.update(host[offset : offset + size].data)
        self.queued.clear()
        self.used = 0


def _source_stamp(cls: type) -> tuple[str, int, int, int] | None:
    """``(path, size, mtime_ns, inode)`` of the file defining ``cls``; ``None`` when it has none that can be read.

    A class defined in ``python -c``, a notebook cell or at the prompt has no source file (``inspect`` raises
    ``OSError: source code not available``): its digest is then the class name and the module tree alone.
    """
    import inspect

    try:
        source = inspect.getsourcefile(cls)
    except (TypeError, OSError):  # a built-in class; a class of __main__ without a file
        return None
    if source is None:
        return None
    try:
        stat = os.stat(source)
    except OSError:
        return None
    return (source, stat.st_size, stat.st_mtime_ns, stat.st_ino) if Path(source).is_file() else None


def architecture_digest(model: Any) -> str:
    """SHA-256 of what, beside the weights, makes a model compute what it computes.

    The class's qualified name, the module tree (``repr``: layer types and their settings) and the bytes of
    the source file that defines the class (a factory file edited between two runs changes it; an installed
    package is pinned by its version elsewhere in the record). A change inside a forward() defined in
    another file than the class is not seen: ``--no-output-cache`` for such experiments. A class without a
    readable source file (defined in ``python -c`` or a notebook) is identified by its name and tree alone.

    The ``repr`` is taken on every call (it is what is hashed, and cheap: ~2 ms for a ViT-L); the source file is
    read again only when its size, modification time or inode changed, or for another model object.

    Parameters
    ----------
    model
        The module, or any callable.
    """
    cls = type(model)
    head = f"{cls.__module__}.{cls.__qualname__}|{model!r}|"
    stamp = _source_stamp(cls)
    remembered = _remembered(_ARCHITECTURES, model)
    if remembered is not None and remembered[0] == head and remembered[1] == stamp:
        return str(remembered[2])
    digest = hashlib.sha256(head.encode())
    if stamp is not None:
        try:
            digest.update(Path(stamp[0]).read_bytes())
        except OSError:  # removed since the stat: as if it had none
            stamp = None
            digest = hashlib.sha256(head.encode())
    DIGESTS_COMPUTED["architecture"] += 1
    value = digest.hexdigest()
    _remember(_ARCHITECTURES, model, (head, stamp, value))
    return value


#: Module attributes that are torch's own bookkeeping (the parameters and submodules are hashed elsewhere: the
#: state dict and the module tree; a hook dict's keys are global counters that differ from one process to the next).
_TORCH_OWN = frozenset({"_parameters", "_modules", "training", "_non_persistent_buffers_set"})
#: How deep and how wide an attribute's value is followed (a config object, a tuple of means); past it, its type.
_ATTRIBUTE_DEPTH = 4
_ATTRIBUTE_ITEMS = 4096


def module_state_digest(model: Any) -> str | None:
    """SHA-256 of what beside the state dict and the module tree can change a module's outputs; ``None`` for a
    plain callable.

    The weights digest covers parameters and persistent buffers; the architecture digest covers the module tree's
    ``repr``. Neither sees a *plain attribute* (``self.temperature = 2.0``, ``self.use_head = False``), a tensor
    kept as a plain attribute (``self.mean = torch.tensor(mean).view(1, 3, 1, 1)``, a very common wrapper), a
    non-persistent buffer, or a forward hook. Two models that differ only there compute different outputs under
    the same weights digest, so the output cache keys them by this digest too.

    Every submodule's public attributes are hashed by value (numbers, strings, tensors' and arrays' bytes,
    containers and plain objects such as a config followed a few levels deep), its non-persistent buffers by
    value, its hooks by their code. Private attributes (a leading ``_``) are left out: libraries keep caches and
    counters there that change as the model runs, and a key that changed with them would never hit. The output
    cache's probe (a forward on a few fixed stimuli, compared with the stored rows) catches what lives there.

    Parameters
    ----------
    model
        The module (a plain callable: ``None``).
    """
    import torch

    if not isinstance(model, torch.nn.Module):
        return None
    digest = hashlib.sha256()
    for name, module in model.named_modules():
        digest.update(f"<{name}:{type(module).__qualname__}>".encode())
        persistent_excluded: set[str] = getattr(module, "_non_persistent_buffers_set", set())
        for key in sorted(persistent_excluded):
            buffer = module._buffers.get(key)
            digest.update(f"buffer {key}=".encode())
            _fingerprint(buffer, digest, 0, [0])
        for key, value in sorted(vars(module).items()):
            if key in _TORCH_OWN or key == "_buffers":
                continue
            if key.startswith("_") and "hooks" in key:
                if isinstance(value, dict) and value:
                    digest.update(f"{key}=".encode())
                    _fingerprint(list(value.values()), digest, 0, [0])
                continue
            if key.startswith("_"):
                continue
            digest.update(f"{key}=".encode())
            _fingerprint(value, digest, 0, [0])
    return digest.hexdigest()


def _fingerprint(value: Any, digest: Any, depth: int, seen: list[int]) -> None:
    """Feed ``value`` into ``digest`` by what it holds, never by where it lives (no ids or addresses)."""
    import types

    import numpy as np
    import torch

    seen[0] += 1
    if seen[0] > _ATTRIBUTE_ITEMS:
        digest.update(b"...")
        return
    if value is None or isinstance(value, bool | int | float | complex | str | bytes | torch.dtype | torch.device):
        digest.update(f"{type(value).__name__}:{value!r};".encode())
    elif isinstance(value, torch.Tensor):
        data = value.detach()
        digest.update(f"tensor:{data.dtype}|{tuple(data.shape)}|".encode())
        if data.device.type != "meta" and data.numel():
            digest.update(_host_bytes(data.contiguous().to("cpu")))
    elif isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        digest.update(f"array:{array.dtype}|{array.shape}|".encode())
        if array.dtype.hasobject:
            _fingerprint(array.tolist(), digest, depth + 1, seen)
        else:
            digest.update(array.tobytes())
    elif isinstance(value, np.generic | enum.Enum):
        digest.update(f"{type(value).__qualname__}:{value!r};".encode())
    elif isinstance(value, torch.nn.Module):
        # a module kept outside the module tree (in a plain list): not in the state dict either
        digest.update(f"module:{type(value).__qualname__}|{value!r}|".encode())
        _fingerprint(sorted(value.state_dict().items()), digest, depth + 1, seen)
    elif isinstance(value, types.FunctionType | types.MethodType | types.BuiltinFunctionType | type):
        _code_fingerprint(value, digest)
    elif depth >= _ATTRIBUTE_DEPTH:
        digest.update(f"<{type(value).__qualname__}>".encode())
    elif isinstance(value, list | tuple):
        digest.update(f"{type(value).__name__}[{len(value)}](".encode())
        for item in value:
            _fingerprint(item, digest, depth + 1, seen)
        digest.update(b")")
    elif isinstance(value, set | frozenset):
        digest.update(f"set[{len(value)}]".encode())
        for item in sorted(value, key=repr):
            _fingerprint(item, digest, depth + 1, seen)
    elif isinstance(value, dict):
        digest.update(f"dict[{len(value)}](".encode())
        for key, item in sorted(value.items(), key=lambda pair: repr(pair[0])):
            _fingerprint(key, digest, depth + 1, seen)
            _fingerprint(item, digest, depth + 1, seen)
        digest.update(b")")
    elif isinstance(value, functools.partial):
        digest.update(b"partial(")
        _fingerprint((value.func, value.args, value.keywords), digest, depth + 1, seen)
        digest.update(b")")
    else:
        digest.update(f"<{type(value).__module__}.{type(value).__qualname__}>".encode())
        state = getattr(value, "__dict__", None)
        if isinstance(state, dict):
            public = {k: v for k, v in state.items() if not str(k).startswith("_")}
            _fingerprint(public, digest, depth + 1, seen)


def _code_fingerprint(value: Any, digest: Any) -> None:
    """A function, method or class by what it runs: its name and its compiled code (not its address)."""
    import marshal

    function = getattr(value, "__func__", value)
    code = getattr(function, "__code__", None)
    digest.update(f"code:{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', '')}|".encode())
    if code is not None:
        try:
            digest.update(hashlib.sha256(marshal.dumps(code)).digest())
        except ValueError:  # a code object holding something marshal refuses: its bytecode alone
            digest.update(code.co_code)
