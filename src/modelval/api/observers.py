"""One observer (a model or a decision file) on one experiment: ``observer_trials`` reads or evaluates its
trials, the one path of every observer; ``accuracy`` is its 16-class accuracy, as ``modelval accuracy`` runs it.
Its comparison with the human observers is :mod:`modelval.api.humans`."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelval.api.options import EvaluationOptions, ModelOptions, resolve_options
from modelval.api.pipeline import ModelRun, run_model
from modelval.api.recording import JSONResult, decision_file_provenance, protocol_label
from modelval.behaviour.experiments import DEFAULT_DATASET, get_dataset
from modelval.records.run_store import record_run

if TYPE_CHECKING:
    from modelval.behaviour.accuracy import AccuracyResult
    from modelval.behaviour.conditions import ConditionAccuracy
    from modelval.behaviour.decisions import Decision
    from modelval.preprocessing import PreprocessConfig
    from modelval.records.run_store import RunStore


@dataclass
class ObserverTrials:
    """One observer's trials on one experiment: from a decision CSV, or from evaluating a model."""

    trials: list[Decision]
    dataset: str
    label: str
    run: ModelRun | None = None
    #: What produced the trials: the run's record, or the decision file's path and digest.
    provenance: dict[str, Any] = field(default_factory=dict)


def observer_trials(
    source: Any,
    *,
    dataset: str | None = None,
    preprocess: PreprocessConfig | None = None,
    options: EvaluationOptions | None = None,
    model_options: ModelOptions | None = None,
    dataset_hint: str | None = None,
    declared_by: str | None = None,
) -> ObserverTrials:
    """One observer's trials on one experiment: read from a decision CSV, or made by evaluating a model.

    The common first step of :func:`accuracy`, :func:`compare_with_humans`, :func:`compare` and
    :func:`human_figures`: a decision file is read as it is (its experiment from the image names or the file
    name, unless ``dataset`` says), a model runs through :func:`run_model` on ``dataset``'s stimuli.

    Parameters
    ----------
    source
        A decision CSV path (the published raw-data format), or a model: registry name, spec or ``nn.Module``.
    dataset
        The experiment (``"cue-conflict"``, ``"edges"``, ``"colour"``, ...; default: read from a decision file,
        else ``options.dataset``).
    preprocess
        The preprocessing of an ``nn.Module`` (see :func:`shape_bias`).
    options
        How a model is evaluated (:class:`~modelval.EvaluationOptions`).
    model_options
        How a model is loaded (:class:`~modelval.ModelOptions`).
    dataset_hint
        What the error says to do when a file's experiment cannot be read from its names (default: ``pass
        --dataset NAME``; a command without ``--dataset`` says its own way).
    declared_by
        Who named ``dataset``, for the error when the file's names disagree (default: ``--dataset NAME``).

    Returns
    -------
    ObserverTrials
        ``.trials``, ``.dataset``, ``.label``, the model ``.run`` (``None`` for a file) and ``.provenance``.

    Examples
    --------
    The published VGG-16 on the edge images (``REFERENCE`` is texture-vs-shape's ``raw-data/`` folder):

    >>> import modelval
    >>> observed = modelval.api.observer_trials(REFERENCE / "edge-experiment_vgg_session_1.csv")
    >>> observed.dataset, observed.label, len(observed.trials), observed.run is None
    ('edges', 'vgg', 160, True)
    """
    import dataclasses

    from modelval.behaviour.trials import DATASET_HINT, dataset_of, read_trials

    if isinstance(source, os.PathLike) or (isinstance(source, str) and is_decision_file(source)):
        path = Path(source)
        trials = read_trials(path)
        if dataset is not None:
            get_dataset(dataset)
            _check_declared(trials, dataset, path, declared_by or f"--dataset {dataset}")
            found = dataset
        else:
            found = dataset_of(trials, filename=path.name, hint=dataset_hint or DATASET_HINT)
        return ObserverTrials(trials, found, trials[0].subject or path.stem, provenance=decision_file_provenance(path))
    dataset = get_dataset(dataset or (options.dataset if options is not None else DEFAULT_DATASET)).dataset
    options = dataclasses.replace(options or EvaluationOptions(), dataset=dataset)
    run = run_model(source, preprocess=preprocess, options=options, model_options=model_options)
    trials = [dataclasses.replace(t, subject=run.model) for t in run.evaluation.decisions]
    return ObserverTrials(trials, dataset, run.model, run, run.provenance())


def trial_decisions(trials: list[Decision]) -> dict[str, list[str]]:
    """image -> [true category, response], the run store's per-image decisions.

    Parameters
    ----------
    trials
        An observer's decisions.
    """
    return {t.imagename: [t.category, t.response] for t in trials}


