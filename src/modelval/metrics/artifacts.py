"""The top-1 ECE of every prediction JSONL file under some paths, and of W&B-style artifact folders
(``modelval calibration ece``).

Each file is read by :func:`modelval.metrics.io.read_predictions` (its rules are there). Folders named
``preds-<event>-lb<k>-set<j>-seed<s>-v<NNN>`` (W&B's ``name:vNNN`` download folders, ``:`` also accepted) give
event, label budget, test set, seed and version; ECE is computed once per ``(event, label budget, set)``: the
highest version wins, ties broken by the highest seed, then by path; the others are reported as skipped
("superseded"). Downloading such folders from a W&B run is :mod:`modelval.contrib.wandb_artifacts`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from modelval import jsonio
from modelval.atomic import replacing
from modelval.csvio import csv_dict_rows, csv_writer
from modelval.errors import DataError, InputValidationError
from modelval.metrics.calibration import CONVENTIONS, DEFAULT_N_BINS, Convention
from modelval.metrics.io import read_predictions
from modelval.metrics.predictions import JSONReport, file_calibration
from modelval.metrics.validation import check_choice, check_count, check_n_bins

ARTIFACT_DIR_RE = re.compile(
    r"^preds-(?P<event>.+)-lb(?P<label_budget>\d+)-set(?P<set>\d+)-seed(?P<seed>\d+)[-:]v(?P<version>\d+)$"
)


@dataclass(frozen=True)
class ArtifactKey:
    event: str
    label_budget: int
    set: int
    seed: int
    version: int


def parse_artifact_dir(name: str) -> ArtifactKey | None:
    """``preds-kerala_floods_2018-lb25-set1-seed42-v003`` -> ArtifactKey; None if it does not match.

    Parameters
    ----------
    name
        A folder's name.
    """
    m = ARTIFACT_DIR_RE.match(name)
    if m is None:
        return None
    return ArtifactKey(m["event"], *(int(m[key]) for key in ("label_budget", "set", "seed", "version")))


@dataclass
class EceRecord:
    """One evaluated (or skipped) file; ``to_json()`` is one element of ``modelval calibration ece --json``."""

    path: Path
    key: ArtifactKey | None = None
    ece: float | None = None
    mce: float | None = None
    rms: float | None = None
    accuracy: float | None = None
    n_bins: int | str = DEFAULT_N_BINS  # "auto" only on a skipped record (no rows to count)
    effective_bins: int | None = None
    min_bin_count: int | None = None
    convention: str = "default"
    adaptive: bool = False
    rows_used: int = 0
    rows_dropped: int = 0
    drop_reasons: dict[str, int] = field(default_factory=dict)
    skipped: bool = False
    reason: str | None = None
    #: Bootstrap 95% intervals (``ece``, ``mce``, ``rms``, ``accuracy`` -> [low, high]); empty when off.
    intervals: dict[str, list[float]] = field(default_factory=dict)
    bootstrap: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The record as the command's ``--json`` prints it."""
        out: dict[str, Any] = {"path": str(self.path), **(vars(self.key) if self.key is not None else {})}
        names = ("ece", "mce", "rms", "accuracy", "n_bins", "effective_bins", "min_bin_count", "convention",
                 "adaptive", "rows_used", "rows_dropped", "drop_reasons", "skipped")  # fmt: skip
        out.update({name: getattr(self, name) for name in names}, drop_reasons=dict(self.drop_reasons))
        if self.intervals:
            out.update({f"{name}_ci95": interval for name, interval in self.intervals.items()})
            out["bootstrap"] = self.bootstrap
        if self.reason is not None:
            out["reason"] = self.reason
        return out


def discover_prediction_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand files and directory trees into a sorted list of ``.jsonl`` files, each once.

    Parameters
    ----------
    paths
        Files and folders (searched for ``*.jsonl``).
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*.jsonl") if p.is_file()))
        elif path.is_file():
            found.append(path)
        else:
            raise DataError(f"{path}: no such file or directory")
    unique: dict[Path, Path] = {}
    for p in found:
        unique.setdefault(p.resolve(), p)  # the first occurrence of each file when paths overlap
    return list(unique.values())


