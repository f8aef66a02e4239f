"""The output cache: a model's raw outputs on a stimulus set, stored once per key and reused.

After one evaluation, every other analysis of the same model on the same stimuli under the same
preprocessing (humans, accuracy, compare, the sensitivity card's aggregation variants, rescoring) needs
no forward pass. The *key* is computed by :mod:`modelval.evaluation` from every input that can change an
output (the weights, the architecture, the resolved preprocessing, the stimuli's content, precision,
device class, the forward path's version and the library versions); this module only stores arrays under
keys, safely:

- **Atomic.** Each file is written to a temporary name in its folder and renamed into place; an entry is
  complete once its ``meta.json`` exists, and ``meta.json`` holds the SHA-256 of the array, checked on
  every read (a torn or corrupted entry is a miss and is removed).
- **Concurrent writers.** Two processes computing the same key write the same bytes; renames are atomic,
  so a reader sees one whole entry or none. Eviction tolerates files another process removed.
- **Resumable.** While a forward pass runs, each finished batch is saved under ``partial/``; an
  interrupted evaluation (Ctrl-C, a killed job) computes only the rows that are missing next time.
- **Bounded.** After each write the least recently used entries are removed until the cache is under its
  size limit (``MODELVAL_OUTPUT_CACHE_SIZE``, default 2 GiB).

Location: ``$MODELVAL_OUTPUT_CACHE``, else ``<user cache>/outputs``; ``MODELVAL_NO_OUTPUT_CACHE=1`` turns
it off (as ``--no-output-cache`` does for one command). ``modelval cache info|clear`` shows and empties it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from modelval.errors import DataError
from modelval.paths import user_cache_dir

OUTPUT_CACHE_ENV = "MODELVAL_OUTPUT_CACHE"
NO_OUTPUT_CACHE_ENV = "MODELVAL_NO_OUTPUT_CACHE"
OUTPUT_CACHE_SIZE_ENV = "MODELVAL_OUTPUT_CACHE_SIZE"
DEFAULT_MAX_BYTES = 2 * 1024**3
#: Partial entries (an interrupted run) untouched this long are removed by the next eviction.
STALE_PARTIAL_S = 7 * 24 * 3600

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"2G"``, ``"500MiB"``, ``"1.5g"`` or a number of bytes, as bytes (powers of 1024)."""
    match = _SIZE.match(text)
    if not match:
        raise DataError(f"{OUTPUT_CACHE_SIZE_ENV}={text!r}: give a size such as 2G, 500M or a number of bytes")
    number, unit = float(match.group(1)), match.group(2).lower()
    return int(number * 1024 ** "_kmgt".index(unit or "_"))


def output_cache_enabled(flag: bool | None = None) -> bool:
    """``flag`` if given, else on unless ``MODELVAL_NO_OUTPUT_CACHE`` is set to 1/true."""
    if flag is not None:
        return flag
    return os.environ.get(NO_OUTPUT_CACHE_ENV, "").lower() not in ("1", "true", "yes")


def default_output_cache_dir() -> Path:
    override = os.environ.get(OUTPUT_CACHE_ENV)
    return Path(override).expanduser() if override else user_cache_dir() / "outputs"


@dataclass(frozen=True)
class CacheEntry:
    key: str
    path: Path
    bytes: int
    last_used: float
    meta: dict[str, Any]