def is_decision_file(text: str) -> bool:
    """Whether ``text`` names a decision file (a ``.csv``, or any file that exists) rather than a model.

    Parameters
    ----------
    text
        A model spec or a path.
    """
    path = Path(text)
    return path.suffix.lower() == ".csv" or path.exists()


def _check_declared(trials: list[Decision], dataset: str, path: Path, declared_by: str) -> None:
    from modelval.behaviour.trials import dataset_of
    from modelval.errors import DataError

    try:
        found = dataset_of(trials, filename=path.name)
    except DataError:
        return  # bare edge/silhouette names: the declared dataset decides
    if found != dataset:
        raise DataError(f"{path}: {declared_by} but the image names are from the {found} experiment")


@dataclass
class AccuracyReport(JSONResult):
    """16-class accuracy of one observer on one experiment, overall and per category."""

    observer: str
    result: AccuracyResult
    run: ModelRun | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    #: A decision file that covers fewer (or more) images than the experiment has: the accuracy is then
    #: not comparable with published values (the command prints it as a warning).
    coverage_warning: str | None = None
    #: Accuracy in each condition (distortion level) the trials cover, in model-vs-human's order.
    conditions: list[ConditionAccuracy] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.result.accuracy

    def to_dict(self) -> dict[str, Any]:
        cache = {"output_cache": self.run.evaluation.output_cache} if self.run is not None else {}
        return {
            "observer": self.observer,
            **self.result.to_dict(),
            "conditions": [row.to_dict() for row in self.conditions],
            **cache,
            "provenance": self.provenance,
        }


def accuracy(
    source: Any,
    *,
    dataset: str | None = None,
    preprocess: PreprocessConfig | None = None,
    options: EvaluationOptions | None = None,
    model_options: ModelOptions | None = None,
    run_store: RunStore | None = None,
    **settings: Any,
) -> AccuracyReport:
    """The 16-class accuracy of a model or a decision CSV on one experiment, as ``modelval accuracy``.

    The fraction of images whose response is the image's category (on cue-conflict: its shape), overall, per
    category and per condition (distortion level), with a Wilson 95% interval. A model runs through
    :func:`run_model` on ``dataset``'s stimuli; a decision file covering fewer images than the experiment has
    gets a ``coverage_warning`` (its accuracy is then not comparable with published values).

    Parameters
    ----------
    source
        A decision CSV, or a model (registry name, spec or ``nn.Module`` with ``preprocess``).
    dataset
        The experiment (default: read from a decision file, else ``options.dataset``).
    preprocess
        The preprocessing of an ``nn.Module`` (see :func:`shape_bias`).
    options
        How a model is evaluated (:class:`~modelval.EvaluationOptions`).
    model_options
        How a model is loaded (:class:`~modelval.ModelOptions`).
    run_store
        Record the run there; ``None`` records nothing.
    **settings
        Single fields of ``options`` or ``model_options``.

    Returns
    -------
    AccuracyReport
        ``.accuracy``, ``.result`` (per category, interval), ``.conditions``; ``.to_dict()`` is the command's JSON.

    Examples
    --------
    A published decision file (``REFERENCE`` is texture-vs-shape's ``raw-data/`` folder); a model spec or
    module runs on the stimuli of ``dataset`` instead:

    >>> import modelval
    >>> report = modelval.accuracy(REFERENCE / "edge-experiment_vgg_session_1.csv")
    >>> report.observer, report.result.dataset, round(report.accuracy, 4)
    ('vgg', 'edges', 0.2437)
    """
    from modelval.behaviour.accuracy import accuracy_of
    from modelval.behaviour.conditions import accuracy_by_condition

    options, model_options = resolve_options(options, model_options, settings)
    observed = observer_trials(
        source, dataset=dataset, preprocess=preprocess, options=options, model_options=model_options
    )
    result = accuracy_of(observed.trials, observed.dataset)
    warning = None
    if observed.run is None:  # a decision file: a file cut at a row boundary still parses
        expected = get_dataset(observed.dataset).images
        if len(observed.trials) != expected:
            warning = (
                f"{source} covers {len(observed.trials)} of the {expected} {observed.dataset} images; the accuracy "
                "is not comparable with published values"
            )
    conditions = accuracy_by_condition(observed.trials, observed.dataset)
    report = AccuracyReport(observed.label, result, observed.run, observed.provenance, warning, conditions)
    summary = {"accuracy": result.accuracy, "correct": result.correct, "images": result.images}
    protocol = protocol_label(dataclasses.replace(options, dataset=observed.dataset))
    record_run(
        run_store,
        "accuracy",
        model=observed.label,
        dataset=observed.dataset,
        summary=summary,
        provenance=observed.provenance,
        decisions=trial_decisions(observed.trials),
        label=protocol,
    )
    return report
