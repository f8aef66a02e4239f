"""Checkpoint files: safe loading (``torch.load(..., weights_only=True)``) with clear errors.

Checkpoints are untrusted pickles; ``weights_only=True`` refuses anything but tensors and plain
containers. A truncated or corrupt file raises :class:`DataError` naming the file.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
import zipfile
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads on first use: listing models or parsing specs stays light
    import torch

from modelval.errors import DataError, describe_exception


def _load_checkpoint(path: str | os.PathLike[str]) -> object:
    """``torch.load(path, map_location="cpu", weights_only=True)`` with errors that name the file."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise DataError(f"checkpoint not found: {path}")
    if not zipfile.is_zipfile(path):
        with path.open("rb") as handle:
            head = handle.read(16)
        # torch.save writes a zip archive; the legacy format is a pickle stream (protocol 2+: b"\x80").
        if not head.startswith(b"\x80"):
            size = path.stat().st_size
            raise DataError(
                f"{path}: not a PyTorch checkpoint (neither a torch.save archive nor a legacy pickle; {size} "
                f"byte{'s' if size != 1 else ''} starting {head[:8]!r})"
            )
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        # torch's message advises weights_only=False, i.e. running the file's code: never repeat that.
        lines = [line for line in str(error).splitlines() if line.strip() and "weights_only" not in line]
        detail = f": {lines[0].strip()}" if lines else ""
        raise DataError(
            f"{path}: refused to load, the checkpoint holds objects other than tensors or is corrupt "
            f"(weights_only=True; modelval never runs a checkpoint's code){detail}"
        ) from None
    except Exception as error:  # the unpickler raises KeyError, IndexError, ... on a corrupt stream
        raise DataError(
            f"{path}: not a readable PyTorch checkpoint (truncated or corrupt): {describe_exception(error)}"
        ) from None


def weights_file_problem(path: str | os.PathLike[str]) -> str | None:
    """What makes ``path`` no weights file at all (empty, cut short, another kind of file), from its first bytes
    and its zip listing alone; None when it looks like one (``model.safetensors``, a ``torch.save`` archive or
    a legacy pickle). Nothing is unpickled: the file may be hostile.

    Parameters
    ----------
    path
        The file.
    """
    import json
    import struct

    path = Path(path)
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            head = handle.read(8)
            if path.suffix == ".safetensors":
                if size < 8:
                    return f"is {size} bytes, shorter than a safetensors header"
                (length,) = struct.unpack("<Q", head)
                if not 2 <= length <= size - 8:
                    return f"is not a safetensors file (its header claims {length} bytes of {size})"
                try:
                    header = json.loads(handle.read(length))
                except (ValueError, UnicodeDecodeError):
                    return "is not a safetensors file (its header is not JSON)"
                return None if isinstance(header, dict) else "is not a safetensors file (its header is not an object)"
    except OSError as error:
        return f"cannot be read ({error.strerror or error})"
    if size == 0:
        return "is empty (0 bytes)"
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except (zipfile.BadZipFile, OSError):
            names = []
        if any(name.rsplit("/", 1)[-1] == "data.pkl" for name in names):
            return None
        return "is a zip archive but not one torch.save wrote (no data.pkl)"
    if head.startswith(b"\x80"):
        return None  # a legacy pickle stream; torch.load(weights_only=True) reads or refuses it
    what = "a cut-short torch.save archive" if head.startswith(b"PK") else "not a PyTorch weights file"
    return f"is {what} ({size} byte{'s' if size != 1 else ''} starting {head!r})"


