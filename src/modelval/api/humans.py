"""Observers against the human observers: one observer's accuracy and error consistency with the humans of its
experiment (``compare_with_humans``, ``modelval humans``), and several observers' figures as model-vs-human
draws them (``human_figures``, ``modelval humans`` with several and ``--report-dir``)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelval.api.observers import is_decision_file, observer_trials, trial_decisions
from modelval.api.options import EvaluationOptions, ModelOptions, resolve_options
from modelval.api.pipeline import ModelRun
from modelval.api.recording import JSONResult, protocol_label
from modelval.behaviour.experiments import get_dataset
from modelval.records.run_store import record_run

if TYPE_CHECKING:
    from modelval.behaviour.benchmark import DatasetScores
    from modelval.behaviour.conditions import ConditionComparison
    from modelval.behaviour.decisions import Decision
    from modelval.behaviour.humans import HumanComparison
    from modelval.preprocessing import PreprocessConfig
    from modelval.records.run_store import RunStore


@dataclass
class HumansReport(JSONResult):
    """One observer against the published human observers of the same experiment."""

    observer: str
    comparison: HumanComparison
    reference_dir: Path
    trials: list[Decision]
    #: Cue-conflict only: images where the observer chose the texture although most humans chose the shape.
    texture_despite_humans: dict[str, Any] | None = None
    run: ModelRun | None = None
    #: Cue-conflict only: the observer's shape bias with its interval, and the humans' (pooled trials).
    shape_bias: dict[str, Any] | None = None
    #: What produced the observer's trials, and the verified human reference data.
    provenance: dict[str, Any] = field(default_factory=dict)
    #: The human observers' files against the published manifest: "verified" or "modified: ..." (allowed).
    reference_data: str = "verified"
    #: The human observers the comparison used (not part of the JSON).
    panel: Any = field(default=None, repr=False)
    #: The same comparison within each condition (distortion level), in model-vs-human's order.
    conditions: list[ConditionComparison] = field(default_factory=list)
    #: model-vs-human's benchmark values of the dataset: the per-condition values averaged over its conditions.
    benchmark: DatasetScores | None = None

    @property
    def error_consistency(self) -> float:
        return self.comparison.error_consistency

    def to_dict(self) -> dict[str, Any]:
        payload = self.comparison.to_dict()
        payload["observer"] = self.observer
        payload["reference_dir"] = str(self.reference_dir)
        payload["reference_data"] = self.reference_data
        if self.run is not None:
            payload["output_cache"] = self.run.evaluation.output_cache
        payload["conditions"] = [row.to_dict() for row in self.conditions]
        payload["conditions_meaning"] = (
            "per condition (distortion level): trials matched by model-vs-human's short image name within the "
            "condition; accuracy, and the mean over the human observers of kappa, observed consistency and the "
            "squared accuracy difference; human_human_kappa_mean: the humans' mutual kappa in the condition (the "
            "observer's own pairs left out); the top-level values pool every condition"
        )
        if self.benchmark is not None:
            summary = self.benchmark.to_dict()
            summary.pop("per_condition", None)
            summary["meaning"] = (
                "model-vs-human's benchmark values of this dataset: OOD accuracy over the kept conditions pooled, the "
                "other three the mean over the kept conditions of the per-condition values"
            )
            payload["benchmark"] = summary
        payload["provenance"] = self.provenance
        if self.shape_bias is not None:
            payload["shape_bias"] = self.shape_bias
        if self.texture_despite_humans is not None:
            payload["texture_despite_humans"] = self.texture_despite_humans
        return payload


def compare_with_humans(
    source: Any,
    *,
    dataset: str | None = None,
    reference_dir: str | os.PathLike[str] | None = None,
    preprocess: PreprocessConfig | None = None,
    options: EvaluationOptions | None = None,
    model_options: ModelOptions | None = None,
    resample_observers: bool = False,
    na_handling: str = "wrong",
    allow_modified_reference: bool = False,
    run_store: RunStore | None = None,
    **settings: Any,
) -> HumansReport:
    """Accuracy and error consistency of a model or decision CSV with the human observers, as ``modelval humans``.

    Error consistency is Cohen's kappa on trial-wise correctness (Geirhos, Meding & Wichmann, NeurIPS 2020),
    against each human observer and as their mean, with a bootstrap 95% interval; kappa_max is the most kappa
    the two accuracies allow; the humans' mutual kappa says how much humans agree with each other (not a ceiling
    for models). The report also holds the comparison within each condition (distortion level) and
    model-vs-human's benchmark values of the dataset; on cue-conflict also the shape bias beside the humans'.
    The human observers' files are checked against the published manifest first.

    Parameters
    ----------
    source
        A decision CSV, or a model (registry name, spec or ``nn.Module`` with ``preprocess``).
    dataset
        The experiment (default: read from a decision file, else ``options.dataset``).
    reference_dir
        The published raw data (texture-vs-shape's ``raw-data/``, or model-vs-human's for its 14 further
        datasets; default the data home's ``reference/``, else the per-user cache
        filled by ``modelval data download --humans [--dataset NAME]``).
    preprocess
        The preprocessing of an ``nn.Module`` (see :func:`shape_bias`).
    options
        How a model is evaluated, and the bootstrap (``bootstrap`` resamples, ``seed``, the unit ``resample``:
        texture images on cue-conflict unless set).
    model_options
        How a model is loaded (:class:`~modelval.ModelOptions`).
    resample_observers
        The bootstrap also draws the human observers (default: the published observers are held fixed).
    na_handling
        ``"wrong"`` (an unanswered human trial is wrong, as in model-vs-human) or ``"exclude"`` (left out of each
        pair it occurs in).
    allow_modified_reference
        Use human files that differ from the published manifest; ``reference_data`` then says what differs
        (otherwise such a folder is refused).
    run_store
        Record the run there; ``None`` records nothing.
    **settings
        Single fields of ``options`` or ``model_options``.

    Returns
    -------
    HumansReport
        ``.error_consistency``, ``.comparison`` (per observer, kappa_max, intervals), ``.conditions``,
        ``.benchmark``; ``.to_dict()`` is ``modelval humans --json``.

    Examples
    --------
    The published VGG-16 on the edge images (``REFERENCE`` is texture-vs-shape's ``raw-data/``): its error
    consistency with the 10 humans, and the largest kappa its accuracy allows against theirs:

    >>> import modelval
    >>> humans = modelval.compare_with_humans(REFERENCE / "edge-experiment_vgg_session_1.csv",
    ...                                       reference_dir=REFERENCE, bootstrap=0)
    >>> humans.comparison.dataset, round(humans.error_consistency, 3), round(humans.comparison.kappa_max, 3)
    ('edges', 0.071, 0.097)
    """
    from modelval.behaviour import humans
    from modelval.behaviour.benchmark import score_observer
    from modelval.behaviour.conditions import compare_by_condition
    from modelval.behaviour.consistency import check_na_handling
    from modelval.datasets.human_data import human_data_dir
    from modelval.datasets.reference import load_reference_panel, verify_reference_dir

    options, model_options = resolve_options(options, model_options, settings)
    check_na_handling(na_handling)
    if dataset is not None or not is_decision_file(str(source)):
        # a resampling unit the experiment cannot have, or missing human data, fails before a model is evaluated
        get_dataset(dataset or options.dataset).resampling(options.resample)
        reference = human_data_dir(dataset or options.dataset, reference_dir)
        if dataset is not None:  # a modified reference folder fails before a model is evaluated
            verify_reference_dir(reference, dataset, allow_modified=allow_modified_reference)
    observed = observer_trials(
        source, dataset=dataset, preprocess=preprocess, options=options, model_options=model_options
    )
    reference = human_data_dir(observed.dataset, reference_dir)
    panel, verification = load_reference_panel(reference, observed.dataset, allow_modified=allow_modified_reference)
    trials = observed.trials
    comparison = humans.compare_with_humans(
        trials,
        panel,
        subject=trials[0].subject,
        n_bootstrap=options.bootstrap,
        seed=options.seed,
        resample=options.resample,
        resample_observers=resample_observers,
        na_handling=na_handling,
    )
    conditions = compare_by_condition(
        trials,
        panel,
        subject=trials[0].subject,
        na_handling=na_handling,
        n_bootstrap=options.bootstrap,
        seed=options.seed,
        resample=options.resample,
    )
    benchmark = score_observer(trials, panel, subject=trials[0].subject, na_handling=na_handling, rows=conditions)
    despite = shape_bias = None
    if get_dataset(observed.dataset).has_conflicts:
        items = humans.texture_despite_humans(trials, humans.human_shape_fractions(panel))
        despite = {"min_humans": humans.HUMAN_SHAPE_MAJORITY, "count": len(items), "images": [vars(i) for i in items]}
        shape_bias = _shape_bias_beside_humans(trials, panel, comparison.resampling, options)
    provenance = {**observed.provenance, "reference_dir": str(reference), "reference_data": verification}
    report = HumansReport(
        observed.label, comparison, reference, trials, despite, observed.run, shape_bias, provenance, verification,
        panel, conditions, benchmark,
    )  # fmt: skip
    summary = {key: report.to_dict().get(key) for key in ("accuracy", "error_consistency", "observed_consistency")}
    protocol = protocol_label(dataclasses.replace(options, dataset=observed.dataset))
    record_run(
        run_store,
        "humans",
        model=observed.label,
        dataset=observed.dataset,
        summary=summary,
        provenance=provenance,
        decisions=trial_decisions(trials),
        label=protocol,
    )
    return report


def _shape_bias_beside_humans(trials: list[Decision], panel: Any, unit: str, options: EvaluationOptions) -> dict:
    """The observer's shape bias with its interval, and the humans' over their pooled trials (as upstream)."""
    from modelval.behaviour.shape_bias import compute_shape_bias

    mine = compute_shape_bias(trials, n_bootstrap=options.bootstrap, seed=options.seed, resample=unit)
    humans = compute_shape_bias([d for observer in panel.observers.values() for d in observer], n_bootstrap=0)
    return {
        "value": mine.to_dict()["shape_bias"],
        "ci95": mine.to_dict()["ci95"],
        "ci95_resampling": unit,
        "humans_pooled": humans.to_dict()["shape_bias"],
        "humans_pooled_meaning": "shape hits / (shape + texture hits) over all trials of the human observers pooled "
        "(model-vs-human's 'humans')",
    }


@dataclass
class HumanFiguresReport(JSONResult):
    """The human-comparison figures of several observers (``modelval humans`` with several): what was drawn, and
    every number behind the figures (also written as ``figures.json``)."""

    #: The files written (PNG and PDF of each figure, and figures.json), in order.
    written: list[Path]
    payload: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.payload)


#: What to do when a decision file's experiment cannot be read from its names (several observers take no --dataset).
FIGURES_DATASET_HINT = "give the file as --decisions LABEL:DATASET=FILE (from Python: (label, file, dataset))"


def human_figures(
    report_dir: str | os.PathLike[str],
    *,
    decisions: Sequence[
        str | os.PathLike[str] | tuple[str, str | os.PathLike[str]] | tuple[str, str | os.PathLike[str], str | None]
    ] = (),
    models: Sequence[str] = (),
    reference_dir: str | os.PathLike[str] | None = None,
    humans_mode: str = "pooled",
    resample_observers: bool = False,
    na_handling: str = "wrong",
    allow_modified_reference: bool = False,
    options: EvaluationOptions | None = None,
    model_options: ModelOptions | None = None,
    **settings: Any,
) -> HumanFiguresReport:
    """Draw several observers against the human observers, as model-vs-human draws them, into ``report_dir``.

    The shape-bias matrix plot and box plot (cue-conflict), accuracy by dataset with Wilson intervals, error
    consistency with kappa_max against the humans' mutual kappa, model-vs-human's human-likeness views, the
    error-consistency matrix of all observers per experiment, and the per-condition line plots of datasets
    with distortion levels; each as PNG and PDF, with ``figures.json`` holding every number drawn. Each
    label names the file behind it (a published file by its texture-vs-shape path).

    Parameters
    ----------
    report_dir
        The folder the figures and ``figures.json`` are written to (made if missing).
    decisions
        Decision CSVs, each ``path``, ``(label, path)`` or ``(label, path, dataset)``; one observer on one
        experiment each, read from the image names or the file name unless ``dataset`` names it (needed for
        model-vs-human's bare edge and silhouette names in a renamed file).
    models
        Models (registry names or specs) evaluated on cue-conflict through the shape-bias pipeline.
    reference_dir
        The published human raw data (default: the data home's ``reference/``, else the per-user cache).
    humans_mode
        ``"pooled"`` (the humans' trials pooled, as model-vs-human) or ``"mean"`` (the mean over observers).
    resample_observers
        The bootstrap also draws the human observers (default: they are held fixed).
    na_handling
        ``"wrong"`` (an unanswered human trial is wrong, as model-vs-human) or ``"exclude"``.
    allow_modified_reference
        Compare against human files that differ from the published manifest (the JSON says what differs).
    options
        The protocol and statistics (``bootstrap``, ``seed``, ``resample``) and how a model is evaluated.
    model_options
        How a model is loaded (device, weights, label map).
    **settings
        Single fields of ``options`` or ``model_options``.

    Returns
    -------
    HumanFiguresReport
        ``.written`` (the files) and ``.to_dict()`` (``figures.json``).

    Examples
    --------
    The published VGG-16 on the edge images against the ten human observers (``REFERENCE`` is
    texture-vs-shape's ``raw-data/`` folder, ``FOLDER`` an empty folder):

    >>> import modelval
    >>> report = modelval.human_figures(FOLDER, decisions=[("VGG-16", REFERENCE / "edge-experiment_vgg_session_1.csv")],
    ...                                 reference_dir=REFERENCE, bootstrap=0)
    >>> sorted(p.name for p in report.written if p.suffix == ".png")[:2]
    ['accuracy-by-dataset.png', 'error-consistency-matrix-edges.png']
    >>> round(report.to_dict()["observers"]["VGG-16"]["edges"]["error_consistency"], 3)
    0.071
    """
    from modelval import jsonio
    from modelval.atomic import write_text
    from modelval.behaviour.consistency import check_na_handling, kappa_matrix
    from modelval.behaviour.humans import compare_with_humans as compare_trials
    from modelval.datasets.human_data import human_data_dir
    from modelval.datasets.reference import load_reference_panel
    from modelval.errors import DataError
    from modelval.figures.humans import write_human_figures
    from modelval.figures.style import HUMAN_MODES

    options, model_options = resolve_options(options, model_options, settings)
    check_na_handling(na_handling)
    if humans_mode not in HUMAN_MODES:
        raise DataError(f"humans_mode must be one of {', '.join(HUMAN_MODES)}, got {humans_mode!r}")
    if not decisions and not models:
        raise DataError("give at least one decision file or model")
    folder = Path(report_dir)
    observers, sources = _observers(decisions, models, options, model_options)
    datasets = sorted({dataset for per in observers.values() for dataset in per})
    panels, verification = {}, {}
    for dataset in datasets:
        panels[dataset], verification[dataset] = load_reference_panel(
            human_data_dir(dataset, reference_dir), dataset, allow_modified=allow_modified_reference
        )
    comparisons = {
        label: {
            dataset: compare_trials(
                trials,
                panels[dataset],
                n_bootstrap=options.bootstrap,
                seed=options.seed,
                resample=options.resample if get_dataset(dataset).has_conflicts else None,
                resample_observers=resample_observers,
                na_handling=na_handling,
            )
            for dataset, trials in per.items()
        }
        for label, per in observers.items()
    }
    written = write_human_figures(
        observers, panels, comparisons, folder, sources=sources, humans_mode=humans_mode, na_handling=na_handling
    )
    payload: dict[str, Any] = {
        "figures": [],
        "humans_mode": humans_mode,
        "reference_data": verification,
        "sources": sources,
        "observers": {
            label: {dataset: result.to_dict() for dataset, result in per.items()} for label, per in comparisons.items()
        },
        "kappa_matrix": {
            dataset: kappa_matrix(
                {**panel.observers, **{label: per[dataset] for label, per in observers.items() if dataset in per}},
                na_handling=na_handling,
            ).to_dict()
            for dataset, panel in panels.items()
        },
    }
    conditions, condition_figures = _condition_figures(observers, panels, folder, na_handling)
    written += condition_figures
    payload["figures"] = [str(path) for path in written]
    payload["conditions"] = conditions
    written.append(write_text(folder / "figures.json", jsonio.dumps(payload, indent=2) + "\n"))
    return HumanFiguresReport(written, payload)


def _observers(
    decisions: Sequence[Any], models: Sequence[str], options: EvaluationOptions, model_options: ModelOptions
) -> tuple[dict[str, dict[str, list[Decision]]], dict[str, dict[str, str]]]:
    """Each observer's trials per experiment, and where each came from (a published file by its path)."""
    from modelval.datasets.fetch import RAW_DATA_REPOSITORY, published_path
    from modelval.errors import DataError

    observers: dict[str, dict[str, list[Decision]]] = {}
    sources: dict[str, dict[str, str]] = {}
    for item in decisions:
        label, file, declared = (*item, None)[:3] if isinstance(item, tuple) else ("", item, None)
        observed = observer_trials(
            Path(file),
            dataset=declared,
            options=options,
            model_options=model_options,
            dataset_hint=FIGURES_DATASET_HINT,
            declared_by=f"{label or 'the file'}:{declared}" if declared else None,
        )
        name = label or observed.label
        if observed.dataset in observers.setdefault(name, {}):
            raise DataError(f"two decision files for {name} on {observed.dataset}")
        observers[name][observed.dataset] = observed.trials
        published = published_path(str(file))
        where = f"{RAW_DATA_REPOSITORY} {published}" if published else f"{Path(file).name} (not a published file)"
        sources.setdefault(name, {})[observed.dataset] = where
    for model in models:
        observed = observer_trials(model, dataset="cue-conflict", options=options, model_options=model_options)
        observers.setdefault(model, {})["cue-conflict"] = observed.trials
        sources.setdefault(model, {})["cue-conflict"] = f"evaluated now: modelval model {model}"
    return observers, sources


def _condition_figures(
    observers: dict[str, dict[str, list[Decision]]], panels: dict[str, Any], folder: Path, na_handling: str
) -> tuple[dict[str, Any], list[Path]]:
    """Per condition: every observer against the humans (for figures.json), and model-vs-human's line plots
    of the datasets with distortion levels."""
    from modelval.behaviour.conditions import compare_by_condition, humans_by_condition
    from modelval.figures.conditions import write_lines
    from modelval.figures.style import style_indices

    rows = {
        label: {d: compare_by_condition(trials, panels[d], na_handling=na_handling) for d, trials in per.items()}
        for label, per in observers.items()
    }
    parametric = [d for d in panels if len(next(r[d] for r in rows.values() if d in r)) > 1]
    lines = {d: {label: per[d] for label, per in rows.items() if d in per} for d in parametric}
    humans = {d: humans_by_condition(panels[d], na_handling=na_handling) for d in parametric}
    written = write_lines(lines, humans, folder, styles=style_indices(observers))
    payload = {label: {d: [row.to_dict() for row in found] for d, found in per.items()} for label, per in rows.items()}
    return payload, written
