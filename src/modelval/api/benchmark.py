"""``modelval.benchmark``: model-vs-human's benchmark table for decision files and models (``modelval benchmark``).

Decision files each give one observer on one dataset (read from the image names); a model (a spec, a
registry name or an ``nn.Module``) is evaluated on every dataset asked for, through the same pipeline,
preprocessing and sanity gate as ``shape-bias``. The gate needs cue-conflict: a model is evaluated on it
even when it is not among the datasets (it then stays out of the table), unless ``sanity_gate=False``.
The human decisions of every dataset are found before any model is evaluated.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelval import jsonio
from modelval.api.options import EvaluationOptions, ModelOptions, resolve_options
from modelval.errors import ModelvalError

if TYPE_CHECKING:
    from modelval.api.pipeline import ModelRun
    from modelval.behaviour.benchmark import BenchmarkTable, ModelMetadata
    from modelval.behaviour.consistency import TrialPlan
    from modelval.behaviour.decisions import Decision
    from modelval.judgement.sanity import Sanity
    from modelval.preprocessing import PreprocessConfig

PathLike = str | os.PathLike[str]
#: What to do when a decision file's experiment cannot be read from its names (``benchmark`` has no --dataset).
DECISIONS_HINT = "give the file as --decisions LABEL:DATASET=FILE (from Python: (file, dataset))"


@dataclass
class BenchmarkReport:
    """The benchmark table, the trials behind it, and for models their runs and sanity checks."""

    table: BenchmarkTable
    trials: dict[str, dict[str, list[Decision]]]
    reference_dirs: dict[str, Path]
    runs: dict[str, dict[str, ModelRun]] = field(default_factory=dict)
    #: dataset -> the human files against the published manifest: "verified" or "modified: ..." (allowed).
    reference_data: dict[str, str] = field(default_factory=dict)
    sanity: dict[str, Sanity] = field(default_factory=dict)
    gated: bool = True

    @property
    def failed_gate(self) -> list[str]:
        """Models that are not working classifiers (cue-conflict accuracy below the gate), when gated."""
        return [label for label, check in self.sanity.items() if self.gated and not check.passed]

    def to_dict(self) -> dict[str, Any]:
        from modelval.judgement.sanity import VERDICT

        payload = self.table.to_dict()
        payload["reference_dirs"] = {d: str(path) for d, path in self.reference_dirs.items()}
        payload["reference_data"] = dict(self.reference_data)
        if self.sanity:
            payload["sanity"] = {label: check.to_dict() for label, check in self.sanity.items()}
        if self.failed_gate:
            payload["verdict"] = {label: VERDICT for label in self.failed_gate}
        return payload

    def to_json(self, indent: int | None = 2) -> str:
        """The report as JSON text.

        Parameters
        ----------
        indent
            JSON indentation (``None``: one line).
        """
        return jsonio.dumps(self.to_dict(), indent=indent)

    def to_markdown(self) -> str:
        from modelval.behaviour.benchmark_text import benchmark_markdown

        return benchmark_markdown(self.table)

    def to_csv(self) -> str:
        from modelval.behaviour.benchmark_text import benchmark_csv

        return benchmark_csv(self.table)


def benchmark(
    decisions: Mapping[str, Sequence[PathLike | tuple[PathLike, str]]] | Sequence[PathLike] = (),
    models: Sequence[Any] = (),
    *,
    datasets: Sequence[str] | None = None,
    reference_dir: PathLike | None = None,
    all_conditions: bool = False,
    na_handling: str = "wrong",
    brain_score: bool = False,
    degenerate_kappa: str = "one",
    allow_modified_reference: bool = False,
    metadata: PathLike | Mapping[str, Mapping[str, Any]] | None = None,
    sanity_gate: bool = True,
    preprocess: PreprocessConfig | None = None,
    options: EvaluationOptions | None = None,
    model_options: ModelOptions | None = None,
    **settings: Any,
) -> BenchmarkReport:
    """model-vs-human's benchmark (:mod:`modelval.behaviour.benchmark`) of decision files and models.

    Every dataset's human files are checked against the published manifest before anything is evaluated. An
    evaluated model's parameters are counted from its module and its training data is what its registry entry
    or timm tag states (``metadata`` overrides), and a decision file whose label is a registry name gets that
    entry's.

    Parameters
    ----------
    decisions
        Decision CSVs (the label is the file's ``subj``), or ``{label: [files]}``; each file is one dataset, read
        from its image names or its file name (model-vs-human's ``edge_...``), or given as ``(file, dataset)``.
    models
        Models to evaluate on each dataset (specs, modules or loaded models).
    datasets
        The datasets (default: the 17, in model-vs-human's order; ``options.data_root`` only with one).
    reference_dir
        The human decisions (default: the data home's ``reference/``, else the user cache).
    all_conditions
        Keep the conditions model-vs-human's benchmark leaves out.
    na_handling
        How a missing answer counts: ``wrong`` or ``exclude``.
    brain_score
        Add Brain-Score's Geirhos2021 ceiled error consistency.
    degenerate_kappa
        A kappa cell where an observer is always right or always wrong: ``one`` (model-vs-human's rule) or
        ``nan`` (left out).
    allow_modified_reference
        Accept human files that differ from the manifest (the report's ``reference_data`` says what differs).
    metadata
        Observers' parameters and training data: a JSON or CSV file, or ``{label: {field: value}}``
        (:func:`read_metadata`).
    sanity_gate
        Withhold the numbers of a model that is not a working classifier.
    preprocess
        The preprocessing of an ``nn.Module`` given in ``models``.
    options
        The evaluation options: ``bootstrap`` resamples give every value an interval and every rank a rank
        interval, ``permutations`` sign flips test every pair of complete observers, with ``seed``.
    model_options
        How the models are loaded.
    **settings
        Single options of ``options`` or ``model_options`` (``device="cpu"``).
    """
    from modelval.api.observers import observer_trials
    from modelval.behaviour.benchmark import benchmark_table
    from modelval.behaviour.benchmark_cells import check_degenerate_kappa
    from modelval.behaviour.consistency import check_na_handling
    from modelval.behaviour.experiments import BENCHMARK_DATASETS, experiment
    from modelval.behaviour.humans import load_human_panel
    from modelval.datasets.human_data import human_data_dir
    from modelval.datasets.reference import verify_reference_dir
    from modelval.errors import DataError

    options, model_options = resolve_options(options, model_options, settings)
    check_na_handling(na_handling)
    check_degenerate_kappa(degenerate_kappa)
    chosen = tuple(experiment(d).dataset for d in datasets) if datasets else BENCHMARK_DATASETS
    labelled = _labelled(decisions, models, options, chosen)
    observers: dict[str, dict[str, list[Decision]]] = {}
    sources: dict[str, dict[str, str]] = {}

    def add(label: str, dataset: str, trials: list[Decision], source: str) -> None:
        per = observers.setdefault(label, {})
        if dataset in per:
            raise DataError(f"two sets of decisions for {label} on {dataset}")
        per[dataset] = trials
        sources.setdefault(label, {})[dataset] = source

    for label, files in labelled.items():
        for entry in files:
            file, declared = entry if isinstance(entry, tuple) else (entry, None)
            observed = observer_trials(
                Path(file), dataset=declared, dataset_hint=DECISIONS_HINT,
                declared_by=f"{label or 'the file'}:{declared}" if declared else None,
            )  # fmt: skip
            add(label or observed.label, observed.dataset, observed.trials, str(file))
    needed = sorted({d for per in observers.values() for d in per} | (set(chosen) if models else set()))
    # before any model is evaluated: every dataset's humans found and checked against the manifest
    reference_dirs = {d: human_data_dir(d, reference_dir) for d in needed}
    reference_data = {
        d: verify_reference_dir(reference_dirs[d], d, allow_modified=allow_modified_reference) for d in needed
    }
    runs: dict[str, dict[str, ModelRun]] = {}
    sanity: dict[str, Sanity] = {}
    for model in models:
        label, model_runs, check = _evaluate(model, chosen, sanity_gate, preprocess, options, model_options)
        runs[label] = model_runs
        if check is not None:
            sanity[label] = check
        for dataset in chosen:
            trials = [dataclasses.replace(t, subject=label) for t in model_runs[dataset].evaluation.decisions]
            add(label, dataset, trials, f"evaluated now: {label}")
    panels = {d: load_human_panel(reference_dirs[d], d) for d in needed}
    described = _observer_metadata(observers, runs, metadata)
    table = benchmark_table(
        observers, panels, all_conditions=all_conditions, na_handling=na_handling, with_brain_score=brain_score,
        sources=sources, degenerate_kappa=degenerate_kappa, n_bootstrap=options.bootstrap, seed=options.seed,
        permutations=options.permutations, metadata=described,
    )  # fmt: skip
    return BenchmarkReport(table, observers, reference_dirs, runs, reference_data, sanity, sanity_gate)


def _labelled(
    decisions: Mapping[str, Sequence[PathLike | tuple[PathLike, str]]] | Sequence[PathLike],
    models: Sequence[Any],
    options: EvaluationOptions,
    chosen: tuple[str, ...],
) -> dict[str, list[PathLike | tuple[PathLike, str]]]:
    """``{label: files}`` of :func:`benchmark`'s ``decisions`` (label ``""``: each file's own), or why not."""
    if isinstance(decisions, str | os.PathLike):
        decisions = [decisions]  # one file, not its characters
    labelled: dict[str, list[PathLike | tuple[PathLike, str]]] = (
        {k: list(v) for k, v in decisions.items()} if isinstance(decisions, Mapping) else {"": list(decisions)}
    )
    if not any(labelled.values()) and not models:
        raise ModelvalError("give at least one decision file or model to benchmark")
    if models and options.data_root is not None and len(chosen) > 1:
        raise ModelvalError(
            "a data root names one dataset's folder; with several datasets name the data home instead, the folder "
            "with one sub-folder per dataset (MODELVAL_DATA_HOME=DIR; on the command line --data-home DIR), or "
            "fetch them into the user cache"
        )
    return labelled


def read_metadata(source: PathLike | Mapping[str, Mapping[str, Any]]) -> dict[str, ModelMetadata]:
    """Observers' parameters and training data from a JSON or CSV file (``--metadata``), or a mapping.

    JSON: ``{"LABEL": {"parameters": 25557032, "training_images": 1281167, "training_data": "ImageNet-1k",
    "training_kind": "supervised"}, ...}``; CSV: a ``label`` column and any of those four (an empty cell is
    not known). Every field is optional; ``source`` may say where the values are from (default: the file).
    Numbers may be written ``1.28e6`` but must be whole and positive.

    Parameters
    ----------
    source
        A JSON or CSV file, or the values themselves.
    """
    import csv
    import json

    from modelval.behaviour.benchmark import ModelMetadata
    from modelval.errors import DataError

    if isinstance(source, Mapping):
        rows, where, origin = dict(source), "metadata", "metadata given"
    else:
        path = Path(source)
        where = str(path)
        origin = f"metadata file {path.name}"
        try:
            text = path.read_text()
        except OSError as error:
            raise DataError(f"cannot read the metadata file {path}: {error.strerror or error}") from None
        if path.suffix.lower() == ".json":
            try:
                rows = json.loads(text)
            except ValueError as error:
                raise DataError(f"{path}: not valid JSON ({error})") from None
            if not isinstance(rows, dict) or not all(isinstance(v, dict) for v in rows.values()):
                raise DataError(f'{path}: give one object {{"LABEL": {{"parameters": ..., ...}}, ...}}')
        elif path.suffix.lower() == ".csv":
            table = list(csv.DictReader(text.splitlines()))
            if not table or "label" not in table[0]:
                raise DataError(f"{path}: a CSV with a 'label' column and the fields of each observer")
            rows = {}
            for row in table:
                label = (row.pop("label") or "").strip()
                if not label or label in rows:
                    raise DataError(f"{path}: every row names a label, each once (got {label!r})")
                rows[label] = row
        else:
            raise DataError(f"{path}: a metadata file is .json or .csv")
    return {
        str(label): ModelMetadata.from_mapping(values, source=origin, where=f"{where}: {label}")
        for label, values in rows.items()
    }


def _observer_metadata(
    observers: Mapping[str, Any],
    runs: Mapping[str, Mapping[str, ModelRun]],
    given: PathLike | Mapping[str, Mapping[str, Any]] | None,
) -> dict[str, ModelMetadata]:
    """Each observer's metadata: what ``given`` states, completed by what the model itself tells (an evaluated
    model's parameters counted from its module, its entry's training data) or, for a decision file whose label
    is a registry name, by that entry."""
    from modelval.behaviour.benchmark import ModelMetadata
    from modelval.errors import DataError
    from modelval.models.entry import ModelEntry
    from modelval.models.registry import list_models

    stated = read_metadata(given) if given is not None else {}
    strangers = sorted(set(stated) - set(observers))
    if strangers:
        raise DataError(
            f"metadata for {', '.join(strangers)}, which no observer of the table is called (the observers: "
            f"{', '.join(observers)}); use the labels the table uses"
        )
    found: dict[str, ModelMetadata] = {}
    for label in observers:
        entry: ModelEntry | None
        own = stated.get(label, ModelMetadata())
        model_runs = runs.get(label)
        if model_runs:
            loaded = next(iter(model_runs.values())).loaded
            counted = sum(p.numel() for p in loaded.model.parameters())
            entry = loaded.entry
            own = own.filled_from(ModelMetadata(parameters=counted, source="parameters counted from the module"))
        else:
            entry = next((e for e in list_models() if label in (e.name, e.label)), None)
        if entry is not None:
            training = entry.training
            stated_by_entry = ModelMetadata(
                parameters=entry.parameters if not model_runs else None,
                training_images=training.images if training else None,
                training_data=training.data if training else "",
                training_kind=training.kind if training else "",
                source=(training.source if training and training.source else f"registry entry {entry.name}"),
            )
            own = own.filled_from(stated_by_entry)
        if not own.empty:
            found[label] = own
    return found


def _evaluate(
    model: Any,
    datasets: Sequence[str],
    sanity_gate: bool,
    preprocess: PreprocessConfig | None,
    options: EvaluationOptions,
    model_options: ModelOptions,
) -> tuple[str, dict[str, ModelRun], Sanity | None]:
    """The model's runs on ``datasets`` and, when gated, its sanity check on cue-conflict.

    Every stimulus folder is found first (cue-conflict fetched if missing; the others are fetched on request
    only), so a missing folder fails before weights are loaded or a model is evaluated.
    """
    from modelval.api.pipeline import run_model
    from modelval.behaviour.experiments import DEFAULT_DATASET, experiment
    from modelval.datasets.fetch import ensure_stimuli
    from modelval.judgement.sanity import sanity_check

    gated = sanity_gate and not any(experiment(d).has_conflicts for d in datasets)  # the gate reads a shape bias
    wanted = [*datasets, *([DEFAULT_DATASET] if gated else [])]
    roots = {d: options.data_root if d in datasets else None for d in wanted}
    for dataset in wanted:
        ensure_stimuli(roots[dataset], dataset=dataset, offline=model_options.offline, progress=options.progress)
    runs: dict[str, ModelRun] = {}
    for dataset in wanted:
        source = model if not runs else next(iter(runs.values())).loaded  # loaded once, evaluated on each set
        name = None if not runs else next(iter(runs.values())).model
        runs[dataset] = run_model(
            source,
            preprocess=preprocess if not runs else None,
            options=dataclasses.replace(options, dataset=dataset, data_root=roots[dataset]),
            model_options=model_options,
            name=name,
        )
    label = next(iter(runs.values())).model
    conflicts = next((d for d in runs if experiment(d).has_conflicts), None)
    check = sanity_check(runs[conflicts].evaluation.result) if conflicts else None
    return label, {d: runs[d] for d in datasets}, check


def plan_trials(
    accuracies: Sequence[float],
    kappa: float,
    difference: float,
    *,
    power: float = 0.8,
    alpha: float = 0.05,
    design: str = "two-sample",
) -> TrialPlan:
    """How many trials a stimulus set needs to tell a difference in error consistency at a given power.

    Klein et al. (NeurIPS 2025) plan trial counts from the sampling distribution of kappa at the observers'
    accuracies; :func:`modelval.behaviour.consistency.trials_for_kappa_difference` does it with the
    large-sample (delta-method) variance of kappa on the 2x2 table of the two observers' correctness and the
    two-sided normal test. Impossible inputs are refused with what would be possible.

    Parameters
    ----------
    accuracies
        The two observers' accuracies ``(p1, p2)``, each in (0, 1) (a model's and a human's, say).
    kappa
        The error consistency to start from; with ``kappa + difference`` it must lie in the range two
        observers of these accuracies can have (:func:`modelval.behaviour.consistency.kappa_range`).
    difference
        The difference in kappa to tell (not 0).
    power
        The probability of telling it, in (0, 1).
    alpha
        The two-sided test's level, in (0, 1).
    design
        ``"two-sample"``: two observer pairs (two models against the same human), each on that many trials
        of its own; ``"one-sample"``: one pair, kappa tested against the value ``kappa`` (e.g. 0).

    Returns
    -------
    TrialPlan
        ``.trials`` (per pair), with the inputs; ``.to_dict()`` for JSON.

    Raises
    ------
    modelval.ModelvalError
        An accuracy, power or alpha outside (0, 1), a difference of 0, an unknown design, or a kappa that
        observers of these accuracies cannot have (the message gives the feasible range).

    Examples
    --------
    >>> from modelval.api.benchmark import plan_trials
    >>> plan_trials((0.7, 0.75), 0.1, 0.1).trials  # two models against a human: kappa 0.1 vs 0.2
    1687
    >>> plan_trials((0.7, 0.75), 0.0, 0.1, design="one-sample").trials  # Klein et al.'s example: 0.1 vs none
    791
    >>> plan_trials((0.9, 0.3), 0.05, 0.1)
    Traceback (most recent call last):
    ...
    modelval.errors.ModelvalError: kappa + difference = 0.15 is impossible for observers of accuracies 0.9 and 0.3: ...
    """
    from modelval.behaviour.consistency import kappa_range, trials_for_kappa_difference

    values = [float(a) for a in accuracies]
    if len(values) != 2:
        raise ModelvalError(f"give the two observers' accuracies, got {len(values)} value(s)")
    p1, p2 = values
    for name, value in (("accuracy", p1), ("accuracy", p2), ("power", power), ("alpha", alpha)):
        if not 0 < value < 1:
            raise ModelvalError(f"{name} must lie strictly between 0 and 1, got {value:g}")
    if design not in ("one-sample", "two-sample"):
        raise ModelvalError(f"design is one-sample or two-sample, got {design!r}")
    if difference == 0 or not math.isfinite(difference) or not math.isfinite(kappa):
        raise ModelvalError("the kappa and the difference are finite numbers and the difference is not 0")
    low, high = kappa_range(p1, p2)
    for name, value in (("kappa", kappa), ("kappa + difference =", kappa + difference)):
        if not low - 1e-12 <= value <= high + 1e-12:
            raise ModelvalError(
                f"{name} {value:.4g} is impossible for observers of accuracies {p1:g} and {p2:g}: their kappa lies in "
                f"[{low:.4f}, {high:.4f}]; choose a kappa and difference inside it"
            )
    return trials_for_kappa_difference(p1, p2, kappa, difference, power=power, alpha=alpha, design=design)
