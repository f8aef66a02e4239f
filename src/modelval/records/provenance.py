"""Provenance: what produced a result, recorded beside it (``"provenance"`` in every JSON result and report).

A shape bias without the code, weights and preprocessing that produced it cannot be compared with the next
night's. This module gathers the parts that do not depend on the run (versions, the git commit when modelval
runs from a checkout, the device's name, a timestamp) and the digests that identify weights and files; the
evaluation and the front door add the run's own facts. The record's layout is versioned
(:data:`SCHEMA_VERSION`) and documented in docs/provenance.md.

Nothing here imports torch at module level; :func:`state_dict_digest` works on any object with a
``state_dict()`` and imports torch only to read tensors.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

#: Bumped when a field of the record changes meaning or moves (a new field does not bump it).
SCHEMA_VERSION = 1

#: Distributions whose versions every record carries (``None`` when not installed).
PACKAGES = ("torch", "torchvision", "numpy", "timm", "transformers", "efficientnet-lite-pytorch")


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def git_state() -> dict[str, Any] | None:
    """``{"commit", "dirty"}`` of the checkout modelval is imported from; ``None`` for an installed copy."""
    top = Path(__file__).resolve().parents[3]  # <checkout>/src/modelval/records/provenance.py -> <checkout>
    if not (top / ".git").exists() or not (top / "pyproject.toml").is_file():
        return None
    try:
        commit = subprocess.run(
            ["git", "-C", str(top), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(top), "status", "--porcelain", "--untracked-files=no", "--", "src"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": bool(status.strip())}


def environment() -> dict[str, Any]:
    """The run-independent part of a record: modelval, Python, the packages, the platform, a timestamp."""
    from modelval import __version__

    return {
        "schema_version": SCHEMA_VERSION,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "modelval": __version__,
        "git": git_state(),
        "python": platform.python_version(),
        "packages": {name: package_version(name) for name in PACKAGES},
        "platform": f"{platform.system()} {platform.machine()}",
        "command": " ".join(Path(sys.argv[0]).name.split() + sys.argv[1:]) if sys.argv and sys.argv[0] else None,
    }


def device_record(device: Any) -> dict[str, str]:
    """The ``"device"`` part of a provenance record: the torch device type and its human name."""
    return {"type": getattr(device, "type", str(device)).split(":")[0], "name": device_name(device)}


def device_name(device: Any) -> str:
    """A human name for a torch device: the GPU's model, or the CPU's."""
    kind = getattr(device, "type", str(device)).split(":")[0]
    if kind == "cuda":
        import torch

        index = getattr(device, "index", None)
        return str(torch.cuda.get_device_name(index if index is not None else torch.cuda.current_device()))
    if kind == "mps":
        return "Apple MPS"
    return _cpu_name()


@lru_cache(maxsize=1)
def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return "CPU: " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU: " + (platform.processor() or platform.machine())


def state_dict_digest(model: Any) -> str | None:
    """SHA-256 over a module's state dict (names, dtypes, shapes and bytes, in name order); ``None`` without one.

    The digest identifies the weights whatever file or hub they came from: the same tensors give the same
    digest, one changed value gives another.
    """
    state_dict = getattr(model, "state_dict", None)
    if not callable(state_dict):
        return None
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(state_dict().items()):
        if not isinstance(tensor, torch.Tensor):
            continue
        data = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}|{data.dtype}|{tuple(data.shape)}|".encode())
        digest.update(data.reshape(-1).view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


def architecture_digest(model: Any) -> str:
    """SHA-256 of what, beside the weights, makes a model compute what it computes.

    The class's qualified name, the module tree (``repr``: layer types and their settings) and the bytes of
    the source file that defines the class (a factory file edited between two runs changes it; an installed
    package is pinned by its version elsewhere in the record). A change inside a forward() defined in
    another file than the class is not seen: ``--no-output-cache`` for such experiments.
    """
    import inspect

    cls = type(model)
    digest = hashlib.sha256(f"{cls.__module__}.{cls.__qualname__}|{model!r}|".encode())
    try:
        source = inspect.getsourcefile(cls)
    except TypeError:  # a built-in class
        source = None
    if source is not None and Path(source).is_file():
        digest.update(Path(source).read_bytes())
    return digest.hexdigest()


def json_digest(value: Any) -> str:
    """SHA-256 of a JSON-ready value in canonical form (sorted keys, no spaces)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def file_digest(path: str | os.PathLike[str]) -> str:
    from modelval.download import sha256_of

    return sha256_of(path)