def evaluate_file(path: str | Path, *, n_bins: int | Literal["auto"] = DEFAULT_N_BINS,
                  convention: Convention = "default", adaptive: bool = False, strict: bool = False,
                  key: ArtifactKey | None = None, n_bootstrap: int = 0, seed: int = 0) -> EceRecord:  # fmt: skip
    """ECE, MCE and RMS of one prediction file (15 bins by default, as everywhere; seed 001 used ``n_bins=4``).

    Parameters
    ----------
    path
        The prediction file.
    n_bins, convention, adaptive, strict
        As :func:`ece_of_artifacts`; ``"auto"`` bins use the cube-root rule on the usable rows.
    key
        The artifact folder's key, recorded with the numbers.
    n_bootstrap, seed
        Resamples of the percentile bootstrap 95% intervals (0: none) and their seed.
    """
    data = read_predictions(path, strict=strict)
    record = EceRecord(
        Path(path), key, n_bins=n_bins, convention=convention, adaptive=adaptive, rows_used=data.rows_used,
        rows_dropped=data.rows_dropped, drop_reasons=dict(data.drop_reasons), skipped=data.skipped, reason=data.reason,
    )  # fmt: skip
    if data.skipped:
        return record
    bins, intervals = file_calibration(
        data, n_bins, adaptive=adaptive, convention=convention, n_bootstrap=n_bootstrap, seed=seed
    )
    record.n_bins = bins.n_bins
    record.ece, record.mce, record.rms = bins.ece, bins.mce, bins.rms
    record.effective_bins, record.min_bin_count = bins.effective_bins, bins.min_bin_count
    record.accuracy = float(np.mean(data.labels == data.preds))
    if intervals:
        from modelval.metrics.bootstrap import bootstrap_json

        record.intervals = {name: interval.as_list() for name, interval in intervals.items()}
        record.bootstrap = bootstrap_json(intervals)
    return record


def evaluate_paths(paths: Sequence[str | Path], *, n_bins: int | Literal["auto"] = DEFAULT_N_BINS,
                   convention: Convention = "default", adaptive: bool = False, strict: bool = False,
                   n_bootstrap: int = 0, seed: int = 0, per_seed: bool = False) -> list[EceRecord]:  # fmt: skip
    """Evaluate every prediction file under ``paths``, de-duplicating artifact folders (see the module docstring).

    Folders are never merged: the same artifact downloaded twice is two folders, the one whose path sorts first
    wins and the other is reported as its duplicate. A winning folder with more than one eligible JSONL file is
    ambiguous, and all its files are skipped with that reason. Records are sorted by event, numeric label budget,
    set, then path.

    Parameters
    ----------
    paths
        Files and folders.
    n_bins, convention, adaptive, strict, n_bootstrap, seed
        As :func:`evaluate_file`.
    per_seed
        Apply the rule per (event, label budget, set, seed), as :func:`summarize_seeds` needs.
    """
    options: dict[str, Any] = dict(
        n_bins=n_bins, convention=convention, adaptive=adaptive, strict=strict, n_bootstrap=n_bootstrap, seed=seed
    )
    records: list[EceRecord] = []
    groups: dict[tuple[str, int, int, int], list[tuple[ArtifactKey, Path]]] = {}
    for f in discover_prediction_files(paths):
        key = next(filter(None, (parse_artifact_dir(parent.name) for parent in f.parents)), None)
        if key is None:
            records.append(evaluate_file(f, **options))
        else:
            group = (key.event, key.label_budget, key.set, key.seed if per_seed else -1)
            groups.setdefault(group, []).append((key, f))
    for members in groups.values():
        records += _evaluate_group(members, options)
    records.sort(key=_sort_key)
    return records


