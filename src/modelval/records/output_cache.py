"""The output cache: a model's raw outputs on a stimulus set, stored once per key and reused.

After one evaluation, every other analysis of the same model on the same stimuli under the same
preprocessing (humans, accuracy, compare, the sensitivity card's aggregation variants, rescoring) needs
no forward pass. The *key* is computed by :mod:`modelval.evaluation` from every input that can change an
output (the weights, the architecture, the resolved preprocessing, the stimuli's content, precision,
device class, the forward path's version and the library versions); this module only stores arrays under
keys, safely:

- **Atomic.** Each file is written as :mod:`modelval.atomic` writes every file (a locked temporary file
  ``.<name>.modelval-<random>.tmp`` in its folder, renamed into place); an entry is complete once its
  ``meta.json`` exists.
- **Verified before use.** ``meta.json`` holds the SHA-256, shape and dtype of the outputs and of the *probe*
  (the model's outputs on a few fixed stimuli, computed alone when the entry was written). A read checks them
  all and that every value is finite; the evaluation then runs the model on the same probe stimuli and uses the
  entry only if the answers agree (:mod:`modelval.evaluation.forward`), so state that no digest of the key sees
  cannot serve one model's outputs to another. A damaged or disagreeing entry is removed and rebuilt, never
  scored. Partial rows are checked the same way (each chunk's SHA-256 is in its name; the partial run's probe
  is kept beside them); one bad chunk discards the interrupted run, which is then computed again.
- **Concurrent writers.** Two processes computing the same key write the same bytes; renames are atomic,
  so a reader sees one whole entry or none. Eviction tolerates files another process removed.
- **Resumable.** While a forward pass runs, each finished batch is saved under ``partial/``; an
  interrupted evaluation (Ctrl-C, a killed job) computes only the rows that are missing next time.
- **Deletes only its own.** Entries live in ``<2 hex>/<hex key>/`` and hold only the files named above;
  ``clear`` and eviction remove such folders and nothing else (a user's ``db/`` beside them stays), and the
  temporary files of killed writers (no live process holds their lock), which the next write removes.
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
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from modelval import atomic
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


@dataclass(frozen=True)
class StoredOutputs:
    """A complete entry, verified: the outputs, the probe rows it was written with, and its record."""

    outputs: np.ndarray
    probe: np.ndarray
    meta: dict[str, Any]


@dataclass(frozen=True)
class Cleared:
    """What :meth:`OutputCache.clear` removed, and what it left because modelval did not make it."""

    entries: int
    interrupted_runs: int
    temporary_files: int
    bytes: int
    left: tuple[str, ...]
    answer_files: int = 0


#: The files of an entry folder; a folder holding anything else is not modelval's and is never removed.
ENTRY_FILES = frozenset({"meta.json", "outputs.npy", "probe.npy", "partial"})
#: A temporary file of the naming before modelval.atomic's, untouched this long, belongs to a killed writer.
STALE_TEMP_S = 3600
_KEY = re.compile(r"[0-9a-f]{16,128}")
#: The answer cache's folder beside the entries (:mod:`modelval.records.answer_cache`): ``<sha256>.json`` files.
ANSWERS = "answers"
_ANSWER_FILE = re.compile(r"[0-9a-f]{64}\.json")
_PREFIX = re.compile(r"[0-9a-f]{2}")
_CHUNK = re.compile(r"(\d{9})-(\d{9})-([0-9a-f]{16})\.npy")
#: Temporary names of the cache's writer before it wrote through modelval.atomic (".<name>.<random>").
_LEGACY_TEMP = re.compile(r"\.(meta\.json|outputs\.npy|probe\.npy|\d{9}-\d{9}(-[0-9a-f]{16})?\.npy)\.\w+")
#: The Cache Directory Tagging Specification's signature: backup tools skip a folder holding it.
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n# modelval's output cache: `modelval cache clear` empties it.\n"
)


def is_temporary(path: Path) -> bool:
    return atomic.is_temporary(path) or bool(_LEGACY_TEMP.fullmatch(path.name))


def _writer_is_gone(path: Path) -> bool:
    if atomic.is_temporary(path):
        return atomic.writer_is_gone(path)
    try:
        return time.time() - path.stat().st_mtime > STALE_TEMP_S
    except OSError:
        return False


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
        if not _KEY.fullmatch(key):
            raise ValueError(f"an output-cache key is a hex digest, got {key!r}")
        return self.root / key[:2] / key

    def load(self, key: str, *, rows: int | None = None) -> StoredOutputs | None:
        """The complete entry of ``key``, verified; ``None`` when there is none or it fails a check (it is removed).

        Checked: the record, the SHA-256, shape and dtype of the outputs and of the probe, ``rows`` (when given),
        and that every value is finite (a model's NaN is refused before it is stored, so a NaN here is damage).
        """
        folder = self.entry_dir(key)
        meta_path = folder / "meta.json"
        try:
            meta = json.loads(meta_path.read_text())
            array = np.load(folder / "outputs.npy", allow_pickle=False)
            probe = np.load(folder / "probe.npy", allow_pickle=False)
        except FileNotFoundError:
            if meta_path.exists():  # a record without its arrays
                self._discard(folder)
            return None
        except (OSError, ValueError, json.JSONDecodeError):
            self._discard(folder)
            return None
        if not (
            isinstance(meta, dict)
            and _verified(array, meta.get("sha256"), meta.get("shape"))
            and _verified(probe, meta.get("probe_sha256"), meta.get("probe_shape"))
            and (rows is None or len(array) == rows)
            and probe.shape[1:] == array.shape[1:]
        ):
            self._discard(folder)
            return None
        with contextlib.suppress(OSError):
            os.utime(meta_path)  # least recently used goes first
        return StoredOutputs(array, probe, meta)

    def contains(self, key: str) -> bool:
        """Whether a complete entry of ``key`` exists (cheap: its ``meta.json`` is there; not checksummed)."""
        return (self.entry_dir(key) / "meta.json").is_file()

    def save(self, key: str, array: np.ndarray, meta: dict[str, Any], *, probe: np.ndarray) -> None:
        """Store ``array`` and its ``probe`` rows under ``key`` (atomically), drop the key's partial rows, then keep
        within the limit."""
        folder = self.entry_dir(key)
        try:
            self._tag()
            folder.mkdir(parents=True, exist_ok=True)
            _write_atomic(folder, "outputs.npy", lambda handle: np.save(handle, array, allow_pickle=False))
            _write_atomic(folder, "probe.npy", lambda handle: np.save(handle, probe, allow_pickle=False))
            full = {**meta, "key": key, "shape": list(array.shape), "dtype": str(array.dtype),
                    "sha256": _array_digest(array), "probe_shape": list(probe.shape),
                    "probe_sha256": _array_digest(probe), "created": time.time()}  # fmt: skip
            _write_atomic(folder, "meta.json", lambda handle: handle.write(json.dumps(full, indent=1).encode()))
        except (OSError, DataError):
            return  # a full disk or a read-only cache never fails an evaluation: the result is still returned
        shutil.rmtree(folder / "partial", ignore_errors=True)
        self.evict()

    def discard(self, key: str) -> None:
        """Remove the entry of ``key``, complete and partial (it disagreed with the model it was found for)."""
        self._discard(self.entry_dir(key))

    # --- partial rows of an interrupted forward pass ---------------------------------------------

    def start_rows(self, key: str, probe: np.ndarray) -> None:
        """Begin keeping the rows of a forward pass: the probe rows first, so that a resumed run can check that the
        rows it finds are this model's."""
        folder = self.entry_dir(key) / "partial"
        with contextlib.suppress(OSError, DataError):
            self._tag()
            folder.mkdir(parents=True, exist_ok=True)
            if not (folder / "probe.npy").is_file():
                _write_atomic(folder, "probe.npy", lambda handle: np.save(handle, probe, allow_pickle=False))

    def save_rows(self, key: str, start: int, rows: np.ndarray) -> None:
        """Keep rows ``start .. start + len(rows)`` of a forward pass in progress (the name carries their SHA-256)."""
        folder = self.entry_dir(key) / "partial"
        with contextlib.suppress(OSError, DataError):
            folder.mkdir(parents=True, exist_ok=True)
            name = f"{start:09d}-{start + len(rows):09d}-{_array_digest(rows)[:16]}.npy"
            _write_atomic(folder, name, lambda handle: np.save(handle, rows, allow_pickle=False))

    def partial_probe(self, key: str) -> np.ndarray | None:
        """The probe rows an interrupted run of ``key`` started with (``None``: none, or unreadable)."""
        try:
            probe = np.load(self.entry_dir(key) / "partial" / "probe.npy", allow_pickle=False)
        except (OSError, ValueError):
            return None
        return probe if probe.ndim == 2 and probe.dtype == np.float32 and np.isfinite(probe).all() else None

    def saved_rows(self, key: str, total: int, width: int) -> list[tuple[int, np.ndarray]]:
        """``(start, rows)`` of every chunk an interrupted run of ``key`` kept, each verified (its SHA-256, ``width``
        float32 columns, finite values, inside ``total`` rows); one bad chunk discards them all (``[]``)."""
        folder = self.entry_dir(key) / "partial"
        if not folder.is_dir():
            return []
        found = []
        for path in sorted(folder.iterdir()):
            if path.name == "probe.npy" or is_temporary(path):
                continue
            match = _CHUNK.fullmatch(path.name)
            try:
                rows = np.load(path, allow_pickle=False) if match else None
            except (OSError, ValueError):
                rows = None
            if match is None or rows is None:
                return self._discard_partial(folder)
            start, stop = int(match.group(1)), int(match.group(2))
            if not (
                rows.ndim == 2 and rows.dtype == np.float32 and rows.shape == (stop - start, width)
                and stop <= total and _array_digest(rows)[:16] == match.group(3) and np.isfinite(rows).all()
            ):  # fmt: skip
                return self._discard_partial(folder)
            found.append((start, rows))
        return found

    @staticmethod
    def _discard_partial(folder: Path) -> list[tuple[int, np.ndarray]]:
        shutil.rmtree(folder, ignore_errors=True)
        return []

    # --- size, listing, eviction -----------------------------------------------------------

    def _entry_folders(self) -> Iterator[Path]:
        """Every folder that is modelval's entry: ``<2 hex>/<hex key starting with them>/`` holding only its files."""
        if not self.root.is_dir():
            return
        for prefix in sorted(self.root.iterdir()):
            if not (_PREFIX.fullmatch(prefix.name) and prefix.is_dir() and not prefix.is_symlink()):
                continue
            for folder in sorted(prefix.iterdir()):
                if _is_entry(folder, prefix.name):
                    yield folder

    def _foreign(self) -> list[str]:
        """What stands in the cache folder that modelval did not make (left alone by ``clear``)."""
        if not self.root.is_dir():
            return []
        found = []
        for path in sorted(self.root.iterdir()):
            if path.name == "CACHEDIR.TAG":
                continue
            if path.name == ANSWERS and path.is_dir() and not path.is_symlink():
                found += [f"{ANSWERS}/{p.name}" for p in sorted(path.iterdir()) if p not in self.answer_files()]
                continue
            if not (_PREFIX.fullmatch(path.name) and path.is_dir() and not path.is_symlink()):
                found.append(path.name + ("/" if path.is_dir() else ""))
                continue
            found += [f"{path.name}/{p.name}" for p in sorted(path.iterdir()) if not _is_entry(p, path.name)]
        return found

    def entries(self) -> list[CacheEntry]:
        """Every complete entry, least recently used first."""
        found = []
        for folder in self._entry_folders():
            meta_path = folder / "meta.json"
            try:
                meta = json.loads(meta_path.read_text())
                size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file() and not is_temporary(p))
                used = meta_path.stat().st_mtime
            except (OSError, ValueError):
                continue
            found.append(CacheEntry(folder.name, folder, size, used, meta if isinstance(meta, dict) else {}))
        return sorted(found, key=lambda entry: entry.last_used)

    def answer_files(self) -> list[Path]:
        """The answer cache's files (a VLM's answers per model and prompt) and their writers' temporary files."""
        folder = self.root / ANSWERS
        if not folder.is_dir() or folder.is_symlink():
            return []
        return sorted(
            p for p in folder.iterdir()
            if p.is_file() and not p.is_symlink() and (_ANSWER_FILE.fullmatch(p.name) or atomic.is_temporary(p))
        )  # fmt: skip

    def partial_entries(self) -> list[Path]:
        return [folder / "partial" for folder in self._entry_folders() if (folder / "partial").is_dir()]

    def temporary_files(self, *, dead: bool = False) -> list[Path]:
        """The temporary files of writers in the entries (with ``dead``: only those of killed writers)."""
        found = []
        for folder in self._entry_folders():
            for place in (folder, folder / "partial"):
                with contextlib.suppress(OSError):
                    found += [p for p in place.iterdir() if is_temporary(p) and p.is_file() and not p.is_symlink()]
        return sorted(p for p in found if not dead or _writer_is_gone(p))

    def evict(self) -> list[str]:
        """Remove least recently used entries until the cache fits ``max_bytes``; stale partials and the temporary
        files of killed writers too."""
        now = time.time()
        for path in self.temporary_files(dead=True):
            with contextlib.suppress(OSError):
                path.unlink()
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
        partial = self.partial_entries()
        temporary = self.temporary_files()
        return {
            "path": str(self.root),
            "entries": len(entries),
            "bytes": sum(entry.bytes for entry in entries),
            "max_bytes": self.max_bytes,
            "interrupted_runs": len(partial),
            "interrupted_bytes": sum(_size(p) for p in partial),
            "temporary_files": len(temporary),
            "temporary_bytes": sum(_size(p) for p in temporary),
            "answer_files": len(answers := self.answer_files()),
            "answer_bytes": sum(_size(p) for p in answers),
            "not_modelvals": self._foreign(),
            "models": sorted({str(entry.meta.get("model", "?")) for entry in entries}),
        }

    def clear(self) -> Cleared:
        """Remove every entry (complete or partial) and writers' temporary files; nothing modelval did not make."""
        entries = interrupted = temporary = size = 0
        emptied = set()
        for folder in list(self._entry_folders()):
            size += _size(folder)
            entries += (folder / "meta.json").is_file()
            interrupted += (folder / "partial").is_dir()
            temporary += sum(1 for p in folder.rglob("*") if is_temporary(p))
            self._discard(folder)
            emptied.add(folder.parent)
        answers = self.answer_files()
        for path in answers:
            size += _size(path)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            emptied.add(path.parent)
        for folder in emptied:
            with contextlib.suppress(OSError):
                folder.rmdir()  # only a folder that held modelval's files, and only when nothing else is in it
        return Cleared(entries, interrupted, temporary, size, tuple(self._foreign()), len(answers))

    def _tag(self) -> None:
        tag = self.root / "CACHEDIR.TAG"
        if not tag.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError, DataError):
                _write_atomic(self.root, "CACHEDIR.TAG", lambda handle: handle.write(CACHEDIR_TAG.encode()))

    @staticmethod
    def _discard(folder: Path) -> None:
        shutil.rmtree(folder, ignore_errors=True)