@contextlib.contextmanager
def refusing_pickled_objects(path: str | os.PathLike[str], repair: str) -> Iterator[None]:
    """Inside: a library's ``torch.load(..., weights_only=True)`` of ``path`` that meets objects other than
    tensors becomes one :class:`DataError` with ``repair`` (what to do), never torch's advice to pass
    ``weights_only=False`` (which would run the file's code). Every other exception passes unchanged.

    Parameters
    ----------
    path
        The weights file the library loads.
    repair
        What the user can do (the end of the error).
    """
    try:
        yield
    except DataError:
        raise
    except Exception as error:
        if "Invalid magic number" in str(error):  # a pickle, but not torch.save's (pickle.dump of a dict, an int)
            raise DataError(
                f"{path}: refused to load, it is a Python pickle but not a PyTorch weights file (torch.save's); "
                f"{repair}"
            ) from None
        if not isinstance(error, pickle.UnpicklingError) and "weights_only" not in str(error):
            raise
        raise DataError(
            f"{path}: refused to load, it holds objects other than tensors (weights_only loading; modelval never "
            f"runs a weights file's code). {repair}"
        ) from None


def load_state_dict_file(path: str | os.PathLike[str], *, key: str | None = None) -> dict[str, torch.Tensor]:
    """Load a checkpoint and return its state dict (optionally the one stored under ``key``).

    Parameters
    ----------
    path
        The checkpoint (``torch.save`` archive or ``.safetensors``), loaded with ``weights_only``.
    key
        The state dict under this key.
    """
    import torch

    payload = _load_checkpoint(path)
    if key is not None:
        if not isinstance(payload, Mapping) or key not in payload:
            found = sorted(payload) if isinstance(payload, Mapping) else type(payload).__name__
            raise DataError(f"{path}: expected a checkpoint with a {key!r} entry, found {found}")
        payload = payload[key]
    if not isinstance(payload, Mapping) or not all(isinstance(v, torch.Tensor) for v in payload.values()):
        raise DataError(f"{path}: expected a state dict (names -> tensors)")
    return dict(payload)


def strip_prefix(state_dict: Mapping[str, torch.Tensor], prefix: str = "module.") -> dict[str, torch.Tensor]:
    """Remove ``nn.DataParallel``'s ``module.`` prefix (or another) from every key that has it.

    Parameters
    ----------
    state_dict
        The state dict.
    prefix
        The prefix to remove.
    """
    return {k[len(prefix) :] if k.startswith(prefix) else k: v for k, v in state_dict.items()}


# --- The checkpoint cache: files modelval downloads itself (torch.hub-style names with a hash prefix) ---

#: Download policy of ``fetch_checkpoint`` (module level so tests can shorten the backoff).
DOWNLOAD_TIMEOUT_S = 30.0
DOWNLOAD_RETRIES = 3
DOWNLOAD_BACKOFF_S = 1.0


def checkpoint_url(url: str, *, mirror: str | None = None) -> str:
    """``url``, or the same file name under ``mirror`` / ``$MODELVAL_MIRROR`` (air-gapped copies, tests that serve
    files from 127.0.0.1): ``<mirror>/<file name>``, beside the data files (docs/data.md lists the names).

    Parameters
    ----------
    url
        The checkpoint's public address.
    mirror
        A base URL to use instead of ``$MODELVAL_MIRROR``.
    """
    from modelval.download import mirrored

    name = url.rsplit("/", 1)[-1]
    return (f"{mirror.rstrip('/')}/{name}" if mirror else mirrored(name)) or url