def _evaluate_group(members: list[tuple[ArtifactKey, Path]], options: dict[str, Any]) -> list[EceRecord]:
    """The records of one (event, label budget, set): the winning folder's files evaluated, the others skipped."""
    # Evaluate folders from newest to oldest; the first folder with an eligible file wins, so an
    # unusable newest version (no conf) does not hide an older usable one.
    # Group by folder, not by parsed key: the same artifact downloaded twice ("...-seed1-v003" and
    # "...-seed1:v003", or under two roots) parses to one key but is two folders.
    by_folder: dict[tuple[ArtifactKey, Path], list[Path]] = {}
    for key, f in members:
        by_folder.setdefault((key, f.parent), []).append(f)
    # Newest version, then highest seed; between copies of the same version and seed, the folder
    # whose path sorts first wins (deterministic), and the others are reported as duplicates.
    ordered = sorted(by_folder, key=lambda kf: (-kf[0].version, -kf[0].seed, str(kf[1])))
    records: list[EceRecord] = []
    winner: tuple[ArtifactKey, Path] | None = None
    for key, folder in ordered:
        files = sorted(by_folder[(key, folder)])
        if winner is not None:
            won_key, won_folder = winner
            if (won_key.version, won_key.seed) == (key.version, key.seed):
                reason = f"duplicate of {won_folder} (same set, seed {key.seed}, version {key.version})"
            else:
                reason = f"superseded by version {won_key.version} (seed {won_key.seed}) of this set"
            settings = {name: options[name] for name in ("n_bins", "convention", "adaptive")}
            records += [EceRecord(f, key, **settings, skipped=True, reason=reason) for f in files]
            continue
        folder_records = [evaluate_file(f, key=key, **options) for f in files]
        usable = [r for r in folder_records if not r.skipped]
        if len(usable) > 1:
            for r in usable:
                _skip(r, f"ambiguous: {len(usable)} eligible JSONL files in the artifact folder {folder}")
        if usable:
            winner = (key, folder)
        records += folder_records
    return records


def _skip(record: EceRecord, reason: str) -> None:
    record.skipped, record.reason = True, reason
    record.ece = record.mce = record.rms = record.accuracy = None
    record.effective_bins = record.min_bin_count = None
    record.intervals, record.bootstrap = {}, None


def _sort_key(r: EceRecord) -> tuple[Any, ...]:
    if r.key is None:
        return (1, "", 0, 0, str(r.path))
    return (0, r.key.event, r.key.label_budget, r.key.set, -r.key.version, str(r.path))


def _pivot(records: Sequence[EceRecord], row_of: Sequence[str], column: str) -> tuple[list[int], list[dict[str, Any]]]:
    """The evaluated artifact records as rows keyed by the ``row_of`` fields, one ``ece_<column><j>`` per ``j``."""
    used = [r for r in records if not r.skipped and r.key is not None and r.ece is not None]
    columns = sorted({getattr(r.key, column) for r in used})
    table: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in used:
        assert r.key is not None
        row = table.setdefault(tuple(getattr(r.key, name) for name in row_of),
                               {name: getattr(r.key, name) for name in row_of})  # fmt: skip
        row[f"ece_{column}{getattr(r.key, column)}"] = r.ece
    return columns, [table[k] for k in sorted(table)]


@dataclass(frozen=True)
class SummaryTable:
    """One row per (event, label budget) with ``ece_set<j>`` columns, plus pivot means."""

    sets: list[int]
    rows: list[dict[str, Any]]
    set_means: dict[int, float]
    mean_of_sets: float


def summarize(records: Sequence[EceRecord]) -> SummaryTable:
    """Pivot the evaluated artifact records (skipped and non-artifact files are left out).

    ``set_means[j]`` is the mean of ``ece_set<j>`` over the rows that have it (the Sheets pivot's ``AVERAGE``),
    ``mean_of_sets`` the mean of those (the seed's calculated field), each row's ``ece_mean`` the mean over its sets.

    Parameters
    ----------
    records
        The records of :func:`evaluate_paths`.
    """
    sets, rows = _pivot(records, ("event", "label_budget"), "set")
    for row in rows:
        row["ece_mean"] = float(np.mean([row[f"ece_set{s}"] for s in sets if f"ece_set{s}" in row]))
    set_means = {s: float(np.mean([row[f"ece_set{s}"] for row in rows if f"ece_set{s}" in row])) for s in sets}
    mean_of_sets = float(np.mean(list(set_means.values()))) if set_means else math.nan
    return SummaryTable(sets, rows, set_means, mean_of_sets)


@dataclass(frozen=True)
class SeedSummary:
    """ECE over seeds for each (event, label budget, set): mean, sample sd and the per-seed values."""

    seeds: list[int]
    rows: list[dict[str, Any]]


