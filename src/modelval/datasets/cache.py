"""The decode cache: the decoded stimuli on disk, so PNG decoding happens once per data set, not per run.

The 1280 cue-conflict stimuli decode to one uint8 array (1280, 3, 224, 224) = 193 MB, kept as ``<key>.npy``
with its record ``<key>.json`` in ``<cache folder>/stimuli``, by the rules every cache keeps
(:mod:`modelval.records.store`). The key hashes everything the pixels depend on: the committed checksum
manifest, each file's name and the SHA-256 of its **content**, Pillow's version and a format version; changing
any of them (a new manifest, a re-downloaded, edited or replaced file, even one of the same size with its
modification time restored) gives a new key, so a stale entry is never read. The content digests are computed
once per load and shared with the manifest check.

Pixels are never trusted blindly: the record holds the array's shape and SHA-256, checked on every load (about
0.1 s). A truncated, corrupt or foreign entry is rebuilt from the PNGs with a warning. Opt out with
``cache=False`` (CLI ``--no-cache``) or ``MODELVAL_NO_CACHE=1``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch loads on first use: listing models or parsing specs stays light
    import torch

from modelval.behaviour.cue_conflict import Stimulus
from modelval.datasets.manifest import hash_stimuli, manifest_path
from modelval.errors import DataError
from modelval.records.provenance import decoder_record
from modelval.records.store import Store, array_digest, cache_on, key_of, matches, read_record

CACHE_FORMAT = 3  # 3: the store's key and SHA-256 record (2: content-keyed, CRC-32; 1: keyed by size and mtime)


class StimulusCacheWarning(UserWarning):
    """A cache entry was unreadable or did not match its checksum and is being rebuilt."""


class DecodeCache(Store):
    """Decoded stimulus sets: ``<key>.npy`` and its record ``<key>.json`` (see the module docstring)."""

    folder = "stimuli"
    what = "decoded stimulus set"
    suffixes = (".npy", ".json")
    #: The writer's temporary names before modelval.atomic's rule: ``.<key>.npy.<random>.tmp``.
    legacy = re.compile(r"\.[0-9a-f]{8,128}\.(npy|json)\.\w+\.tmp")


def cache_enabled(cache: bool = True) -> bool:
    """``cache`` unless ``$MODELVAL_NO_CACHE`` turns every cache off.

    Parameters
    ----------
    cache
        The caller's choice (``StimulusSet.load(cache=...)``, ``--no-cache``).
    """
    return cache and cache_on()


def _manifest_digest() -> str:
    # The committed manifest defines the data set; a new manifest must invalidate every entry.
    try:
        return hashlib.sha256(manifest_path().read_bytes()).hexdigest()
    except FileNotFoundError:
        return "no-manifest"


def cache_key(root: str | os.PathLike[str], stimuli: Sequence[Stimulus], digests: dict[str, str] | None = None) -> str:
    """A digest of the manifest, the files (relpath and SHA-256 of the content) and the decoder version.

    Parameters
    ----------
    root
        The stimulus folder.
    stimuli
        Its stimuli, in the order they are decoded.
    digests
        ``{relpath: sha256}`` of the files; hashed here when not given.
    """
    if digests is None:
        digests = hash_stimuli(root, [s.relpath for s in stimuli])
    files = [[stimulus.relpath, digests[stimulus.relpath]] for stimulus in stimuli]
    return key_of({"format": CACHE_FORMAT, "decoder": decoder_record(), "manifest": _manifest_digest(), "files": files})


def _read(store: DecodeCache, key: str, count: int) -> torch.Tensor | None:
    """The cached tensor, or None when absent; raises ValueError/OSError when the entry is bad."""
    import torch

    data, record_path = store.root / f"{key}.npy", store.root / f"{key}.json"
    if not data.exists() or not record_path.exists():
        return None
    record = read_record(record_path, key)
    array = np.load(data, allow_pickle=False)
    if array.dtype != np.uint8 or array.ndim != 4 or array.shape[:2] != (count, 3) or not matches(array, record):
        raise ValueError("checksum, shape or key mismatch")
    store.touch(record_path)
    return torch.from_numpy(array)


def _write(store: DecodeCache, key: str, images: torch.Tensor) -> None:
    """Write the entry under its lock (bounded: a writer stuck for 10 minutes is given up), so two processes
    filling the same entry do not interleave."""
    from filelock import FileLock

    array = images.numpy()
    data = store.root / f"{key}.npy"
    store.root.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{data}.lock", timeout=600):
        # Under the lock no other process writes this entry: its temporary files of the older naming are a killed
        # writer's (SIGKILL leaves a 184 MB .npy temp file behind).
        for leftover in store.root.glob(f".{key}.*.tmp"):
            if store.legacy is not None and store.legacy.fullmatch(leftover.name):
                leftover.unlink(missing_ok=True)
        store.write(data, lambda handle: np.save(handle, array, allow_pickle=False))
        record = {"key": key, "shape": list(array.shape), "sha256": array_digest(array), "format": CACHE_FORMAT}
        store.write(store.root / f"{key}.json", lambda handle: handle.write(json.dumps(record).encode()))
    store.evict()


def load_or_decode(
    root: str | os.PathLike[str],
    stimuli: Sequence[Stimulus],
    decode: Callable[[], torch.Tensor],
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    digests: dict[str, str] | None = None,
) -> tuple[torch.Tensor, str]:
    """The decoded stimuli from the cache, else ``decode()`` (then stored). Returns (images, status).

    ``status`` is "hit", "miss" or "rebuilt" (a bad entry was replaced). A cache folder that cannot be written
    only costs the speed-up: the decoded pixels are returned all the same.

    Parameters
    ----------
    root
        The stimulus folder.
    stimuli
        Its stimuli, in order.
    decode
        Decodes them (uint8 N x 3 x H x W) when the cache has no good entry.
    cache_dir
        The cache's folder (default: ``<cache folder>/stimuli``).
    digests
        ``{relpath: sha256}`` of the files, when already computed.
    """
    store = DecodeCache(cache_dir)
    key = cache_key(root, stimuli, digests)
    status = "miss"
    try:
        cached = _read(store, key, len(stimuli))
        if cached is not None:
            return cached, "hit"
    except (OSError, ValueError, KeyError, TypeError, EOFError) as error:
        warnings.warn(
            f"stimulus cache {store.root / key}.npy is unreadable ({error}); decoding the PNGs again",
            StimulusCacheWarning,
            stacklevel=3,
        )
        status = "rebuilt"
    images = decode()
    try:
        _write(store, key, images)
    except (OSError, DataError) as error:  # filelock's Timeout is an OSError: it costs only the speed-up
        warnings.warn(f"could not write the stimulus cache {store.root}: {error}", StimulusCacheWarning, stacklevel=3)
    return images, status
