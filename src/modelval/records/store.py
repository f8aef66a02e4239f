"""The one base of modelval's caches: the decoded stimuli, a model's outputs, a VLM's answers.

A store is a folder of entries, ``<cache folder>/<the store's folder>``; the cache folder is
``$MODELVAL_CACHE_DIR`` (the ``cache_dir`` setting), else the per-user cache (:func:`modelval.paths.user_cache_dir`).
Every store keeps the same rules:

- **On or off in one place.** :func:`cache_on`: a flag or argument when one is given, else ``$MODELVAL_NO_CACHE=1``
  (the ``cache`` setting) turns every store off.
- **One key convention.** A key is a lowercase hex SHA-256 digest (16 to 128 digits) of everything an entry
  depends on (:func:`key_of` makes one from a JSON record); an entry's files are named after its key.
- **Verified before served.** An entry's record, a JSON file written last (an entry is complete once it is
  there), names its key and the SHA-256 and shape of each array it holds (:func:`array_digest`). A read checks
  them (:func:`read_record`, :func:`matches`) before anything is used; an entry that fails is removed, never served.
- **Written whole.** Every file goes through :mod:`modelval.atomic` (a locked temporary
  ``.<name>.modelval-<random>.tmp`` beside it, renamed into place).
- **Bounded.** After each write the least recently used entries go until the store is under ``$MODELVAL_CACHE_SIZE``
  (the ``cache_size`` setting, default 2 GiB); a read touches the entry's record. Incomplete entries left
  untouched for :data:`STALE_PARTIAL_S` go too.
- **Deletes only its own.** :meth:`Store.clear`, eviction and clean-up remove only entries named as the store
  names them, its ``CACHEDIR.TAG`` and the temporary files of its writers (those of killed writers only, except
  in ``clear``); anything else in the folder is named by :meth:`Store.info` and left where it is.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar

import numpy as np

from modelval import atomic, settings
from modelval.paths import user_cache_dir

#: Incomplete entries (an interrupted run's rows) untouched this long are removed by the next eviction.
STALE_PARTIAL_S = 7 * 24 * 3600
#: A temporary file of the naming before :mod:`modelval.atomic`'s (no lock to probe) is dead after this long.
LEGACY_TEMP_S = 3600
#: The Cache Directory Tagging Specification's file: backup tools skip a folder holding it.
TAG = "CACHEDIR.TAG"
_TAG_TEXT = "Signature: 8a477f597d28d172789f06886806bc55\n# a modelval cache: `modelval cache clear` empties it.\n"
KEY = re.compile(r"[0-9a-f]{16,128}")


def cache_on(flag: bool | None = None) -> bool:
    """Whether a cache is used: ``flag`` when given, else on unless ``$MODELVAL_NO_CACHE=1``.

    Parameters
    ----------
    flag
        From a command's flag or a Python argument; ``None`` reads the setting.
    """
    return bool(settings.value("cache", flag))


def key_of(record: Any) -> str:
    """An entry's key: the SHA-256 of ``record``, everything the entry depends on, as canonical JSON.

    Parameters
    ----------
    record
        A JSON-ready value.
    """
    return hashlib.sha256(json.dumps(record, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def array_digest(array: np.ndarray) -> str:
    """The SHA-256 of an array's dtype, shape and bytes, as a record names it.

    Parameters
    ----------
    array
        A numpy array.
    """
    contiguous = np.ascontiguousarray(array)
    digest = hashlib.sha256(f"{contiguous.dtype}|{contiguous.shape}|".encode())
    digest.update(contiguous.data.cast("B"))
    return digest.hexdigest()


def matches(array: np.ndarray, record: dict[str, Any], prefix: str = "") -> bool:
    """Whether ``array`` is the one ``record`` names by its ``<prefix>shape`` and ``<prefix>sha256``.

    Parameters
    ----------
    array
        The array read from the entry.
    record
        The entry's record.
    prefix
        The fields' prefix (``probe_`` for a second array).
    """
    return list(array.shape) == record.get(f"{prefix}shape") and record.get(f"{prefix}sha256") == array_digest(array)


def read_record(path: Path, key: str) -> dict[str, Any]:
    """An entry's record; ``ValueError`` when the file is not a record naming ``key``, ``OSError`` when unreadable.

    Parameters
    ----------
    path
        The record's file.
    key
        The key it must name.
    """
    record = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(record, dict) or record.get("key") != key:
        raise ValueError(f"{path.name} is not the record of the entry {key[:16]}")
    return record


@dataclass(frozen=True)
class Entry:
    """One entry: what removing it removes, its record (whose time is the last use) and its bytes."""

    key: str
    paths: tuple[Path, ...]
    record: Path
    bytes: int
    last_used: float
    complete: bool = True

    @property
    def meta(self) -> dict[str, Any]:
        """The entry's record (``{}`` when it cannot be read)."""
        try:
            record = json.loads(self.record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return record if isinstance(record, dict) else {}


@dataclass
class Contents:
    """What stands in a store's folder: its entries, its writers' temporary files, what is not modelval's."""

    entries: list[Entry] = field(default_factory=list)
    temporaries: list[Path] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Cleared:
    """What :meth:`Store.clear` removed, and what it left because modelval did not make it."""

    entries: int
    interrupted_runs: int
    temporary_files: int
    bytes: int
    left: tuple[str, ...]


class Store:
    """Entries under keys in ``<cache folder>/<folder>``, by the rules of the module docstring; a flat store
    (``<key><suffix>`` files) names its :attr:`suffixes`, another layout overrides :meth:`_scan`.

    Parameters
    ----------
    root
        The store's folder (default: ``<cache folder>/<folder>``).
    max_bytes
        The size it keeps itself under (default: ``$MODELVAL_CACHE_SIZE``, 2 GiB).
    """

    #: The store's folder under the cache folder.
    folder: ClassVar[str] = ""
    #: What one entry is, in the words of ``modelval cache info`` ("decoded stimulus set").
    what: ClassVar[str] = "entry"
    #: What an incomplete entry is, in those words.
    partial_what: ClassVar[str] = "incomplete entries"
    #: A flat store's files of one entry, ``<key><suffix>``: complete when all are there; the ``.json`` is the record.
    suffixes: ClassVar[tuple[str, ...]] = (".json",)
    #: Temporary names of the store's writers before :mod:`modelval.atomic`'s rule.
    legacy: ClassVar[re.Pattern[str] | None] = None

    def __init__(self, root: str | os.PathLike[str] | None = None, *, max_bytes: int | None = None) -> None:
        self.root = Path(root) if root is not None else user_cache_dir() / self.folder
        self.max_bytes = int(settings.value("cache_size")) if max_bytes is None else max_bytes

    def write(self, path: Path, write: Callable[[IO[bytes]], object]) -> None:
        """Write one file of an entry whole (:func:`modelval.atomic.replacing`); a failure is an ``OSError`` or
        a ``DataError``.

        Parameters
        ----------
        path
            The file, in the store's folder.
        write
            Writes the content into the binary handle it is given.
        """
        if not (self.root / TAG).exists():
            self.root.mkdir(parents=True, exist_ok=True)
            atomic.write_text(self.root / TAG, _TAG_TEXT)
        with atomic.replacing(path, binary=True) as handle:
            write(handle)

    @staticmethod
    def touch(record: Path) -> None:
        """Mark an entry used now: the least recently used go first.

        Parameters
        ----------
        record
            The entry's record.
        """
        with contextlib.suppress(OSError):
            record.touch(exist_ok=True)

    def is_temporary(self, path: Path) -> bool:
        """Whether ``path`` is a temporary file of the store's writers (the atomic rule's, or the older naming).

        Parameters
        ----------
        path
            A file in the store.
        """
        return atomic.is_temporary(path) or bool(self.legacy and self.legacy.fullmatch(path.name))

    def _key_of_file(self, name: str) -> str | None:
        for ending in (*self.suffixes, *(f"{suffix}.lock" for suffix in self.suffixes)):
            if name.endswith(ending) and KEY.fullmatch(name[: -len(ending)]):
                return name[: -len(ending)]
        return None

    def _scan(self) -> Contents:
        contents, groups = Contents(), dict[str, list[Path]]()
        for path in self._children(self.root):
            key = self._key_of_file(path.name) if path.is_file() and not path.is_symlink() else None
            if key is not None:
                groups.setdefault(key, []).append(path)
            elif path.is_file() and self.is_temporary(path):
                contents.temporaries.append(path)
            elif path.name != TAG:
                contents.foreign.append(path.name + ("/" if path.is_dir() else ""))
        for key, paths in groups.items():
            record = self.root / f"{key}.json"
            complete = all((self.root / f"{key}{suffix}").is_file() for suffix in self.suffixes)
            used = self._modified(record if complete else paths[0])
            contents.entries.append(Entry(key, tuple(paths), record, self._bytes(paths), used, complete))
        return contents

    def entries(self) -> list[Entry]:
        """Every complete entry, least recently used first."""
        return sorted((e for e in self._scan().entries if e.complete), key=lambda entry: entry.last_used)

    def remove(self, entry: Entry) -> None:
        """Remove an entry's files (another process may have removed them first).

        Parameters
        ----------
        entry
            The entry.
        """
        for path in entry.paths:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    def evict(self) -> list[str]:
        """Remove the temporary files of killed writers, stale incomplete entries, then the least recently used
        entries until the store fits :attr:`max_bytes`; return the keys of the entries removed."""
        contents, now = self._scan(), time.time()
        for path in contents.temporaries:
            if atomic.writer_is_gone(path) if atomic.is_temporary(path) else now - self._modified(path) > LEGACY_TEMP_S:
                path.unlink(missing_ok=True)
        for entry in contents.entries:
            if not entry.complete and now - entry.last_used > STALE_PARTIAL_S:
                self.remove(entry)
        complete = sorted((e for e in contents.entries if e.complete), key=lambda entry: entry.last_used)
        total, removed = sum(entry.bytes for entry in complete), []
        for entry in complete:
            if total <= self.max_bytes:
                break
            self.remove(entry)
            total -= entry.bytes
            removed.append(entry.key)
        return removed

    def info(self) -> dict[str, Any]:
        """Where the store is, whether it is on, its entries and bytes, and what in it is not modelval's."""
        contents = self._scan()
        partial = [e for e in contents.entries if not e.complete]
        everything = [*(p for e in contents.entries for p in e.paths), *contents.temporaries, self.root / TAG]
        return {
            "path": str(self.root),
            "enabled": cache_on(),
            "entries": len(contents.entries) - len(partial),
            "bytes": self._bytes(everything),
            "max_bytes": self.max_bytes,
            "interrupted_runs": len(partial),
            "interrupted_bytes": sum(entry.bytes for entry in partial),
            "temporary_files": len(contents.temporaries),
            "temporary_bytes": self._bytes(contents.temporaries),
            "not_modelvals": contents.foreign,
        }

    def clear(self) -> Cleared:
        """Remove every entry, complete or not, the writers' temporary files and the tag, and the folders that held
        only those; nothing modelval did not make."""
        contents = self._scan()
        paths = [*(p for e in contents.entries for p in e.paths), *contents.temporaries, self.root / TAG]
        size = self._bytes(paths)
        for entry in contents.entries:
            self.remove(entry)
        for path in paths:
            if path.is_file():
                path.unlink(missing_ok=True)
            for parent in path.parents:
                if parent == self.root or self.root not in parent.parents:
                    break
                with contextlib.suppress(OSError):
                    parent.rmdir()  # only a folder that held modelval's files, and only when nothing else is in it
        partial = sum(not entry.complete for entry in contents.entries)
        left = tuple(self._scan().foreign)
        return Cleared(len(contents.entries) - partial, partial, len(contents.temporaries), size, left)

    @staticmethod
    def _children(folder: Path) -> list[Path]:
        """A folder's children, sorted (none when it is missing or a link)."""
        try:
            return [] if folder.is_symlink() else sorted(folder.iterdir())
        except OSError:
            return []

    @staticmethod
    def _modified(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0

    @staticmethod
    def _bytes(paths: Iterable[Path]) -> int:
        """The bytes of files and folders, each counted once (a file inside a folder of the list with the folder)."""
        unique, total = set(paths), 0
        for path in unique:
            if any(parent in unique for parent in path.parents):
                continue
            with contextlib.suppress(OSError):
                files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
                total += sum(p.stat().st_size for p in files)
        return total