def summarize_seeds(records: Sequence[EceRecord]) -> SeedSummary:
    """Mean and sd (``ddof=1``) of ECE over the seeds of each (event, label budget, set).

    The sd of a single seed is undefined (``None``, with the reason in the JSON/CSV), not 0.

    Parameters
    ----------
    records
        The records of ``evaluate_paths(..., per_seed=True)``: one per seed.
    """
    seeds, rows = _pivot(records, ("event", "label_budget", "set"), "seed")
    for row in rows:
        values = [row[f"ece_seed{s}"] for s in seeds if f"ece_seed{s}" in row]
        row["n_seeds"] = len(values)
        row["ece_mean"] = float(np.mean(values))
        row["ece_sd"] = float(np.std(values, ddof=1)) if len(values) > 1 else None
    return SeedSummary(seeds, rows)


def _write_csv(path: str | Path, columns: list[str], rows: Iterable[dict[str, Any]]) -> Path:
    path = Path(path)
    with replacing(path, newline="") as handle:
        writer = csv_writer(handle)
        writer.writerow(columns)
        writer.writerows(["" if cell is None else cell for cell in row] for row in csv_dict_rows(columns, rows))
    return path


def write_seed_summary_csv(summary: SeedSummary, path: str | Path) -> Path:
    """CSV: one row per (event, label budget, set): ``n_seeds``, ``ece_mean``, ``ece_sd``, then ``ece_seed<s>``.

    An empty ``ece_sd`` means a single seed (sd undefined); an empty ``ece_seed<s>`` means no such seed.

    Parameters
    ----------
    summary, path
        The summary and the file written.
    """
    per_seed = [f"ece_seed{s}" for s in summary.seeds]
    return _write_csv(path, ["event", "label_budget", "set", "n_seeds", "ece_mean", "ece_sd", *per_seed], summary.rows)


def write_summary_csv(summary: SummaryTable, path: str | Path) -> Path:
    """CSV: one row per (event, label budget), a column per set and ``ece_mean``; then a ``mean`` row.

    With no (event, label budget) rows (no file named ``preds-<event>-lb<k>-set<j>-...``) there is nothing to
    average: only the header is written, never a ``mean`` row of NaN.

    Parameters
    ----------
    summary, path
        The summary and the file written.
    """
    sets = [f"ece_set{s}" for s in summary.sets]
    means = {"event": "mean", **dict(zip(sets, summary.set_means.values(), strict=True))}
    rows = [*summary.rows, {**means, "ece_mean": summary.mean_of_sets}] if summary.rows else []
    return _write_csv(path, ["event", "label_budget", *sets, "ece_mean"], rows)


@dataclass
class ECEReport(JSONReport):
    """The top-1 ECE/MCE/RMS of every prediction file under some paths (:func:`ece_of_artifacts`).

    ``records`` has one :class:`EceRecord` per file found, evaluated or skipped (with the reason), sorted by
    event, label budget, set and path.
    """

    records: list[EceRecord]
    n_bins: int | str
    convention: str
    adaptive: bool
    bootstrap: int
    seed: int
    #: Whether each seed's newest version was evaluated (``seed_summary``), not only each set's winner.
    per_seed: bool = False

    @property
    def evaluated(self) -> list[EceRecord]:
        return [r for r in self.records if not r.skipped]

    @property
    def skipped(self) -> list[EceRecord]:
        return [r for r in self.records if r.skipped]

    @property
    def summary(self) -> SummaryTable:
        """The (event, label budget) x set table of the artifact files, with the mean ECE per set."""
        return summarize(self.records)

    @property
    def seed_summary(self) -> SeedSummary:
        """ECE mean and sd over the seeds of each (event, label budget, set); needs ``per_seed=True``."""
        if not self.per_seed:
            # Without per_seed only each set's winning seed was evaluated: an sd over one seed per set is no sd.
            raise InputValidationError(
                "seed_summary needs every seed's newest version: call ece_of_artifacts(..., per_seed=True)"
            )
        return summarize_seeds(self.records)

    @property
    def fewer_bins(self) -> list[EceRecord]:
        """The evaluated files with fewer non-empty bins than requested (adaptive ties, empty uniform bins)."""
        return [r for r in self.records if r.effective_bins is not None and r.effective_bins < int(r.n_bins)]

    def to_list(self) -> list[dict[str, Any]]:
        """The command's ``--json`` document: one object per file."""
        return [r.to_json() for r in self.records]

    def to_dict(self) -> dict[str, Any]:
        """``files`` (the command's ``--json`` list) and ``summary``: the mean ECE per set, as the table prints it."""
        summary = self.summary
        means: Any = summary.mean_of_sets if summary.rows else jsonio.Undefined("no evaluated artifact files")
        set_means = {str(s): v for s, v in summary.set_means.items()}
        return {
            "files": self.to_list(),
            "summary": {"sets": summary.sets, "rows": summary.rows, "set_means": set_means, "mean_of_sets": means},
        }

    def to_json(self, indent: int | None = 2) -> str:
        """Strict JSON text of :meth:`to_list`: exactly what ``modelval calibration ece --json`` prints.

        Parameters
        ----------
        indent
            Spaces per level; ``None``: one line.
        """
        return jsonio.dumps(self.to_list(), indent=indent)


