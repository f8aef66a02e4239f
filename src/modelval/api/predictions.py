"""Questions about a file of predictions: how calibrated it is (``ece_of_artifacts``, ``reliability``), what a
post-hoc calibrator fitted on held-out logits does to it (``recalibrate``), and how accurate it is, class by
class (``prediction_metrics``), as ``modelval ece``, ``reliability``, ``temperature`` and ``metrics`` compute
them.

Prediction files are JSONL rows ``{"label": int, "pred": int, "conf": float}`` (read by
:func:`modelval.metrics.io.read_predictions`, whose rules decide which rows are dropped); logits files are
``.npz`` with arrays ``logits`` (N, C) and ``labels`` (N,), or ``.pt`` with a dict of those tensors.

Every function runs exactly what its command runs, so a notebook and ``modelval <command> --json`` give the
same numbers. Results have ``.to_json()``, the strict JSON text the command's ``--json`` prints, and
``.to_dict()``, that JSON object (``ece`` prints a list, one object per file: :meth:`ECEReport.to_list`; its
``to_dict()`` adds the per-set means the table prints).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np

from modelval import jsonio
from modelval.api.recording import JSONResult
from modelval.errors import DataError, InputValidationError

if TYPE_CHECKING:
    from modelval.contrib.wandb_artifacts import EceRecord, SeedSummary, SummaryTable
    from modelval.metrics.bootstrap import BootstrapInterval
    from modelval.metrics.calibration import Convention, ReliabilityBins
    from modelval.metrics.io import PredictionFile
    from modelval.metrics.temperature import TemperatureSweepPoint

PathLike = str | os.PathLike[str]
#: Logits given as a file (``.npz`` / ``.pt``) or in memory as ``(logits, labels)``.
LogitsSource = PathLike | tuple[Any, Any]
#: One number per class given as a JSON file (a list or a ``{"0": value}`` dict) or in memory.
PerClass = PathLike | Sequence[float] | np.ndarray

#: Without ``num_classes``, the class count comes from the data; past this it is more likely a broken label than
#: a real head (the confusion matrix alone would need K^2 x 8 bytes: 80 GB at 100,000).
MAX_DERIVED_CLASSES = 30_000
#: The methods of :func:`recalibrate`: logit scalings, then top-label calibrators of the top-1 confidence.
SCALINGS = ("temperature", "vector", "matrix")
TOP_LABEL_CALIBRATORS = ("histogram", "isotonic")
METHODS = SCALINGS + TOP_LABEL_CALIBRATORS


# --- settings checked where Python callers pass them (the command line checks them in argparse first) --------


def _check_bins(n_bins: Any, *, auto: bool = True) -> None:
    if auto and n_bins == "auto":
        return
    if isinstance(n_bins, bool) or not isinstance(n_bins, int | np.integer) or n_bins < 1:
        allowed = "a positive integer or 'auto'" if auto else "a positive integer"
        raise InputValidationError(f"n_bins must be {allowed}, got {n_bins!r}")


def _check_bootstrap(bootstrap: Any) -> None:
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, int | np.integer) or bootstrap < 0:
        raise InputValidationError(f"bootstrap is a number of resamples, 0 (no intervals) or more; got {bootstrap!r}")


def _check_convention(convention: str) -> None:
    from modelval.metrics.calibration import CONVENTIONS

    if convention not in CONVENTIONS:
        raise InputValidationError(f"convention must be one of {CONVENTIONS}, got {convention!r}")


# --- ece_of_artifacts: modelval ece ---------------------------------------------------------------------------


@dataclass
class ECEReport(JSONResult):
    """The top-1 ECE/MCE/RMS of every prediction file under some paths (``modelval ece``).

    ``records`` has one :class:`~modelval.contrib.wandb_artifacts.EceRecord` per file found, evaluated or
    skipped (with the reason), sorted by event, label budget, set and path.
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
        from modelval.contrib.wandb_artifacts import summarize

        return summarize(self.records)

    @property
    def seed_summary(self) -> SeedSummary:
        """ECE mean and sd over the seeds of each (event, label budget, set); needs ``per_seed=True``."""
        from modelval.contrib.wandb_artifacts import summarize_seeds

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
        return {
            "files": self.to_list(),
            "summary": {
                "sets": summary.sets,
                "rows": summary.rows,
                "set_means": {str(s): v for s, v in summary.set_means.items()},
                "mean_of_sets": means,
            },
        }

    def to_json(self, indent: int | None = 2) -> str:
        """Strict JSON text of :meth:`to_list`: exactly what ``modelval ece --json`` prints."""
        return jsonio.dumps(self.to_list(), indent=indent)