def torch_hub_dir() -> Path:
    """torch.hub's cache folder, as ``torch.hub.get_dir()`` resolves it.

    When torch is already loaded, ask it (a ``torch.hub.set_dir`` call counts); otherwise resolve the same
    environment variables without importing torch, so ``modelval models`` starts in a fraction of a second.
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        return Path(torch.hub.get_dir())
    cache = os.getenv("XDG_CACHE_HOME", os.path.join("~", ".cache"))
    return Path(os.path.expanduser(os.getenv("TORCH_HOME", os.path.join(cache, "torch")))) / "hub"


def _torch_hub_checkpoint_dir() -> Path:
    """Where torch.hub / torchvision cache checkpoints (``$TORCH_HOME/hub/checkpoints``), read at call time."""
    return torch_hub_dir() / "checkpoints"


def find_cached_checkpoint(file_name: str, checkpoint_dir: Path) -> Path | None:
    """The cached copy of ``file_name``: modelval's cache first, then torch.hub's (same names, same files).

    Parameters
    ----------
    file_name
        The checkpoint's file name.
    checkpoint_dir
        modelval's checkpoint folder.
    """
    for folder in (checkpoint_dir, _torch_hub_checkpoint_dir()):
        candidate = folder / file_name
        if candidate.is_file():
            return candidate
    return None


def verify_checkpoint(path: Path) -> Path:
    """Check ``path`` against the SHA-256 prefix in its name (no-op for names without one).

    Parameters
    ----------
    path
        The checkpoint file.
    """
    from modelval.download import hash_prefix_from_filename, verify_sha256

    prefix = hash_prefix_from_filename(path.name)
    if prefix is not None:
        verify_sha256(path, sha256_prefix=prefix)
    return path


def fetch_checkpoint(
    url: str,
    checkpoint_dir: Path,
    *,
    file_name: str | None = None,
    force: bool = False,
    progress: bool = True,
    timeout: float | None = None,
    retries: int | None = None,
    backoff: float | None = None,
) -> Path:
    """Make sure ``checkpoint_dir/<file>`` exists and verifies; download it (atomically) otherwise.

    A cached file that fails verification is replaced, so ``modelval models fetch`` is also the repair command.
    Raises :class:`DownloadError` / :class:`ChecksumError`; after a failure no file is left behind.

    Parameters
    ----------
    url
        The checkpoint's public address (``$MODELVAL_MIRROR/<file name>`` is fetched instead when set).
    checkpoint_dir
        modelval's checkpoint folder.
    file_name
        The name to keep it under (default: the URL's).
    force
        Download again even when a verified copy is there.
    progress
        A progress bar on stderr.
    timeout, retries, backoff
        The download's policy (default: :data:`DOWNLOAD_TIMEOUT_S`, ...).
    """
    from modelval.download import download_file, hash_prefix_from_filename

    file_name = file_name or url.rsplit("/", 1)[-1]
    destination = checkpoint_dir / file_name
    if destination.is_file() and not force:
        try:
            return verify_checkpoint(destination)
        except DataError:
            destination.unlink()
    return download_file(
        checkpoint_url(url),
        destination,
        sha256_prefix=hash_prefix_from_filename(file_name),
        timeout=DOWNLOAD_TIMEOUT_S if timeout is None else timeout,
        retries=DOWNLOAD_RETRIES if retries is None else retries,
        backoff=DOWNLOAD_BACKOFF_S if backoff is None else backoff,
        progress=progress,
    )


#: Where training scripts keep the weights, in the order ``load_into`` tries them when no key is given.
STATE_DICT_KEYS: tuple[str, ...] = ("state_dict", "model")


def _is_state_dict(value: object) -> bool:
    import torch

    return isinstance(value, Mapping) and bool(value) and all(isinstance(v, torch.Tensor) for v in value.values())


def _nested_state_dicts(payload: object) -> list[str]:
    """The top-level keys of a checkpoint whose values are state dicts (``state_dict``, ``state_dict_ema``, ...)."""
    if not isinstance(payload, Mapping):
        return []
    return [str(key) for key, value in payload.items() if _is_state_dict(value)]


def _key_hint(keys: list[str]) -> str:
    return f"pass --checkpoint-key {keys[0]}" if len(keys) == 1 else "pass --checkpoint-key with one of them"


def _common_prefix(checkpoint_keys: Iterable[str], model_keys: Iterable[str]) -> str | None:
    """The prefix that, stripped from the checkpoint's keys, makes them the model's (``model.`` of Lightning)."""
    own = set(model_keys)
    found: Counter[str] = Counter()
    for key in checkpoint_keys:
        for start in (i + 1 for i, char in enumerate(key) if char == "."):
            if key[start:] in own:
                found[key[:start]] += 1
                break
    for prefix, _ in found.most_common(3):
        stripped = {k[len(prefix) :] for k in checkpoint_keys if k.startswith(prefix)}
        if own <= stripped:
            return prefix
    return None


def load_into(
    model: torch.nn.Module,
    path: str | os.PathLike[str],
    *,
    key: str | None = None,
    prefix: str | None = None,
) -> torch.nn.Module:
    """Load a checkpoint's state dict into ``model``, strictly; a mismatch lists the keys and says what fits.

    The state dict is the checkpoint itself, the one under ``key`` (``--checkpoint-key``, e.g.
    ``state_dict_ema``), else the one under ``state_dict`` / ``model`` (the common training-script
    layouts). ``prefix`` (``--strip-prefix``, e.g. Lightning's ``model.``) is removed from every key that
    has it; without it ``nn.DataParallel``'s ``module.`` is dropped when the model's keys have none. When
    the keys do not fit, the error names the other state dicts in the file and the prefix that would fit.

    Parameters
    ----------
    model
        The built module.
    path
        The checkpoint.
    key
        The state dict under this key (``--checkpoint-key``).
    prefix
        Removed from every key that has it (``--strip-prefix``).
    """
    path = Path(path)
    payload = _load_checkpoint(path)
    nested = _nested_state_dicts(payload)
    if key is not None:
        if not isinstance(payload, Mapping) or key not in payload:
            found = ", ".join(repr(k) for k in payload) if isinstance(payload, Mapping) else type(payload).__name__
            raise DataError(f"{path}: no {key!r} in the checkpoint (--checkpoint-key); it holds {found}")
        if not _is_state_dict(payload[key]):
            raise DataError(
                f"{path}: {key!r} is not a state dict (names -> tensors); the state dicts are under "
                f"{', '.join(map(repr, nested)) or 'no key'}"
            )
        state, used = dict(payload[key]), key
    elif isinstance(payload, Mapping) and _is_state_dict(payload):
        state, used = dict(payload), None
    else:
        used = next((k for k in STATE_DICT_KEYS if k in nested), None)
        if used is None:
            hint = f"; it holds state dicts under {', '.join(map(repr, nested))}: {_key_hint(nested)}" if nested else ""
            raise DataError(
                f"{path}: expected a state dict (names -> tensors), or one under 'state_dict' or 'model'{hint}"
            )
        state = dict(payload[used])  # type: ignore[index]
    own = model.state_dict()
    if prefix is not None:
        if not any(k.startswith(prefix) for k in state):
            first = next(iter(state))
            raise DataError(f"{path}: no key starts with {prefix!r} (--strip-prefix); the first is {first!r}")
        state = strip_prefix(state, prefix)
    elif not any(k.startswith("module.") for k in own):
        state = strip_prefix(state)
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    if missing or unexpected:

        def listing(keys: list[str]) -> str:
            return ", ".join(keys[:10]) + (f" ... ({len(keys)} in all)" if len(keys) > 10 else "") if keys else "none"

        hints = []
        fits = _common_prefix(state, own)
        if fits:
            hints.append(f"the checkpoint's keys start with {fits!r}: pass --strip-prefix {fits}")
        others = [k for k in nested if k != used]
        if others:
            hints.append(f"it also holds state dicts under {', '.join(map(repr, others))}: {_key_hint(others)}")
        where = f" (under {used!r})" if used else ""
        raise DataError(
            f"{path}{where} does not fit the model (strict loading): missing keys: {listing(missing)}; "
            f"unexpected keys: {listing(unexpected)}" + "".join(f"; {hint}" for hint in hints)
        )
    shapes = [f"{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(own[k].shape)}" for k in own
              if tuple(state[k].shape) != tuple(own[k].shape)]  # fmt: skip
    if shapes:
        raise DataError(f"{path} does not fit the model: shape mismatches: {'; '.join(shapes[:10])}")
    model.load_state_dict(state, strict=True)
    return model
