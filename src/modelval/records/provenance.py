"""Provenance: what produced a result, recorded beside it (``"provenance"`` in every JSON result and report).

A shape bias without the code, weights and preprocessing that produced it cannot be compared with the next
night's. This module gathers the parts that do not depend on the run (versions, the git commit when modelval
runs from a checkout, the device's name, a timestamp) and the digests that identify weights and files; the
evaluation and the front door add the run's own facts. The record's layout is versioned
(:data:`SCHEMA_VERSION`) and documented in docs/provenance.md.

Nothing here imports torch at module level. The digests that identify a model (its weights, architecture and
state) are in :mod:`modelval.records.digests`, re-exported here.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import subprocess
import sys
from functools import cache, lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

#: Bumped when a field of the record changes meaning or moves (a new field does not bump it).
SCHEMA_VERSION = 1

#: Distributions whose versions every record carries (``None`` when not installed).
PACKAGES = ("torch", "torchvision", "numpy", "timm", "transformers", "efficientnet-lite-pytorch")


@cache
def package_version(name: str) -> str | None:
    """The installed version of distribution ``name`` (``None``: not installed), read once per process.

    Every output-cache key names three versions, and reading one parses the package's metadata file (~0.6 ms,
    half of a remembered key's cost); the code a process runs does not change version under it.

    Parameters
    ----------
    name
        The distribution's name (``torch``, ``timm``, ...).
    """
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


@cache
def decoder_record() -> dict[str, str | None]:
    """The image decoder every stimulus goes through: Pillow, and the versions of its JPEG and PNG (zlib) codecs.

    A Pillow upgrade can move pixels (Pillow #6113, #6262), and a libjpeg-turbo upgrade the pixels of every lossy
    file, so both are in every output-cache key and provenance record (issue 40).
    """
    import PIL
    from PIL import features

    def codec(name: str) -> str | None:
        try:
            return features.version(name)
        except ValueError:  # a Pillow that does not know the name
            return None

    return {"name": "Pillow", "pillow": PIL.__version__, "libjpeg_turbo": codec("libjpeg_turbo"),
            "jpeg": codec("jpg"), "zlib": codec("zlib")}  # fmt: skip


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
        "decoder": decoder_record(),
        "platform": f"{platform.system()} {platform.machine()}",
        "command": " ".join(Path(sys.argv[0]).name.split() + sys.argv[1:]) if sys.argv and sys.argv[0] else None,
        "session": session_id(),
    }


def session_id() -> str:
    """The session a record belongs to: ``$MODELVAL_SESSION`` when set (a nightly job sets it, so its validation
    step, its rerun of the failures and every pytest-xdist worker share one), else one id per process.
    ``modelval runs verdict`` takes a nightly's records by it."""
    from modelval.settings import value

    return value("session") or _process_session()


@lru_cache(maxsize=1)
def _process_session() -> str:
    import uuid

    return f"process-{uuid.uuid4().hex[:12]}"


def device_record(device: Any) -> dict[str, str]:
    """The ``"device"`` part of a provenance record: the torch device type and its human name, and a CUDA
    device's compute capability (``"9.0"``: what expectations keyed by capability match).

    Parameters
    ----------
    device
        The resolved torch device.
    """
    record = {"type": getattr(device, "type", str(device)).split(":")[0], "name": _device_name(device)}
    if record["type"] == "cuda":
        record["capability"] = _compute_capability(device)
    return record


def _compute_capability(device: Any) -> str:
    """A CUDA device's compute capability as ``"major.minor"`` (``"9.0"`` for an H100)."""
    import torch

    index = getattr(device, "index", None)
    major, minor = torch.cuda.get_device_capability(index if index is not None else torch.cuda.current_device())
    return f"{major}.{minor}"


def _device_name(device: Any) -> str:
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


def json_digest(value: Any) -> str:
    """SHA-256 of a JSON-ready value in canonical form (sorted keys, no spaces).

    Parameters
    ----------
    value
        A JSON-ready value.
    """
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes.

    Parameters
    ----------
    path
        The file.
    """
    from modelval.download import sha256_of

    return sha256_of(path)
