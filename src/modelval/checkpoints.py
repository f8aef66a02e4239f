"""Checkpoint files: safe loading (``torch.load(..., weights_only=True)``) with clear errors.

Checkpoints are untrusted pickles; ``weights_only=True`` refuses anything but tensors and plain
containers. A truncated or corrupt file raises :class:`DataError` naming the file.
"""

from __future__ import annotations

import os
import pickle
import zipfile
from collections.abc import Mapping
from pathlib import Path

import torch

from modelval.errors import DataError


def load_checkpoint(path: str | os.PathLike[str]) -> object:
    """``torch.load(path, map_location="cpu", weights_only=True)`` with errors that name the file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"checkpoint not found: {path}")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise DataError(
            f"{path}: refused to load, the checkpoint holds objects other than tensors "
            f"(weights_only=True): {str(error).splitlines()[0]}"
        ) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, ValueError, OSError) as error:
        raise DataError(f"{path}: not a readable PyTorch checkpoint (truncated or corrupt): {error}") from None


def load_state_dict_file(path: str | os.PathLike[str], *, key: str | None = None) -> dict[str, torch.Tensor]:
    """Load a checkpoint and return its state dict (optionally the one stored under ``key``)."""
    payload = load_checkpoint(path)
    if key is not None:
        if not isinstance(payload, Mapping) or key not in payload:
            found = sorted(payload) if isinstance(payload, Mapping) else type(payload).__name__
            raise DataError(f"{path}: expected a checkpoint with a {key!r} entry, found {found}")
        payload = payload[key]
    if not isinstance(payload, Mapping) or not all(isinstance(v, torch.Tensor) for v in payload.values()):
        raise DataError(f"{path}: expected a state dict (names -> tensors)")
    return dict(payload)


def strip_prefix(state_dict: Mapping[str, torch.Tensor], prefix: str = "module.") -> dict[str, torch.Tensor]:
    """Remove ``nn.DataParallel``'s ``module.`` prefix (or another) from every key that has it."""
    return {k[len(prefix) :] if k.startswith(prefix) else k: v for k, v in state_dict.items()}