def _is_entry(folder: Path, prefix: str) -> bool:
    if not (_KEY.fullmatch(folder.name) and folder.name.startswith(prefix)) or folder.is_symlink():
        return False
    try:
        return folder.is_dir() and all(p.name in ENTRY_FILES or is_temporary(p) for p in folder.iterdir())
    except OSError:
        return False


def _size(path: Path) -> int:
    try:
        if path.is_file():
            return path.stat().st_size
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    except OSError:
        return 0


def _verified(array: np.ndarray, sha256: object, shape: object) -> bool:
    """The array is the one recorded (its SHA-256 and shape), float32 (N, K), and every value finite."""
    return (
        array.ndim == 2
        and array.dtype == np.float32
        and list(array.shape) == shape
        and sha256 == _array_digest(array)
        and bool(np.isfinite(array).all())
    )


def _array_digest(array: np.ndarray) -> str:
    contiguous = np.ascontiguousarray(array)
    digest = hashlib.sha256(f"{contiguous.dtype}|{contiguous.shape}|".encode())
    digest.update(contiguous.tobytes())
    return digest.hexdigest()


def _write_atomic(folder: Path, name: str, write: Any) -> None:
    """Write ``folder/name`` whole or not at all (:func:`modelval.atomic.replacing`; a failure is a ``DataError``)."""
    with atomic.replacing(folder / name, binary=True) as handle:
        write(handle)