class OutputCache:
    """Arrays under keys (hex digests) in a folder; see the module docstring for the guarantees."""

    def __init__(self, root: str | os.PathLike[str] | None = None, *, max_bytes: int | None = None) -> None:
        self.root = Path(root) if root is not None else default_output_cache_dir()
        if max_bytes is None:
            size = os.environ.get(OUTPUT_CACHE_SIZE_ENV)
            max_bytes = parse_size(size) if size else DEFAULT_MAX_BYTES
        self.max_bytes = max_bytes

    # --- entries ---------------------------------------------------------------------------

    def entry_dir(self, key: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{16,128}", key):
            raise ValueError(f"an output-cache key is a hex digest, got {key!r}")
        return self.root / key[:2] / key

    def load(self, key: str) -> tuple[np.ndarray, dict[str, Any]] | None:
        """The complete entry of ``key`` (array, meta), or ``None``; a damaged entry is removed."""
        folder = self.entry_dir(key)
        meta_path = folder / "meta.json"
        try:
            meta = json.loads(meta_path.read_text())
            array = np.load(folder / "outputs.npy", allow_pickle=False)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, json.JSONDecodeError):
            self._discard(folder)
            return None
        if not isinstance(meta, dict) or meta.get("sha256") != _array_digest(array):
            self._discard(folder)
            return None
        with contextlib.suppress(OSError):
            os.utime(meta_path)  # least recently used goes first
        return array, meta

    def contains(self, key: str) -> bool:
        """Whether a complete entry of ``key`` exists (cheap: its ``meta.json`` is there; not checksummed)."""
        return (self.entry_dir(key) / "meta.json").is_file()

    def save(self, key: str, array: np.ndarray, meta: dict[str, Any]) -> None:
        """Store ``array`` under ``key`` (atomically), drop the key's partial rows, then keep within the limit."""
        folder = self.entry_dir(key)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            _write_atomic(folder, "outputs.npy", lambda handle: np.save(handle, array, allow_pickle=False))
            full = {**meta, "key": key, "shape": list(array.shape), "dtype": str(array.dtype),
                    "sha256": _array_digest(array), "created": time.time()}  # fmt: skip
            _write_atomic(folder, "meta.json", lambda handle: handle.write(json.dumps(full, indent=1).encode()))
        except OSError:
            return  # a full disk or a read-only cache never fails an evaluation: the result is still returned
        shutil.rmtree(folder / "partial", ignore_errors=True)
        self.evict()

    # --- partial rows of an interrupted forward pass ---------------------------------------------

    def save_rows(self, key: str, start: int, rows: np.ndarray) -> None:
        """Keep rows ``start .. start + len(rows)`` of a forward pass in progress."""
        folder = self.entry_dir(key) / "partial"
        with contextlib.suppress(OSError):
            folder.mkdir(parents=True, exist_ok=True)
            name = f"{start:09d}-{start + len(rows):09d}.npy"
            _write_atomic(folder, name, lambda handle: np.save(handle, rows, allow_pickle=False))

    def saved_rows(self, key: str, total: int) -> Iterator[tuple[int, np.ndarray]]:
        """``(start, rows)`` of every readable partial chunk of ``key`` that fits in ``total`` rows."""
        folder = self.entry_dir(key) / "partial"
        if not folder.is_dir():
            return
        for path in sorted(folder.glob("*.npy")):
            match = re.fullmatch(r"(\d+)-(\d+)\.npy", path.name)
            if not match:
                continue
            start, stop = int(match.group(1)), int(match.group(2))
            try:
                rows = np.load(path, allow_pickle=False)
            except (OSError, ValueError):
                continue
            if stop <= total and len(rows) == stop - start:
                yield start, rows

    # --- size, listing, eviction -----------------------------------------------------------

    def entries(self) -> list[CacheEntry]:
        """Every complete entry, least recently used first."""
        found = []
        for meta_path in self.root.glob("??/*/meta.json"):
            folder = meta_path.parent
            try:
                meta = json.loads(meta_path.read_text())
                size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
                used = meta_path.stat().st_mtime
            except (OSError, ValueError):
                continue
            found.append(CacheEntry(folder.name, folder, size, used, meta if isinstance(meta, dict) else {}))
        return sorted(found, key=lambda entry: entry.last_used)

    def partial_entries(self) -> list[Path]:
        return sorted(p for p in self.root.glob("??/*/partial") if p.is_dir())

    def evict(self) -> list[str]:
        """Remove least recently used entries until the cache fits ``max_bytes``; stale partials too."""
        now = time.time()
        for partial in self.partial_entries():
            with contextlib.suppress(OSError):
                if now - partial.stat().st_mtime > STALE_PARTIAL_S:
                    shutil.rmtree(partial, ignore_errors=True)
        entries = self.entries()
        total = sum(entry.bytes for entry in entries)
        removed = []
        for entry in entries:
            if total <= self.max_bytes:
                break
            self._discard(entry.path)
            total -= entry.bytes
            removed.append(entry.key)
        return removed

    def info(self) -> dict[str, Any]:
        entries = self.entries()
        return {
            "path": str(self.root),
            "entries": len(entries),
            "bytes": sum(entry.bytes for entry in entries),
            "max_bytes": self.max_bytes,
            "interrupted_runs": len(self.partial_entries()),
            "models": sorted({str(entry.meta.get("model", "?")) for entry in entries}),
        }

    def clear(self) -> int:
        """Remove every entry (complete or partial); the number of complete entries removed."""
        count = len(self.entries())
        for folder in self.root.glob("??"):
            shutil.rmtree(folder, ignore_errors=True)
        return count

    @staticmethod
    def _discard(folder: Path) -> None:
        shutil.rmtree(folder, ignore_errors=True)


def _array_digest(array: np.ndarray) -> str:
    contiguous = np.ascontiguousarray(array)
    digest = hashlib.sha256(f"{contiguous.dtype}|{contiguous.shape}|".encode())
    digest.update(contiguous.tobytes())
    return digest.hexdigest()


def _write_atomic(folder: Path, name: str, write: Any) -> None:
    handle, temporary = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
    try:
        with os.fdopen(handle, "wb") as stream:
            write(stream)
        os.replace(temporary, folder / name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
