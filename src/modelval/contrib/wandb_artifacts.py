"""ECE over a tree of one project's W&B-style prediction artifacts (``modelval ece``).

Each file is read by :func:`modelval.metrics.io.read_predictions` (its rules are there).

* Folders named ``preds-<event>-lb<k>-set<j>-seed<s>-v<NNN>`` (W&B's ``name:vNNN`` download folders
  with ``:`` also accepted) give event, label budget, test set, seed and version. ECE is computed once
  per ``(event, label budget, set)``: the highest version wins, ties broken by the highest seed, then
  by path; the others are reported as skipped ("superseded").
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from modelval.atomic import replacing
from modelval.errors import DataError, DownloadError
from modelval.metrics.calibration import DEFAULT_N_BINS, Convention, reliability_bins
from modelval.metrics.io import read_predictions

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
    """``preds-kerala_floods_2018-lb25-set1-seed42-v003`` -> ArtifactKey; None if it does not match."""
    m = ARTIFACT_DIR_RE.match(name)
    if m is None:
        return None
    return ArtifactKey(
        event=m["event"],
        label_budget=int(m["label_budget"]),
        set=int(m["set"]),
        seed=int(m["seed"]),
        version=int(m["version"]),
    )


@dataclass
class EceRecord:
    """One evaluated (or skipped) file; ``to_json()`` is one element of ``modelval ece --json``."""

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
        out: dict[str, Any] = {"path": str(self.path)}
        if self.key is not None:
            out.update(
                event=self.key.event,
                label_budget=self.key.label_budget,
                set=self.key.set,
                seed=self.key.seed,
                version=self.key.version,
            )
        out.update(
            ece=self.ece,
            mce=self.mce,
            rms=self.rms,
            accuracy=self.accuracy,
            n_bins=self.n_bins,
            effective_bins=self.effective_bins,
            min_bin_count=self.min_bin_count,
            convention=self.convention,
            adaptive=self.adaptive,
            rows_used=self.rows_used,
            rows_dropped=self.rows_dropped,
            drop_reasons=dict(self.drop_reasons),
            skipped=self.skipped,
        )
        if self.intervals:
            out.update({f"{name}_ci95": interval for name, interval in self.intervals.items()})
            out["bootstrap"] = self.bootstrap
        if self.reason is not None:
            out["reason"] = self.reason
        return out


def _artifact_key_for(path: Path) -> ArtifactKey | None:
    for parent in path.parents:
        key = parse_artifact_dir(parent.name)
        if key is not None:
            return key
    return None


def discover_prediction_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand files and directory trees into a sorted list of ``.jsonl`` files."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*.jsonl") if p.is_file()))
        elif path.is_file():
            found.append(path)
        else:
            raise DataError(f"{path}: no such file or directory")
    # Keep the first occurrence of each file when paths overlap.
    seen: set[Path] = set()
    unique = []
    for p in found:
        resolved = p.resolve()
        if resolved not in seen:
            seen.add(resolved)
            unique.append(p)
    return unique


def evaluate_file(
    path: str | Path,
    *,
    n_bins: int | Literal["auto"] = DEFAULT_N_BINS,
    convention: Convention = "default",
    adaptive: bool = False,
    strict: bool = False,
    key: ArtifactKey | None = None,
    n_bootstrap: int = 0,
    seed: int = 0,
) -> EceRecord:
    """ECE, MCE and RMS of one prediction file (15 bins by default, as everywhere; seed 001 used ``n_bins=4``).

    ``n_bootstrap > 0`` adds their percentile bootstrap 95% intervals (:mod:`modelval.metrics.bootstrap`).
    ``n_bins="auto"`` uses the cube-root rule on the file's usable rows (``record.n_bins`` says how many).
    """
    data = read_predictions(path, strict=strict)
    record = EceRecord(
        path=Path(path),
        key=key,
        n_bins=n_bins,
        convention=convention,
        adaptive=adaptive,
        rows_used=data.rows_used,
        rows_dropped=data.rows_dropped,
        drop_reasons=dict(data.drop_reasons),
        skipped=data.skipped,
        reason=data.reason,
    )
    if data.skipped:
        return record
    from modelval.metrics.estimators import resolve_n_bins

    n_bins, _ = resolve_n_bins(n_bins, data.rows_used)
    record.n_bins = n_bins
    correct = (data.labels == data.preds).astype(np.float64)
    bins = reliability_bins(data.conf, correct, n_bins, adaptive=adaptive, convention=convention)
    record.ece, record.mce, record.rms = bins.ece, bins.mce, bins.rms
    record.effective_bins, record.min_bin_count = bins.effective_bins, bins.min_bin_count
    record.accuracy = float(correct.mean())
    if n_bootstrap:
        from modelval.metrics.bootstrap import bootstrap_json, calibration_intervals

        intervals = calibration_intervals(
            data.conf, correct, n_bins, adaptive=adaptive, convention=convention, n_resamples=n_bootstrap, seed=seed
        )
        record.intervals = {name: interval.as_list() for name, interval in intervals.items()}
        record.bootstrap = bootstrap_json(intervals)
    return record


def evaluate_paths(
    paths: Sequence[str | Path],
    *,
    n_bins: int | Literal["auto"] = DEFAULT_N_BINS,
    convention: Convention = "default",
    adaptive: bool = False,
    strict: bool = False,
    n_bootstrap: int = 0,
    seed: int = 0,
    per_seed: bool = False,
) -> list[EceRecord]:
    """Evaluate every prediction file under ``paths`` with the seed's de-duplication.

    Files in artifact folders are grouped by ``(event, label budget, set)``: eligible files of the
    winning folder (newest version, then highest seed, then path) are evaluated; files of the other
    folders are reported as superseded. Folders are never merged: two folders with the same key (the
    same artifact downloaded twice) are separate, the one whose path sorts first wins and the other is
    reported as its duplicate. A winning folder with more than one eligible JSONL file is ambiguous
    and all its files are skipped with that reason. Files outside artifact folders are
    evaluated one by one. Records are sorted by event, numeric label budget, set, then path.

    ``per_seed=True`` applies the same rule per (event, label budget, set, seed): each seed's newest
    usable version is evaluated, which is what :func:`summarize_seeds` needs.
    """
    files = discover_prediction_files(paths)
    options: dict[str, Any] = dict(
        n_bins=n_bins, convention=convention, adaptive=adaptive, strict=strict, n_bootstrap=n_bootstrap, seed=seed
    )
    records: list[EceRecord] = []
    groups: dict[tuple[str, int, int, int], list[tuple[ArtifactKey, Path]]] = {}
    for f in files:
        key = _artifact_key_for(f)
        if key is None:
            records.append(evaluate_file(f, **options))
        else:
            group = (key.event, key.label_budget, key.set, key.seed if per_seed else -1)
            groups.setdefault(group, []).append((key, f))
    for members in groups.values():
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
        winner: tuple[ArtifactKey, Path] | None = None
        for key, folder in ordered:
            if winner is not None:
                won_key, won_folder = winner
                if (won_key.version, won_key.seed) == (key.version, key.seed):
                    reason = f"duplicate of {won_folder} (same set, seed {key.seed}, version {key.version})"
                else:
                    reason = f"superseded by version {won_key.version} (seed {won_key.seed}) of this set"
                records.extend(
                    EceRecord(
                        path=f,
                        key=key,
                        n_bins=n_bins,
                        convention=convention,
                        adaptive=adaptive,
                        skipped=True,
                        reason=reason,
                    )
                    for f in sorted(by_folder[(key, folder)])
                )
                continue
            folder_records = [evaluate_file(f, key=key, **options) for f in sorted(by_folder[(key, folder)])]
            usable = [r for r in folder_records if not r.skipped]
            if len(usable) > 1:
                for r in usable:
                    _skip(r, f"ambiguous: {len(usable)} eligible JSONL files in the artifact folder {folder}")
            if usable:
                winner = (key, folder)
            records.extend(folder_records)
    records.sort(key=_sort_key)
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


@dataclass(frozen=True)
class SummaryTable:
    """One row per (event, label budget) with ``ece_set<j>`` columns, plus pivot means."""

    sets: list[int]
    rows: list[dict[str, Any]]
    set_means: dict[int, float]
    mean_of_sets: float


def summarize(records: Sequence[EceRecord]) -> SummaryTable:
    """Pivot evaluated artifact records (skipped and non-artifact files are left out).

    ``set_means[j]`` is the mean of ``ece_set<j>`` over the rows that have it (the Sheets pivot's
    ``AVERAGE``); ``mean_of_sets`` is the mean of those set means (the seed's calculated field).
    Each row also gets ``ece_mean``, the mean over the sets present in that row.
    """
    used = [r for r in records if not r.skipped and r.key is not None and r.ece is not None]
    sets = sorted({r.key.set for r in used})  # type: ignore[union-attr]
    table: dict[tuple[str, int], dict[str, Any]] = {}
    for r in used:
        assert r.key is not None
        row = table.setdefault(
            (r.key.event, r.key.label_budget), {"event": r.key.event, "label_budget": r.key.label_budget}
        )
        row[f"ece_set{r.key.set}"] = r.ece
    rows = [table[k] for k in sorted(table)]
    for row in rows:
        present = [row[f"ece_set{s}"] for s in sets if f"ece_set{s}" in row]
        row["ece_mean"] = float(np.mean(present))
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

    Give it the records of ``evaluate_paths(..., per_seed=True)``: one per seed. The sd of a single
    seed is undefined (``None``, with the reason in the JSON/CSV), not 0.
    """
    used = [r for r in records if not r.skipped and r.key is not None and r.ece is not None]
    seeds = sorted({r.key.seed for r in used})  # type: ignore[union-attr]
    table: dict[tuple[str, int, int], dict[str, Any]] = {}
    for r in used:
        assert r.key is not None
        row = table.setdefault(
            (r.key.event, r.key.label_budget, r.key.set),
            {"event": r.key.event, "label_budget": r.key.label_budget, "set": r.key.set},
        )
        row[f"ece_seed{r.key.seed}"] = r.ece
    rows = [table[k] for k in sorted(table)]
    for row in rows:
        values = [row[f"ece_seed{s}"] for s in seeds if f"ece_seed{s}" in row]
        row["n_seeds"] = len(values)
        row["ece_mean"] = float(np.mean(values))
        row["ece_sd"] = float(np.std(values, ddof=1)) if len(values) > 1 else None
    return SeedSummary(seeds, rows)


def write_seed_summary_csv(summary: SeedSummary, path: str | Path) -> Path:
    """CSV: one row per (event, label budget, set): ``n_seeds``, ``ece_mean``, ``ece_sd``, then ``ece_seed<s>``.

    An empty ``ece_sd`` means a single seed (sd undefined); an empty ``ece_seed<s>`` means no such seed.
    """
    path = Path(path)
    per_seed = [f"ece_seed{s}" for s in summary.seeds]
    columns = ["event", "label_budget", "set", "n_seeds", "ece_mean", "ece_sd", *per_seed]
    with replacing(path, newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, restval="")
        writer.writeheader()
        for row in summary.rows:
            writer.writerow({k: "" if row.get(k) is None else row.get(k, "") for k in columns})
    return path


def write_summary_csv(summary: SummaryTable, path: str | Path) -> Path:
    """CSV: one row per (event, label budget), a column per set and ``ece_mean``; then a ``mean`` row.

    With no (event, label budget) rows (no file named ``preds-<event>-lb<k>-set<j>-...``) there is nothing to
    average: only the header is written, never a ``mean`` row of NaN.
    """
    path = Path(path)
    columns = ["event", "label_budget", *[f"ece_set{s}" for s in summary.sets], "ece_mean"]
    with replacing(path, newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, restval="")
        writer.writeheader()
        for row in summary.rows:
            writer.writerow({k: row.get(k, "") for k in columns})
        if not summary.rows:
            return path
        mean_row: dict[str, object] = {"event": "mean", "label_budget": ""}
        mean_row.update({f"ece_set{s}": summary.set_means[s] for s in summary.sets})
        mean_row["ece_mean"] = summary.mean_of_sets
        writer.writerow(mean_row)
    return path


def download_wandb_predictions(
    runs: Iterable[Any] | str,
    root: str | Path,
    *,
    api: Any = None,
    prefix: str = "preds",
    offline: bool | None = None,
) -> list[Path]:
    """Download a run's logged artifacts whose name starts with ``prefix`` into ``root``.

    ``runs`` is a run path ``"entity/project/run_id"``, or run objects (anything with
    ``logged_artifacts()``). Each artifact ``preds-...:vN`` lands in ``root/preds-...-vNNN`` (version
    zero-padded to 3 digits); an existing folder is never overwritten. ``api`` defaults to
    ``wandb.Api()``; tests inject a fake. Returns the folders written in this call. Offline
    (``$MODELVAL_OFFLINE`` or ``$HF_HUB_OFFLINE`` set, or ``offline=True``) nothing is downloaded.
    """
    from modelval.download import resolve_offline

    if resolve_offline(offline):
        raise DownloadError(f"this run is offline (MODELVAL_OFFLINE or HF_HUB_OFFLINE): not downloading {runs!r}")
    if api is None:
        from modelval.extras import require

        wandb = require("wandb", extra="wandb", purpose="downloading from Weights & Biases")
        api = wandb.Api()
    selected: Iterable[Any] = [api.run(runs)] if isinstance(runs, str) else runs
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    written = []
    for run in selected:
        for artifact in run.logged_artifacts():
            name, _, version = str(artifact.name).partition(":")
            if not name.startswith(prefix):
                continue
            version = version or str(getattr(artifact, "version", "v0"))
            number = int(version.lstrip("v")) if version.lstrip("v").isdigit() else 0
            target = root / f"{name}-v{number:03d}"
            if target.exists():
                continue
            artifact.download(root=str(target))
            written.append(target)
    return written