def ece_of_artifacts(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    n_bins: int | Literal["auto"] = 15,
    convention: Convention = "default",
    adaptive: bool = False,
    strict: bool = False,
    bootstrap: int = 1000,
    seed: int = 0,
    per_seed: bool = False,
) -> ECEReport:
    """Top-1 expected and maximum calibration error of prediction JSONL files (``modelval calibration ece``).

    Each file's rows ``{label, pred, conf}`` give the top-1 confidence and whether the prediction was right. The
    estimand is the binned top-1 ECE of Guo et al. (2017, eq. 3), with MCE, RMS and the accuracy beside it, over
    the bins of :func:`modelval.metrics.calibration.reliability_bins`; the intervals are seeded percentile bootstrap
    95% intervals over predictions (:mod:`modelval.metrics.bootstrap`), the bin edges held fixed. Artifact folders
    are de-duplicated as the module docstring says, the others reported as skipped with the reason; a file without
    ``conf`` is skipped, never repaired.

    Parameters
    ----------
    paths
        A prediction file or a folder searched for ``*.jsonl``, or a list of those.
    n_bins
        Confidence bins, or ``"auto"`` for the cube-root rule ``ceil(n^(1/3))`` on each file's usable rows.
    convention
        ``"default"`` (``(lo, hi]`` bins) or ``"torchmetrics"`` (torchmetrics 1.x's binning).
    adaptive
        Equal-mass (quantile) bins instead of uniform ones; ties are never split (see ``effective_bins``).
    strict
        A malformed row is an error (:class:`~modelval.errors.DataError`) instead of being dropped and counted.
    bootstrap
        Bootstrap resamples of the 95% intervals of ECE, MCE, RMS and accuracy; 0 turns them off.
    seed
        Seed of the bootstrap.
    per_seed
        Evaluate each seed's newest version of each set, not only the winning seed (for ``seed_summary``).

    Returns
    -------
    ECEReport
        One record per file (``records``), the per-set table (``summary``); ``to_json()`` is the command's
        ``--json``.

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> from modelval.api import ece_of_artifacts
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = Path(tmp.name) / "preds-flood-lb25-set1-seed42-v002"
    >>> folder.mkdir()
    >>> conf = [0.0, 0.25, 0.5, 0.5, 0.75, 1.0, 1.0, 0.6, 0.9, 0.3]
    >>> right = [0, 1, 0, 1, 1, 1, 0, 1, 1, 0]
    >>> rows = [{"label": 1, "pred": 1 if r else 0, "conf": c} for c, r in zip(conf, right)]
    >>> _ = (folder / "preds.jsonl").write_text("".join(json.dumps(row) + "\\n" for row in rows))
    >>> report = ece_of_artifacts(folder.parent, n_bins=4, bootstrap=0)
    >>> (record,) = report.records
    >>> record.key.event, record.key.set, round(record.ece, 4), round(record.mce, 4), record.rows_used
    ('flood', 1, 0.26, 0.375, 10)
    >>> tmp.cleanup()
    """
    check_n_bins(n_bins, auto=True)
    check_count(bootstrap, "bootstrap", minimum=0, expected="is a number of resamples, 0 (no intervals) or more")
    check_choice(convention, "convention", CONVENTIONS)
    given = [Path(paths)] if isinstance(paths, str | os.PathLike) else [Path(path) for path in paths]
    if not given:
        raise InputValidationError("no paths given: name a prediction file or a folder of them")
    records = evaluate_paths(
        given, n_bins=n_bins, convention=convention, adaptive=adaptive, strict=strict, n_bootstrap=bootstrap,
        seed=seed, per_seed=per_seed,
    )  # fmt: skip
    return ECEReport(records, n_bins, convention, adaptive, bootstrap, seed, per_seed)