def ece_of_artifacts(
    paths: PathLike | Sequence[PathLike],
    *,
    n_bins: int | Literal["auto"] = 15,
    convention: Convention = "default",
    adaptive: bool = False,
    strict: bool = False,
    bootstrap: int = 1000,
    seed: int = 0,
    per_seed: bool = False,
) -> ECEReport:
    """Top-1 expected and maximum calibration error of prediction JSONL files (``modelval ece``).

    Each file's rows ``{label, pred, conf}`` give the top-1 confidence ``conf`` and whether the prediction was
    right (``label == pred``). The estimand is the binned top-1 ECE of Guo et al. (2017, eq. 3),
    ``sum_m |B_m| / N * |acc(B_m) - conf(B_m)|``, with MCE (the largest bin gap), RMS and the accuracy beside
    it. The bins are those of :func:`modelval.metrics.calibration.reliability_bins`: ``n_bins`` uniform bins
    ``(lo, hi]`` with a confidence of 0 in the first (``convention="default"``), torchmetrics' ``[lo, hi)``
    bins with its hidden ``[1, 1]`` bin (``"torchmetrics"``), or equal-mass bins (``adaptive``). Intervals are
    seeded percentile bootstrap 95% intervals whose unit is the prediction (rows resampled with replacement,
    drawn as multinomial cell counts: :mod:`modelval.metrics.bootstrap`), with the bin edges held fixed.

    Folders named ``preds-<event>-lb<k>-set<j>-seed<s>-vNNN`` (W&B artifact downloads; see
    :mod:`modelval.contrib.wandb_artifacts`) are de-duplicated: one file per (event, label budget, set), the
    newest version, then the highest seed; the others are reported as skipped with the reason. A file without
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
    >>> from modelval.api.predictions import ece_of_artifacts
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
    from modelval.contrib.wandb_artifacts import evaluate_paths

    _check_bins(n_bins)
    _check_bootstrap(bootstrap)
    _check_convention(convention)
    given = [Path(paths)] if isinstance(paths, str | os.PathLike) else [Path(path) for path in paths]
    if not given:
        raise InputValidationError("no paths given: name a prediction file or a folder of them")
    records = evaluate_paths(
        given,
        n_bins=n_bins,
        convention=convention,
        adaptive=adaptive,
        strict=strict,
        n_bootstrap=bootstrap,
        seed=seed,
        per_seed=per_seed,
    )
    return ECEReport(records, n_bins, convention, adaptive, bootstrap, seed, per_seed)


# --- reliability: modelval reliability ------------------------------------------------------------------------


@dataclass
class ReliabilityReport(JSONResult):
    """The reliability bins of one prediction file, its ECE/MCE/RMS and the figures written
    (``modelval reliability``)."""

    path: Path
    bins: ReliabilityBins
    rows_used: int
    rows_dropped: int
    #: Bootstrap 95% intervals of ``ece``, ``mce``, ``rms`` and ``accuracy``; ``None`` with ``bootstrap=0``.
    intervals: dict[str, BootstrapInterval] | None = None
    #: The diagram named by ``figure`` (else the one in ``report_dir``): the JSON's ``out``.
    figure: Path | None = None
    #: Every file written: the diagrams, then ``report_dir/reliability.json``.
    written: list[Path] = field(default_factory=list)

    @property
    def ece(self) -> float:
        return self.bins.ece

    @property
    def mce(self) -> float:
        return self.bins.mce

    def record(self) -> dict[str, Any]:
        """The result without ``written``: what ``report_dir/reliability.json`` holds."""
        from modelval.metrics.bootstrap import bootstrap_json, intervals_json

        result: dict[str, Any] = {
            "path": str(self.path),
            "out": None if self.figure is None else str(self.figure),
            **self.bins.summary(),
        }
        if self.intervals:
            result.update(intervals_json(self.intervals))
            result["bootstrap"] = bootstrap_json(self.intervals)
        result.update(rows_used=self.rows_used, rows_dropped=self.rows_dropped, bins=self.bins.as_records())
        return result

    def to_dict(self) -> dict[str, Any]:
        return {**self.record(), "written": [str(path) for path in self.written]}


def reliability(
    path: PathLike,
    *,
    n_bins: int | Literal["auto"] = 15,
    convention: Convention = "default",
    adaptive: bool = False,
    strict: bool = False,
    bootstrap: int = 1000,
    seed: int = 0,
    stratify: bool = False,
    figure: PathLike | None = None,
    report_dir: PathLike | None = None,
) -> ReliabilityReport:
    """The reliability diagram of one prediction JSONL file and its calibration error (``modelval reliability``).

    Computes, per confidence bin, the number of predictions, their accuracy (with its Wilson 95% interval)
    and mean top-1 confidence, and from those the binned top-1 ECE of Guo et al. (2017, eq. 3), MCE and
    RMS. Bins are those of :func:`modelval.metrics.calibration.reliability_bins` (``n_bins`` uniform
    ``(lo, hi]`` bins with confidence 0 in the first, torchmetrics' convention, or equal-mass bins whose
    ties stay in one bin and whose empty bins are dropped). The ECE interval is a seeded percentile
    bootstrap over predictions (``stratify``: within each true class), with the bin edges held fixed.

    With ``figure`` the diagram is drawn there (:func:`modelval.figures.plot_reliability`);
    with ``report_dir`` the diagram ``<file stem>-reliability.png`` and ``reliability.json`` (this result)
    are written into that folder. Without either nothing is written.

    Parameters
    ----------
    path
        The prediction file (JSONL rows ``{label, pred, conf}``).
    n_bins
        Confidence bins, or ``"auto"`` for ``ceil(n^(1/3))`` with ``n`` the usable rows.
    convention
        ``"default"`` or ``"torchmetrics"`` (see :mod:`modelval.metrics.calibration`).
    adaptive
        Equal-mass (quantile) bins instead of uniform ones.
    strict
        A malformed row is an error instead of being dropped and counted.
    bootstrap
        Bootstrap resamples of the 95% intervals of ECE, MCE, RMS and accuracy; 0 turns them off.
    seed
        Seed of the bootstrap.
    stratify
        Resample within each true class (class counts stay fixed).
    figure
        Where to draw the diagram; the suffix picks the format (``.png``, ``.pdf``, ``.svg``).
    report_dir
        A folder for the diagram and ``reliability.json`` (created if missing).

    Returns
    -------
    ReliabilityReport
        ``bins`` (:class:`~modelval.metrics.calibration.ReliabilityBins`), ``ece``, ``mce``, the intervals and
        the files written; ``to_dict()`` is the command's ``--json``.

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> from modelval.api.predictions import reliability
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = Path(tmp.name)
    >>> conf = [0.0, 0.25, 0.5, 0.5, 0.75, 1.0, 1.0, 0.6, 0.9, 0.3]
    >>> right = [0, 1, 0, 1, 1, 1, 0, 1, 1, 0]
    >>> rows = [{"label": 1, "pred": 1 if r else 0, "conf": c} for c, r in zip(conf, right)]
    >>> _ = (folder / "preds.jsonl").write_text("".join(json.dumps(row) + "\\n" for row in rows))
    >>> report = reliability(folder / "preds.jsonl", n_bins=4, bootstrap=0)
    >>> round(report.ece, 4), round(report.mce, 4), report.bins.counts.tolist()
    (0.26, 0.375, [2, 3, 2, 3])
    >>> report.to_dict()["bins"][0]["accuracy"], report.written
    (0.5, [])
    >>> tmp.cleanup()
    """
    from modelval.atomic import write_text
    from modelval.metrics.calibration import reliability_bins
    from modelval.metrics.estimators import resolve_n_bins
    from modelval.metrics.io import read_predictions

    _check_bins(n_bins)
    _check_bootstrap(bootstrap)
    _check_convention(convention)
    path = Path(path)
    data = read_predictions(path, strict=strict)
    if data.skipped:  # no rows with a valid conf (or no conf key at all): nothing to bin
        raise DataError(f"{path}: cannot draw a reliability diagram: {data.reason}")
    bins_used, _ = resolve_n_bins(n_bins, data.rows_used)
    correct = data.labels == data.preds
    bins = reliability_bins(data.conf, correct, bins_used, adaptive=adaptive, convention=convention)
    intervals = None
    if bootstrap:
        from modelval.metrics.bootstrap import calibration_intervals

        intervals = calibration_intervals(
            data.conf, correct, bins_used, labels=data.labels, adaptive=adaptive, convention=convention,
            n_resamples=bootstrap, seed=seed, stratify=stratify,
        )  # fmt: skip
    report = ReliabilityReport(path, bins, data.rows_used, data.rows_dropped, intervals)
    folder = None if report_dir is None else Path(report_dir)
    targets = [] if figure is None else [Path(figure)]
    if folder is not None:
        targets.append(folder / f"{path.stem}-reliability.png")
    if targets:
        from modelval.figures.calibration import DPI, plot_reliability
        from modelval.figures.style import save

        ece_interval = intervals["ece"].as_list() if intervals else None
        title = f"Reliability: {path.name}"
        for target in targets:
            report.written += save(plot_reliability(bins, title=title, ece_interval=ece_interval), target, dpi=DPI)
        report.figure = report.written[0]
    if folder is not None:
        report.written.append(write_text(folder / "reliability.json", jsonio.dumps(report.record(), indent=2) + "\n"))
    return report


# --- recalibrate: modelval temperature ------------------------------------------------------------------------


@dataclass
class RecalibrationReport(JSONResult):
    """A post-hoc calibrator fitted on validation logits and its NLL/Brier/ECE before and after on test logits
    (``modelval temperature``)."""

    method: str
    n_bins: int
    #: ``nll``, ``brier``, ``ece``, ``mce``, ``rms``, ``effective_bins``, ``min_bin_count``, ``accuracy`` on the
    #: test logits as given (``before``) and after the calibrator (``after``).
    before: dict[str, Any]
    after: dict[str, Any]
    val_examples: int
    test_examples: int
    #: The fitted :class:`~modelval.metrics.temperature.LogitScaler`, or the top-label calibrator.
    calibrator: Any = field(repr=False)
    #: A logit scaling's fit: whether it reached an interior optimum, and its ODIR weights (``None``: none given).
    converged: bool | None = None
    odir: tuple[float, float] | None = None
    #: NLL, ECE and accuracy on the test logits at fixed temperatures (logit scalings only).
    sweep: list[TemperatureSweepPoint] = field(default_factory=list)
    #: The ECE-vs-temperature figure, when one was drawn.
    written: list[Path] = field(default_factory=list)

    @property
    def temperature(self) -> float | None:
        """The fitted temperature of ``method="temperature"``; ``None`` for the other methods."""
        return self.calibrator.temperature if self.method == "temperature" else None

    @property
    def top_label(self) -> bool:
        """A top-label calibrator: it maps the top-1 confidence only, so ``after`` has no NLL or Brier score."""
        return self.method in TOP_LABEL_CALIBRATORS

    def to_dict(self) -> dict[str, Any]:
        if self.top_label:
            return {"method": self.method, "n_bins": self.n_bins, "before": self.before, "after": self.after}
        result: dict[str, Any] = {
            "method": self.method,
            "temperature": self.temperature,
            "converged": self.converged,
            "odir": None if self.odir is None else list(self.odir),
            "n_bins": self.n_bins,
            "before": self.before,
            "after": self.after,
            "sweep": [vars(point) for point in self.sweep],
        }
        if self.written:
            result["written"] = [str(path) for path in self.written]
        return result


def _logits(source: LogitsSource) -> tuple[np.ndarray, np.ndarray]:
    from modelval.metrics.temperature import load_logits_file, validate_logits

    if isinstance(source, tuple):
        if len(source) != 2:
            raise InputValidationError(f"logits in memory are a pair (logits, labels), got {len(source)} items")
        return validate_logits(*source)
    return load_logits_file(Path(source))


def _binned_scores(confidences: np.ndarray, correct: np.ndarray, n_bins: int) -> dict[str, float | int]:
    """The binned calibration numbers of the before/after reports, and the accuracy."""
    from modelval.metrics.calibration import reliability_bins

    bins = reliability_bins(confidences, correct, n_bins)
    return {
        "ece": bins.ece,
        "mce": bins.mce,
        "rms": bins.rms,
        "effective_bins": bins.effective_bins,
        "min_bin_count": bins.min_bin_count,
        "accuracy": float(np.mean(correct)),
    }


def recalibrate(
    val: LogitsSource,
    test: LogitsSource,
    *,
    method: Literal["temperature", "vector", "matrix", "histogram", "isotonic"] = "temperature",
    n_bins: int = 15,
    odir: tuple[float, float] | None = None,
    sweep: Sequence[float] = (0.5, 1.0, 1.5, 2.0),
    figure: PathLike | None = None,
) -> RecalibrationReport:
    """Fit a post-hoc calibrator on validation logits and score the test logits before and after it.

    As ``modelval temperature``: ``method`` is a logit scaling fitted by minimising the validation NLL
    (Guo et al. 2017): ``"temperature"`` (``softmax(z / T)``), ``"vector"`` (``softmax(w * z + b)``) or ``"matrix"``
    (``softmax(W z + b)``), the last two optionally with the ODIR regularisation of Kull et al. 2019; or a
    top-label calibrator of the top-1 confidence (``"histogram"``: histogram binning with ``n_bins`` bins;
    ``"isotonic"``: isotonic regression), which gives no distribution over the classes and so no NLL or
    Brier score after it.

    On the test logits it reports the mean NLL (from the exact log-softmax), the multiclass Brier score (sum
    over classes, not halved), the top-1 binned ECE/MCE/RMS with ``n_bins`` uniform ``(lo, hi]`` bins
    (:func:`modelval.metrics.calibration.reliability_bins`, default convention) and the accuracy, before
    and after. For the logit scalings it also reports NLL/ECE at the fixed temperatures of ``sweep``.

    Parameters
    ----------
    val
        Held-out logits the calibrator is fitted on: a ``.npz``/``.pt`` file with ``logits`` (N, C) and
        ``labels`` (N,), or the pair ``(logits, labels)`` in memory.
    test
        Logits on which the numbers are reported, in the same form (and with the same C) as ``val``.
    method
        ``"temperature"``, ``"vector"``, ``"matrix"``, ``"histogram"`` or ``"isotonic"``.
    n_bins
        Bins of the ECE (and of histogram binning).
    odir
        ``(lambda, mu)``: the ODIR weights of vector/matrix scaling (off-diagonal and intercept); ``None``: none.
    sweep
        Fixed temperatures at which NLL and ECE of the test logits are reported (logit scalings only).
    figure
        Where to draw ECE against the ``sweep`` temperatures, the fitted one marked (logit scalings, non-empty
        ``sweep``).

    Returns
    -------
    RecalibrationReport
        ``before``/``after`` scores, the fitted ``calibrator`` (``temperature`` for temperature scaling),
        ``converged``, the ``sweep``; ``to_dict()`` is the command's ``--json``.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> from modelval.api.predictions import recalibrate
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = Path(tmp.name)
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 3, 300)
    >>> logits = 4.0 * (np.eye(3)[labels] + rng.normal(size=(300, 3)))  # noisy, and four times too sharp
    >>> np.savez(folder / "val.npz", logits=logits[:150], labels=labels[:150])
    >>> np.savez(folder / "test.npz", logits=logits[150:], labels=labels[150:])
    >>> report = recalibrate(folder / "val.npz", folder / "test.npz", n_bins=10)
    >>> round(report.temperature, 3), report.converged
    (5.051, True)
    >>> round(report.before["ece"], 4), round(report.after["ece"], 4), round(report.after["accuracy"], 4)
    (0.2728, 0.0637, 0.5867)
    >>> tmp.cleanup()
    """
    from modelval.metrics.estimators import brier_score, negative_log_likelihood
    from modelval.metrics.temperature import fit_scaling, softmax, temperature_sweep

    if method not in METHODS:
        raise InputValidationError(f"method must be one of {METHODS}, got {method!r}")
    _check_bins(n_bins, auto=False)
    if odir is not None and len(odir) != 2:
        raise InputValidationError(f"odir is two weights (lambda, mu), got {odir!r}")
    val_z, val_y = _logits(val)
    test_z, test_y = _logits(test)
    if val_z.shape[1] != test_z.shape[1]:
        raise DataError(f"--val has {val_z.shape[1]} classes but --test has {test_z.shape[1]}")
    if method in TOP_LABEL_CALIBRATORS:
        return _top_label(method, n_bins, val_z, val_y, test_z, test_y)
    scaling = cast(Literal["temperature", "vector", "matrix"], method)
    scaler = fit_scaling(val_z, val_y, method=scaling, odir=None if odir is None else (odir[0], odir[1]))

    def scores(logits: np.ndarray) -> dict[str, Any]:
        # NLL from the exact log-softmax of the logits (as torch.nn.functional.cross_entropy), never from
        # clipped probabilities: a true-class probability that underflows still gets its exact -log p.
        probs = softmax(logits)
        return {
            "nll": negative_log_likelihood(logits, test_y, logits=True),
            "brier": brier_score(probs, test_y),
            **_binned_scores(probs.max(axis=1), probs.argmax(axis=1) == test_y, n_bins),
        }

    before, after = scores(test_z), scores(scaler.transform(test_z))
    points = temperature_sweep(test_z, test_y, list(sweep), n_bins=n_bins) if sweep else []
    report = RecalibrationReport(
        method, n_bins, before, after, len(val_y), len(test_y), calibrator=scaler, converged=scaler.converged,
        odir=scaler.odir if odir is not None else None, sweep=points,
    )  # fmt: skip
    if figure is not None and points:
        from modelval.figures.calibration import DPI, plot_ece_vs_temperature
        from modelval.figures.style import save

        temperatures, eces = [p.temperature for p in points], [p.ece for p in points]
        drawn = plot_ece_vs_temperature(temperatures, eces, fitted=report.temperature)
        report.written += save(drawn, figure, dpi=DPI)
    return report


def _top_label(
    method: str,
    n_bins: int,
    val_z: np.ndarray,
    val_y: np.ndarray,
    test_z: np.ndarray,
    test_y: np.ndarray,
) -> RecalibrationReport:
    """Histogram binning or isotonic regression of the top-1 confidence: fitted on val, ECE before/after on test."""
    from modelval.metrics.calibration import top1_confidences
    from modelval.metrics.calibrators import HistogramBinningCalibrator, IsotonicCalibrator, calibrate_top_label
    from modelval.metrics.estimators import brier_score, negative_log_likelihood
    from modelval.metrics.temperature import softmax

    calibrator: HistogramBinningCalibrator | IsotonicCalibrator = (
        HistogramBinningCalibrator(n_bins) if method == "histogram" else IsotonicCalibrator()
    )
    calibrator.fit_probs(softmax(val_z), val_y)
    test_p = softmax(test_z)
    conf, correct = top1_confidences(test_p, test_y)
    calibrated, _ = calibrate_top_label(calibrator, test_p)
    no_nll = jsonio.Undefined(
        "a top-label calibrator maps only the top-1 confidence; it gives no distribution over the classes"
    )
    before = {
        "nll": negative_log_likelihood(test_z, test_y, logits=True),
        "brier": brier_score(test_z, test_y, logits=True),
        **_binned_scores(conf, correct, n_bins),
    }
    after = {"nll": no_nll, "brier": no_nll, **_binned_scores(calibrated, correct, n_bins)}
    return RecalibrationReport(method, n_bins, before, after, len(val_y), len(test_y), calibrator=calibrator)


# --- prediction_metrics: modelval metrics ---------------------------------------------------------------------


@dataclass
class PredictionMetricsReport(JSONResult):
    """Accuracy, balanced/reweighted/shot accuracy, precision/recall/F1 and (when rows carry ``conf``)
    calibration of one prediction file (``modelval metrics``)."""

    path: Path
    rows_used: int
    rows_dropped: int
    num_classes: int
    accuracy: float
    balanced_accuracy: float
    #: ``sum_c w_c acc_c`` with the class weights normalised to sum 1; ``None`` without class weights.
    reweighted_accuracy: float | None
    #: Mean per-class accuracy of the many/medium/few-shot classes; ``None`` without training counts.
    shot_accuracy: dict[str, float] | None
    #: Bootstrap 95% intervals of the accuracy family (``accuracy``, ``balanced_accuracy``,
    #: ``reweighted_accuracy``, ``shot_many`` ...); empty with ``bootstrap=0``.
    intervals: dict[str, BootstrapInterval]
    #: ``ece``, ``mce``, ``rms``, the bins, their intervals and ``ece_by_group``; or ``ece`` undefined with the
    #: reason when not every row carries a valid ``conf``.
    calibration: dict[str, Any]
    #: ``{"macro" | "micro" | "weighted": {"precision", "recall", "f1"}}``.
    averages: dict[str, dict[str, float]]
    #: One dict per class: ``class``, ``support``, ``accuracy`` (``None`` without examples), precision, recall, F1.
    per_class: list[dict[str, Any]]
    #: ``(K, K)`` counts, row = true class; ``None`` past :data:`~modelval.metrics.classification.MAX_CONFUSION_CELLS`.
    confusion_matrix: np.ndarray | None
    many: int = 100
    few: int = 20
    bootstrap: int = 1000
    seed: int = 0
    stratify: bool = False

    @property
    def ece(self) -> float | None:
        """The top-1 ECE, or ``None`` when not every used row carries a valid ``conf`` (see ``calibration``)."""
        value = self.calibration.get("ece")
        return value if isinstance(value, float) else None

    def to_dict(self) -> dict[str, Any]:
        from modelval.metrics.bootstrap import bootstrap_json

        out: dict[str, Any] = {
            "path": str(self.path),
            "rows_used": self.rows_used,
            "rows_dropped": self.rows_dropped,
            "num_classes": self.num_classes,
            "accuracy": self.accuracy,
            "balanced_accuracy": self.balanced_accuracy,
        }
        if self.reweighted_accuracy is not None:
            out["reweighted_accuracy"] = self.reweighted_accuracy
        if self.shot_accuracy is not None:
            out["shot_accuracy"] = self.shot_accuracy
        if self.intervals:
            for name in ("accuracy", "balanced_accuracy", "reweighted_accuracy"):
                if name in self.intervals:
                    out[f"{name}_ci95"] = self.intervals[name].as_list()
            if self.shot_accuracy is not None:
                shots = ("many", "medium", "few")
                out["shot_accuracy_ci95"] = {g: self.intervals[f"shot_{g}"].as_list() for g in shots}
            out["bootstrap"] = bootstrap_json(self.intervals)
        out.update(self.calibration)
        out.update(self.averages)
        out["per_class"] = self.per_class
        k = self.num_classes
        if self.confusion_matrix is not None:
            out["confusion_matrix"] = self.confusion_matrix.tolist()
        else:  # the per-class numbers need no matrix; a 74.5 GiB one is never attempted
            out["confusion_matrix"] = jsonio.Undefined(f"{k} classes: a {k} x {k} matrix is not built")
        return out


def _class_weights(given: PerClass, num_classes: int | None) -> np.ndarray:
    """Class weights normalised to sum 1, from a JSON file (a list or a ``{"0": w}`` dict) or from values."""
    from modelval.metrics.imbalance import load_class_weights, normalize_class_weights

    if isinstance(given, str | os.PathLike):
        return load_class_weights(Path(given), num_classes)
    return normalize_class_weights(given, num_classes)


def _train_counts(given: PerClass) -> np.ndarray:
    """Training images per class, from a JSON file or from values: finite and 0 or more."""
    from modelval.metrics.imbalance import load_train_counts

    if isinstance(given, str | os.PathLike):
        return load_train_counts(Path(given))
    counts = np.asarray(given)
    if counts.ndim != 1 or counts.size == 0 or not np.issubdtype(counts.dtype, np.number):
        raise InputValidationError(f"train_counts are one number per class, got an array of shape {counts.shape}")
    counts = counts.astype(np.float64)
    if (counts < 0).any() or not np.isfinite(counts).all():
        raise InputValidationError("train_counts must be finite and >= 0")
    return counts


def _calibration_of_rows(
    data: PredictionFile,
    n_bins: int | Literal["auto"],
    counts: np.ndarray | None,
    *,
    many: int,
    few: int,
    bootstrap: int,
    seed: int,
    stratify: bool,
) -> dict[str, Any]:
    """ECE/MCE/RMS (with intervals) and ECE per many/medium/few group, when every used row has a valid ``conf``."""
    from modelval.metrics.calibration import reliability_bins
    from modelval.metrics.estimators import ece_by_group, resolve_n_bins
    from modelval.metrics.imbalance import shot_groups

    rows = data.rows_used
    valid = int(np.isfinite(data.conf).sum())
    if valid != rows:
        why = f"only {valid} of {rows} rows carry a valid conf (a number in [0, 1])"
        return {"ece": jsonio.Undefined(f"no calibration numbers: {why}")}
    bins_used, _ = resolve_n_bins(n_bins, rows)
    correct = data.labels == data.preds
    bins = reliability_bins(data.conf, correct, bins_used)
    out: dict[str, Any] = {**bins.summary()}
    out.pop("adaptive")
    if bootstrap:
        from modelval.metrics.bootstrap import calibration_intervals

        intervals = calibration_intervals(
            data.conf, correct, bins_used, labels=data.labels, n_resamples=bootstrap, seed=seed, stratify=stratify
        )
        out.update({f"{name}_ci95": intervals[name].as_list() for name in ("ece", "mce", "rms")})
    if counts is not None:
        groups = shot_groups(counts, many_threshold=many, few_threshold=few)
        per_group = ece_by_group(
            data.conf, correct, data.labels, {g: getattr(groups, g) for g in ("many", "medium", "few")}, bins_used
        )
        out["ece_by_group"] = {
            name: result.ece if result.ece is not None else jsonio.Undefined(result.reason or "no examples")
            for name, result in per_group.items()
        }
    return out


def prediction_metrics(
    path: PathLike,
    *,
    num_classes: int | None = None,
    class_weights: PerClass | None = None,
    train_counts: PerClass | None = None,
    many: int = 100,
    few: int = 20,
    bootstrap: int = 1000,
    seed: int = 0,
    stratify: bool = False,
    strict: bool = False,
    n_bins: int | Literal["auto"] = 15,
) -> PredictionMetricsReport:
    """The imbalance-aware metrics of one prediction JSONL file (``modelval metrics``).

    Accuracy, balanced and reweighted accuracy, many/medium/few-shot accuracy, precision/recall/F1 and the
    confusion matrix, with its calibration when the rows carry ``conf``.

    Rows need ``label`` and ``pred``; ``conf`` is optional (a row without a valid one still counts for
    accuracy). With ``acc_c`` the accuracy (recall) on the examples of class ``c``: balanced accuracy is the
    mean of ``acc_c`` over the classes with examples (scikit-learn's ``balanced_accuracy_score``); reweighted
    accuracy is ``sum_c w_c acc_c`` with ``class_weights`` normalised to sum 1 (undefined, and an error, when
    a class with weight > 0 has no examples); the shot groups split the classes by ``train_counts``: many if
    more than ``many`` training images, few if fewer than ``few``, medium otherwise (Liu et al. 2019).
    Precision, recall and F1 follow scikit-learn's macro/micro/weighted averages with ``zero_division=0``,
    over the classes ``0 .. num_classes - 1``. When every row carries a valid ``conf``, the binned top-1
    ECE/MCE/RMS (``n_bins`` uniform ``(lo, hi]`` bins) and the ECE within each shot group are added.
    Intervals are seeded percentile bootstrap 95% intervals over predictions (``stratify``: within each true
    class).

    Parameters
    ----------
    path
        The prediction file (JSONL rows ``{label, pred[, conf]}``).
    num_classes
        The number of classes; default: the length of ``class_weights`` or ``train_counts``, else the largest
        class index found + 1 (refused past 30,000: say it explicitly).
    class_weights
        One weight per class (a JSON list or ``{"0": w}`` dict file, or values): gives the reweighted accuracy.
    train_counts
        Training images per class (a JSON file or values): gives the many/medium/few-shot accuracy.
    many
        Many-shot: more than ``many`` training images.
    few
        Few-shot: fewer than ``few`` training images.
    bootstrap
        Bootstrap resamples of the 95% intervals; 0 turns them off.
    seed
        Seed of the bootstrap.
    stratify
        Resample within each true class (class counts stay fixed).
    strict
        A malformed row is an error instead of being dropped and counted.
    n_bins
        Bins of the ECE, or ``"auto"`` for ``ceil(n^(1/3))``.

    Returns
    -------
    PredictionMetricsReport
        The numbers as attributes (``accuracy``, ``balanced_accuracy``, ``per_class``, ``ece`` ...);
        ``to_dict()`` is the command's ``--json``.

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> from modelval.api.predictions import prediction_metrics
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = Path(tmp.name)
    >>> pairs = [(0, 0), (0, 0), (0, 0), (0, 0), (0, 1), (1, 1), (1, 0), (2, 2)]  # (label, pred)
    >>> rows = [{"label": y, "pred": p} for y, p in pairs]
    >>> _ = (folder / "preds.jsonl").write_text("".join(json.dumps(row) + "\\n" for row in rows))
    >>> report = prediction_metrics(folder / "preds.jsonl", class_weights=[1, 2, 1], bootstrap=0)
    >>> report.num_classes, report.accuracy, round(report.balanced_accuracy, 4), round(report.reweighted_accuracy, 4)
    (3, 0.75, 0.7667, 0.7)
    >>> [c["accuracy"] for c in report.per_class], round(report.averages["macro"]["f1"], 4)
    ([0.8, 0.5, 1.0], 0.7667)
    >>> report.ece is None  # the rows carry no conf: no calibration numbers (the JSON says why)
    True
    >>> tmp.cleanup()
    """
    from modelval.metrics.classification import MAX_CONFUSION_CELLS, confusion_matrix, precision_recall_f1
    from modelval.metrics.imbalance import per_class_accuracy, reweighted_accuracy, shot_accuracy
    from modelval.metrics.io import read_predictions

    _check_bins(n_bins)
    _check_bootstrap(bootstrap)
    if num_classes is not None and (
        isinstance(num_classes, bool) or not isinstance(num_classes, int | np.integer) or num_classes < 1
    ):
        raise InputValidationError(f"num_classes must be a positive integer, got {num_classes!r}")
    path = Path(path)
    data = read_predictions(path, strict=strict, require_conf=False)
    if data.skipped:
        raise DataError(f"{path}: no usable rows: {data.reason}")
    weights = None if class_weights is None else _class_weights(class_weights, num_classes)
    counts = None if train_counts is None else _train_counts(train_counts)
    k = num_classes or (len(weights) if weights is not None else None) or (len(counts) if counts is not None else None)
    if not k:
        k = int(max(data.labels.max(), data.preds.max()) + 1)
        if k > MAX_DERIVED_CLASSES:
            raise DataError(
                f"{path}: the largest class index is {k - 1}, which would make {k} classes (a {k} x {k} "
                f"confusion matrix); if that is right, say so with --num-classes {k}, else check the labels"
            )
    if counts is not None and len(counts) != k:
        where = train_counts if isinstance(train_counts, str | os.PathLike) else "train_counts"
        raise DataError(f"{where}: {len(counts)} training counts but {k} classes")
    y, p = data.labels, data.preds
    if max(y.max(), p.max()) >= k:
        raise DataError(f"{path}: class {int(max(y.max(), p.max()))} found but there are only {k} classes")
    per_class = per_class_accuracy(y, p, k)
    reweighted = None if weights is None else reweighted_accuracy(y, p, weights)
    shots = None if counts is None else shot_accuracy(y, p, counts, many_threshold=many, few_threshold=few)
    intervals: dict[str, BootstrapInterval] = {}
    if bootstrap:
        from modelval.metrics.bootstrap import accuracy_intervals

        intervals = accuracy_intervals(
            y, p, k, class_weights=weights, train_counts=counts, many_threshold=many, few_threshold=few,
            n_resamples=bootstrap, seed=seed, stratify=stratify,
        )  # fmt: skip
    calibration = _calibration_of_rows(
        data, n_bins, counts, many=many, few=few, bootstrap=bootstrap, seed=seed, stratify=stratify
    )
    averages: dict[str, dict[str, float]] = {}
    for average in ("macro", "micro", "weighted"):
        prf = precision_recall_f1(y, p, average=average, num_classes=k, zero_division=0)
        averages[average] = {"precision": float(prf.precision), "recall": float(prf.recall), "f1": float(prf.f1)}
    per = precision_recall_f1(y, p, average=None, num_classes=k, zero_division=0)
    per_precision, per_recall, per_f1 = (np.asarray(v) for v in (per.precision, per.recall, per.f1))
    classes = [
        {
            "class": c,
            "support": int(per.support[c]),
            "accuracy": None if math.isnan(per_class[c]) else float(per_class[c]),
            "precision": float(per_precision[c]),
            "recall": float(per_recall[c]),
            "f1": float(per_f1[c]),
        }
        for c in range(k)
    ]
    return PredictionMetricsReport(
        path=path,
        rows_used=data.rows_used,
        rows_dropped=data.rows_dropped,
        num_classes=k,
        accuracy=float(np.mean(y == p)),
        balanced_accuracy=float(np.nanmean(per_class)),
        reweighted_accuracy=reweighted,
        shot_accuracy=shots,
        intervals=intervals,
        calibration=calibration,
        averages=averages,
        per_class=classes,
        confusion_matrix=confusion_matrix(y, p, k) if k * k <= MAX_CONFUSION_CELLS else None,
        many=many,
        few=few,
        bootstrap=bootstrap,
        seed=seed,
        stratify=stratify,
    )
