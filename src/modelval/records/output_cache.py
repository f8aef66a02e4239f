"""The output cache: a model's raw outputs on a stimulus set, stored once per key and reused.

After one evaluation, every other analysis of the same model on the same stimuli and preprocessing needs no
forward pass. :mod:`modelval.evaluation` computes the *key* from every input that can change an output; this
module stores arrays under keys in ``<cache folder>/outputs``, by the rules every cache keeps
(:mod:`modelval.records.store`). What is particular to outputs:

- **Layout.** An entry is ``<2 hex>/<hex key>/`` holding ``outputs.npy``, ``probe.npy`` and ``meta.json`` (its
  record, written last), and nothing else; a user's ``db/`` beside them stays.
- **Marked.** The first file of an entry folder is :data:`ENTRY_MARK`: clear and eviction remove only marked
  folders, because a name and a file list are no proof (a user's ``ef/efef.../meta.json`` looked like an entry
  and was deleted). A folder without the mark (a user's, or an entry of a modelval before marks) is left where it
  is and named by ``cache info`` and ``cache clear``; it is never served either, so the entry is written again,
  marked, the next time its model runs.
- **Verified twice, then re-checked.** The record holds the SHA-256 and shape of the outputs and of the *probe*
  (the model's outputs on a few fixed stimuli, computed alone); a read checks them and that every value is
  finite float32, then the evaluation uses the entry only if the model answers the probe as stored, and only if
  :data:`RECHECK_ROWS` stored rows drawn at random (:func:`recheck_indices`) agree with a fresh forward of their
  stimuli (:func:`rows_agree`; :mod:`modelval.evaluation.forward`). Why both: the key leaves out what no digest
  sees (private attributes, module globals, the environment), and a fixed probe is a set of stimuli a change
  can avoid entry after entry; rows drawn anew each run make such a change show up on a later run at the
  latest, with the chance :data:`NOT_COVERED` states (in the run's provenance and docs/provenance.md).
- **Resumable.** Each finished batch of a forward pass is kept under ``partial/`` (its SHA-256 in its name, the
  run's probe beside it): an interrupted evaluation computes only the missing rows; one bad chunk discards them.
- **Concurrent writers** of one key write the same bytes; renames are atomic, so a reader sees one whole entry.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from modelval.errors import DataError
from modelval.records.store import KEY, TAG, Contents, Entry, Store, array_digest, matches, read_record

#: The file that marks a folder as an entry modelval made (written before anything else in it).
ENTRY_MARK = ".modelval-entry"
_MARK_TEXT = "modelval's output cache made this folder; `modelval cache clear` removes it.\n"
#: The files of an entry folder; a folder holding anything else is not modelval's and is never removed.
ENTRY_FILES = frozenset({"meta.json", "outputs.npy", "probe.npy", "partial", ENTRY_MARK,
                         "preprocessing_check.json"})  # the last: modelval.judgement.preprocessing_check's  # fmt: skip
_PREFIX = re.compile(r"[0-9a-f]{2}")
_CHUNK = re.compile(r"(\d{9})-(\d{9})-([0-9a-f]{16})\.npy")
#: Temporary names of the cache's writer before it wrote through modelval.atomic (".<name>.<random>").
_LEGACY_TEMP = re.compile(r"\.(meta\.json|outputs\.npy|probe\.npy|\d{9}-\d{9}(-[0-9a-f]{16})?\.npy)\.\w+")


#: Stored rows run again, drawn at random, before stored outputs are served (beside the fixed probe).
RECHECK_ROWS = 4
#: (rtol, atol relative to the largest stored value) of a re-checked row's agreement, per precision. Looser than
#: the probe's: a stored row was computed in a batch of another size, which may pick another kernel (TF32 on a
#: GPU moves values by about 1e-3); a changed model moves them by far more.
RECHECK_TOLERANCE: dict[str | None, tuple[float, float]] = {None: (1e-2, 1e-3), "fp16": (2e-2, 5e-3)}
_RECHECK_BF16 = (5e-2, 2e-2)
#: What the output cache cannot show, in the run's provenance (``output_cache_not_covered``).
NOT_COVERED = (
    "the key covers the weights, the module tree, public attributes, plain tensors, non-persistent buffers, hooks, "
    "the preprocessing, the stimuli, the precision, the device class and the versions; it cannot see private "
    "attributes, module globals, the environment or code outside the model's class file. Those are checked by "
    f"running the model again on 4 fixed probe stimuli and on {RECHECK_ROWS} stored rows drawn at random each run: "
    f"a change that moves a fraction f of the outputs is served with probability at most (1 - f)^{RECHECK_ROWS} "
    "per run when it spares the probe, and a change smaller than the re-check's tolerance (1% of a value, "
    "0.1% of the largest) is never caught"
)


def recheck_indices(count: int, exclude: np.ndarray, rows: int = RECHECK_ROWS) -> np.ndarray:
    """``rows`` row indices among ``count`` not in ``exclude`` (the probe's), drawn from the system's entropy.

    Parameters
    ----------
    count
        How many rows the entry holds.
    exclude
        Rows the probe checks already.
    rows
        How many to draw.
    """
    candidates = np.setdiff1d(np.arange(count), exclude)
    # Not seeded on purpose: a fixed draw is a set of stimuli a change could avoid on every run.
    picked = np.random.default_rng().choice(candidates, size=min(rows, len(candidates)), replace=False)
    return np.sort(picked).astype(np.int64)


def rows_agree(stored: np.ndarray, fresh: np.ndarray, amp: str | None = None) -> bool:
    """Whether stored rows and the same rows computed now agree within :data:`RECHECK_TOLERANCE`.

    Parameters
    ----------
    stored
        The rows read from the entry.
    fresh
        The model's outputs on the same stimuli, now.
    amp
        The precision both ran under.
    """
    if stored.shape != fresh.shape:
        return False
    rtol, atol = RECHECK_TOLERANCE.get(amp, _RECHECK_BF16)
    scale = max(1.0, float(np.abs(stored).max(initial=0.0)))
    return bool(np.allclose(fresh, stored, rtol=rtol, atol=atol * scale))


@dataclass(frozen=True)
class StoredOutputs:
    """A complete entry, verified: the outputs, the probe rows it was written with, and its record."""

    outputs: np.ndarray
    probe: np.ndarray
    meta: dict[str, Any]


def _usable(array: np.ndarray, meta: dict[str, Any], prefix: str = "") -> bool:
    """The array is the one recorded (SHA-256 and shape), float32 (N, K), and every value finite."""
    finite = bool(np.isfinite(array).all())
    return array.ndim == 2 and array.dtype == np.float32 and matches(array, meta, prefix) and finite


def _save(array: np.ndarray) -> Any:
    return lambda handle: np.save(handle, array, allow_pickle=False)


class OutputCache(Store):
    """Arrays under keys (hex digests); see the module docstring and :class:`~modelval.records.store.Store`."""

    folder = "outputs"
    what = "stored output"
    partial_what = "interrupted runs (resumable)"
    legacy = _LEGACY_TEMP

    def entry_dir(self, key: str) -> Path:
        """The folder of ``key``'s entry.

        Parameters
        ----------
        key
            A hex digest (:func:`modelval.evaluation.output_key`).
        """
        if not KEY.fullmatch(key):
            raise ValueError(f"an output-cache key is a hex digest, got {key!r}")
        return self.root / key[:2] / key

    def load(self, key: str, *, rows: int | None = None) -> StoredOutputs | None:
        """The complete entry of ``key``, verified; ``None`` when there is none or it fails a check (it is removed).

        Parameters
        ----------
        key
            The entry's key.
        rows
            The number of rows it must have (``None``: any).
        """
        folder = self.entry_dir(key)
        if not (folder / ENTRY_MARK).is_file():
            return None  # not marked as modelval's: never served, never removed (see the module docstring)
        try:
            meta = read_record(folder / "meta.json", key)
            array = np.load(folder / "outputs.npy", allow_pickle=False)
            probe = np.load(folder / "probe.npy", allow_pickle=False)
        except FileNotFoundError:
            if (folder / "meta.json").exists():  # a record without its arrays
                self.discard(key)
            return None
        except (OSError, ValueError):
            self.discard(key)
            return None
        if not (
            _usable(array, meta) and _usable(probe, meta, "probe_")
            and (rows is None or len(array) == rows) and probe.shape[1:] == array.shape[1:]
        ):  # fmt: skip
            self.discard(key)
            return None
        self.touch(folder / "meta.json")
        return StoredOutputs(array, probe, meta)

    def contains(self, key: str) -> bool:
        """Whether a complete entry of ``key`` exists (cheap: its ``meta.json`` is there; not checksummed).

        Parameters
        ----------
        key
            The entry's key.
        """
        return (self.entry_dir(key) / "meta.json").is_file() and (self.entry_dir(key) / ENTRY_MARK).is_file()

    def save(self, key: str, array: np.ndarray, meta: dict[str, Any], *, probe: np.ndarray) -> None:
        """Store ``array`` and its ``probe`` rows under ``key``, drop the key's partial rows, then keep within the
        limit. A full disk or a read-only cache never fails an evaluation: the entry is then not stored.

        Parameters
        ----------
        key
            The entry's key.
        array
            The outputs, float32 (N, K).
        meta
            What the record says besides the digests (``model``, ``rows``, ...).
        probe
            The model's outputs on the probe stimuli, computed alone.
        """
        folder = self.entry_dir(key)
        try:
            self._marked(folder)
            self.write(folder / "outputs.npy", _save(array))
            self.write(folder / "probe.npy", _save(probe))
            record = {**meta, "key": key, "shape": list(array.shape), "dtype": str(array.dtype),
                      "sha256": array_digest(array), "probe_shape": list(probe.shape),
                      "probe_sha256": array_digest(probe), "created": time.time()}  # fmt: skip
            self.write(folder / "meta.json", lambda handle: handle.write(json.dumps(record, indent=1).encode()))
        except (OSError, DataError):
            return
        shutil.rmtree(folder / "partial", ignore_errors=True)
        self.evict()

    def _marked(self, folder: Path) -> None:
        """Make an entry folder, its mark first (an ``OSError`` or a ``DataError`` when it cannot be written)."""
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / ENTRY_MARK).is_file():
            self.write(folder / ENTRY_MARK, lambda handle: handle.write(_MARK_TEXT.encode()))

    def discard(self, key: str) -> None:
        """Remove the entry of ``key``, complete and partial (it disagreed with the model it was found for).

        Parameters
        ----------
        key
            The entry's key.
        """
        if (self.entry_dir(key) / ENTRY_MARK).is_file():
            shutil.rmtree(self.entry_dir(key), ignore_errors=True)

    # --- partial rows of an interrupted forward pass ---------------------------------------------

    def start_rows(self, key: str, probe: np.ndarray) -> None:
        """Begin keeping the rows of a forward pass: the probe rows first, so that a resumed run can check that the
        rows it finds are this model's.

        Parameters
        ----------
        key
            The entry's key.
        probe
            The model's outputs on the probe stimuli.
        """
        folder = self.entry_dir(key) / "partial"
        with contextlib.suppress(OSError, DataError):
            self._marked(folder.parent)
            folder.mkdir(parents=True, exist_ok=True)
            if not (folder / "probe.npy").is_file():
                self.write(folder / "probe.npy", _save(probe))

    def save_rows(self, key: str, start: int, rows: np.ndarray) -> None:
        """Keep rows ``start .. start + len(rows)`` of a forward pass in progress (the name carries their SHA-256).

        Parameters
        ----------
        key
            The entry's key.
        start
            The first row's index.
        rows
            The rows, float32.
        """
        folder = self.entry_dir(key) / "partial"
        with contextlib.suppress(OSError, DataError):
            self._marked(folder.parent)
            folder.mkdir(parents=True, exist_ok=True)
            self.write(folder / f"{start:09d}-{start + len(rows):09d}-{array_digest(rows)[:16]}.npy", _save(rows))

    def partial_probe(self, key: str) -> np.ndarray | None:
        """The probe rows an interrupted run of ``key`` started with (``None``: none, or unreadable).

        Parameters
        ----------
        key
            The entry's key.
        """
        if not (self.entry_dir(key) / ENTRY_MARK).is_file():
            return None
        try:
            probe = np.load(self.entry_dir(key) / "partial" / "probe.npy", allow_pickle=False)
        except (OSError, ValueError):
            return None
        return probe if probe.ndim == 2 and probe.dtype == np.float32 and np.isfinite(probe).all() else None

    def saved_rows(self, key: str, total: int, width: int) -> list[tuple[int, np.ndarray]]:
        """``(start, rows)`` of every chunk an interrupted run of ``key`` kept, each verified; one bad chunk discards
        them all (``[]``).

        Parameters
        ----------
        key
            The entry's key.
        total
            The number of rows of the whole run: a chunk must lie inside it.
        width
            The outputs' width: every chunk is float32 with this many columns, its SHA-256 as named, finite.
        """
        folder = self.entry_dir(key) / "partial"
        found: list[tuple[int, np.ndarray]] = []
        if not (folder.parent / ENTRY_MARK).is_file():
            return found
        for path in self._children(folder):
            if path.name == "probe.npy" or self.is_temporary(path):
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
                and stop <= total and array_digest(rows)[:16] == match.group(3) and np.isfinite(rows).all()
            ):  # fmt: skip
                return self._discard_partial(folder)
            found.append((start, rows))
        return found

    @staticmethod
    def _discard_partial(folder: Path) -> list[tuple[int, np.ndarray]]:
        shutil.rmtree(folder, ignore_errors=True)
        return []

    # --- what is there ---------------------------------------------------------------------------

    def _scan(self) -> Contents:
        """Entries are ``<2 hex>/<hex key starting with them>/`` folders holding only an entry's files."""
        contents = Contents()
        for prefix in self._children(self.root):
            if not (_PREFIX.fullmatch(prefix.name) and prefix.is_dir() and not prefix.is_symlink()):
                contents.foreign += [] if prefix.name == TAG else [prefix.name + ("/" if prefix.is_dir() else "")]
                continue
            for folder in self._children(prefix):
                if not self._is_entry(folder, prefix.name):
                    contents.foreign.append(f"{prefix.name}/{folder.name}")
                    continue
                meta, partial = folder / "meta.json", folder / "partial"
                files = [p for p in self._children(folder) if p.is_file() and not self.is_temporary(p)]
                if meta.is_file():
                    used = self._modified(meta)
                    contents.entries.append(Entry(folder.name, (folder,), meta, self._bytes(files), used))
                if partial.is_dir():
                    size, used = self._bytes([partial]), self._modified(partial)
                    contents.entries.append(Entry(folder.name, (partial,), partial, size, used, complete=False))
                for place in (folder, partial):
                    contents.temporaries += [p for p in self._children(place) if p.is_file() and self.is_temporary(p)]
        return contents

    def _is_entry(self, folder: Path, prefix: str) -> bool:
        if not (KEY.fullmatch(folder.name) and folder.name.startswith(prefix)) or folder.is_symlink():
            return False
        children = self._children(folder)
        marked = (folder / ENTRY_MARK).is_file() and not (folder / ENTRY_MARK).is_symlink()
        return folder.is_dir() and marked and all(p.name in ENTRY_FILES or self.is_temporary(p) for p in children)

    def remove(self, entry: Entry) -> None:
        """Remove an entry, and its folder once only the mark is left in it (a folder an interrupted run held).

        Parameters
        ----------
        entry
            The entry.
        """
        super().remove(entry)
        folder = entry.paths[0].parent if not entry.complete else entry.paths[0]
        if folder.is_dir() and [p.name for p in self._children(folder)] == [ENTRY_MARK]:
            (folder / ENTRY_MARK).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                folder.rmdir()
                folder.parent.rmdir()  # the prefix folder, when this was its last entry

    def partial_entries(self) -> list[Path]:
        """The ``partial/`` folders of interrupted runs."""
        return [entry.record for entry in self._scan().entries if not entry.complete]

    def info(self) -> dict[str, Any]:
        """:meth:`Store.info`, with the models whose outputs are stored."""
        return {**super().info(), "models": sorted({str(e.meta.get("model", "?")) for e in self.entries()})}
