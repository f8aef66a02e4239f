"""The calibration door: the calibration card of predictions or of a model (``modelval calibration``), and the
questions about a file of predictions: how calibrated it is (``ece_of_artifacts``, ``reliability``), what a
post-hoc calibrator fitted on held-out logits does to it (``recalibrate``) and how accurate it is, class by class
(``prediction_metrics``), as ``modelval calibration ece``, ``reliability``, ``temperature`` and ``metrics``
compute them.

Every function runs exactly what its command runs, so a notebook and ``modelval <command> --json`` give the
same numbers. Results have ``.to_json()``, the strict JSON text the command's ``--json`` prints, and
``.to_dict()``, that JSON object (``ece`` prints a list, one object per file: :meth:`ECEReport.to_list`). The
numbers are computed in the metrics wing: :mod:`modelval.metrics.artifacts` (``ece_of_artifacts``),
:mod:`modelval.metrics.predictions` (``prediction_metrics``), :mod:`modelval.metrics.recalibration`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from modelval import jsonio
from modelval.api.options import EvaluationOptions, ModelOptions, resolve_options
from modelval.api.pipeline import run_model
from modelval.api.recording import JSONResult
from modelval.errors import DataError
from modelval.metrics.artifacts import ECEReport as ECEReport
from modelval.metrics.artifacts import ece_of_artifacts as ece_of_artifacts
from modelval.metrics.predictions import PredictionMetricsReport as PredictionMetricsReport
from modelval.metrics.predictions import ReliabilityReport
from modelval.metrics.predictions import prediction_metrics as prediction_metrics
from modelval.metrics.recalibration import METHODS as METHODS
from modelval.metrics.recalibration import LogitsSource, RecalibrationReport

if TYPE_CHECKING:
    import numpy as np

    from modelval.metrics.calibration import Convention
    from modelval.preprocessing import PreprocessConfig

PathLike = str | os.PathLike[str]


class CalibrationCard(dict[str, Any], JSONResult):
    """The calibration card: every calibration number of one set of predictions (a JSON-ready dict)."""

    def to_dict(self) -> dict[str, Any]:
        """The card as a plain dict."""
        return dict(self)


def calibration_card(
    labels: np.ndarray | Any,
    *,
    logits: np.ndarray | Any | None = None,
    probs: np.ndarray | Any | None = None,
    task: str | None = None,
    **card_options: Any,
) -> CalibrationCard:
    """The calibration card of predictions: every calibration number of one set of labels and scores.

    Top-label ECE, MCE and RMS calibration error over equal-width bins (``n_bins``, the binning ``convention``),
    the debiased L2 error, smooth ECE, classwise ECE, Brier score and NLL, accuracy, with bootstrap 95% intervals
    (``n_bootstrap`` resamples); binary and multilabel inputs get their own estimators. The task is detected from
    the shapes and ranges unless given, and the card says which and how (an ambiguous input is refused with the
    reason).

    Parameters
    ----------
    labels
        The true labels: class indices (multiclass), 0/1 (binary), or a 0/1 matrix (multilabel).
    logits
        Raw scores (one of ``logits`` and ``probs``).
    probs
        Probabilities (one of ``logits`` and ``probs``).
    task
        ``None`` (detect), ``"binary"``, ``"multiclass"`` or ``"multilabel"`` (``--task``).
    **card_options
        The options of :func:`modelval.metrics.card.calibration_card`: ``n_bins``, ``convention``,
        ``n_bootstrap``, ``seed``, ``stratify``, ...

    Returns
    -------
    CalibrationCard
        A JSON-ready dict (``modelval calibration --json``) with its ``provenance``.

    Examples
    --------
    >>> import numpy as np, modelval
    >>> probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.6, 0.4]])
    >>> card = modelval.calibration_card(np.array([0, 1, 1, 0]), probs=probs, n_bins=2, n_bootstrap=0)
    >>> card["task"], card["accuracy"], round(card["ece"], 4)
    ('multiclass', 1.0, 0.275)
    >>> card = modelval.calibration_card(np.array([1, 1, 1, 0]), probs=np.array([0.2, 0.7, 0.9, 0.4]), n_bins=2,
    ...                                  n_bootstrap=0)
    >>> card["task"], round(card["ece"], 4), round(card["top_label_ece"], 4)
    ('binary', 0.2, 0.0)
    """
    from modelval.metrics.card import calibration_card as card
    from modelval.records.provenance import environment

    result = CalibrationCard(card(labels, logits=logits, probs=probs, task=task, **card_options))
    result["provenance"] = environment()
    return result


#: What a model's calibration card scores: its 16-category probabilities, normalized per image.
MODEL_PROBABILITIES = (
    "the 16 category scores of each image (the aggregation, default mean, of each category's ImageNet-class "
    "probabilities) divided by their sum; the label is the image's category (on cue-conflict: its shape)"
)


def model_calibration_card(
    model: Any,
    *,
    n_bins: int | str = 15,
    convention: str = "default",
    n_bootstrap: int = 1000,
    stratify: bool = False,
    preprocess: PreprocessConfig | None = None,
    options: EvaluationOptions | None = None,
    model_options: ModelOptions | None = None,
    **settings: Any,
) -> CalibrationCard:
    """The calibration card of a model's 16-category decisions on a stimulus set (``modelval calibration --model``).

    The model runs through :func:`run_model` (a model whose outputs are in the output cache needs no forward
    pass); the card scores :data:`MODEL_PROBABILITIES`.

    Parameters
    ----------
    model
        A registry name or spec, or an ``nn.Module`` with ``preprocess``.
    n_bins
        Equal-width bins of the binned estimators, or ``"auto"``.
    convention
        The binning convention (``"default"``, ``"torchmetrics"``, ...; :data:`modelval.metrics.CONVENTIONS`).
    n_bootstrap
        Bootstrap resamples of the intervals (0: none).
    stratify
        Resample within each class.
    preprocess
        The preprocessing of an ``nn.Module`` (see :func:`shape_bias`).
    options
        How the model is evaluated; ``options.seed`` seeds the bootstrap.
    model_options
        How the model is loaded and where it runs.
    **settings
        Single fields of ``options`` or ``model_options``.

    Returns
    -------
    CalibrationCard
        The card, with ``model``, ``probabilities`` (what was scored), ``output_cache`` and ``provenance``.

    Examples
    --------
    The bundled EfficientNet-Lite0 on ``SUBSET`` (two stimuli per category): on cue-conflict images the label is
    the shape, which the model names on only 4 of the 32:

    >>> import modelval
    >>> card = modelval.api.model_calibration_card("efficientnet_lite0", data_root=SUBSET,
    ...                                            allow_modified_stimuli=True, n_bins=5, n_bootstrap=0)
    >>> card["task"], card["n"], card["accuracy"], round(card["ece"], 4)
    ('multiclass', 32, 0.125, 0.4189)
    """
    import numpy as np

    from modelval.behaviour.categories import CATEGORIES

    options, model_options = resolve_options(options, model_options, settings)
    run = run_model(model, preprocess=preprocess, options=options, model_options=model_options)
    scores = run.evaluation.category_probabilities.astype(np.float64)
    probabilities = scores / scores.sum(axis=1, keepdims=True)
    labels = np.array([CATEGORIES.index(stimulus.shape) for stimulus in run.evaluation.stimuli])
    card = calibration_card(
        labels, probs=probabilities, n_bins=n_bins, convention=convention, n_bootstrap=n_bootstrap,
        seed=options.seed, stratify=stratify, task="multiclass",
    )  # fmt: skip
    card.update(model=run.model, probabilities=MODEL_PROBABILITIES, output_cache=run.evaluation.output_cache)
    card["provenance"] = run.provenance()
    return card


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
    """The reliability diagram of one prediction JSONL file and its calibration error (``calibration reliability``).

    Computes, per confidence bin, the number of predictions, their accuracy (with its Wilson 95% interval)
    and mean top-1 confidence, and from those the binned top-1 ECE of Guo et al. (2017, eq. 3), MCE and
    RMS, over the bins of :func:`modelval.metrics.calibration.reliability_bins`. The ECE interval is a seeded
    percentile bootstrap over predictions (``stratify``: within each true class), with the bin edges held fixed.
    With ``figure`` the diagram is drawn there (:func:`modelval.figures.plot_reliability`); with ``report_dir``
    the diagram ``<file stem>-reliability.png`` and ``reliability.json`` (this result) are written into that
    folder. Without either nothing is written.

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
    >>> from modelval.api import reliability
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
    from modelval.metrics.calibration import CONVENTIONS
    from modelval.metrics.io import read_predictions
    from modelval.metrics.predictions import file_calibration
    from modelval.metrics.validation import check_choice, check_count, check_n_bins

    check_n_bins(n_bins, auto=True)
    check_count(bootstrap, "bootstrap", minimum=0, expected="is a number of resamples, 0 (no intervals) or more")
    check_choice(convention, "convention", CONVENTIONS)
    path = Path(path)
    data = read_predictions(path, strict=strict)
    if data.skipped:  # no rows with a valid conf (or no conf key at all): nothing to bin
        raise DataError(f"{path}: cannot draw a reliability diagram: {data.reason}")
    bins, intervals = file_calibration(
        data, n_bins, adaptive=adaptive, convention=convention, n_bootstrap=bootstrap, seed=seed, stratify=stratify
    )
    report = ReliabilityReport(path, bins, data.rows_used, data.rows_dropped, intervals or None)
    folder = None if report_dir is None else Path(report_dir)
    targets = [] if figure is None else [Path(figure)]
    if folder is not None:
        targets.append(folder / f"{path.stem}-reliability.png")
    if targets:
        from modelval.figures.calibration import DPI, plot_reliability
        from modelval.figures.style import save

        ece_interval = intervals["ece"].as_list() if intervals else None
        for target in targets:
            drawn = plot_reliability(bins, title=f"Reliability: {path.name}", ece_interval=ece_interval)
            report.written += save(drawn, target, dpi=DPI)
        report.figure = report.written[0]
    if folder is not None:
        report.written.append(write_text(folder / "reliability.json", jsonio.dumps(report.record(), indent=2) + "\n"))
    return report


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

    As ``modelval calibration temperature``: ``method`` is a logit scaling fitted by minimising the validation NLL
    (:func:`modelval.metrics.temperature.fit_scaling`: ``softmax(z / T)``, ``softmax(w * z + b)`` or
    ``softmax(W z + b)``), or a top-label calibrator of the top-1 confidence (:mod:`modelval.metrics.calibrators`),
    which gives no distribution over the classes and so no NLL or Brier score after it. On the test logits it
    reports the mean NLL (exact log-softmax), the multiclass Brier score, the top-1 binned ECE/MCE/RMS and the
    accuracy, before and after; for the logit scalings also NLL/ECE at the fixed temperatures of ``sweep``.

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
    >>> from modelval.api import recalibrate
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
    from modelval.metrics.recalibration import recalibration

    report = recalibration(val, test, method=method, n_bins=n_bins, odir=odir, sweep=sweep)
    if figure is not None and report.sweep:
        from modelval.figures.calibration import DPI, plot_ece_vs_temperature
        from modelval.figures.style import save

        temperatures, eces = [p.temperature for p in report.sweep], [p.ece for p in report.sweep]
        report.written += save(plot_ece_vs_temperature(temperatures, eces, fitted=report.temperature), figure, dpi=DPI)
    return report
