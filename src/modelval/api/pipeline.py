"""One pipeline from a model to its decisions on a stimulus set, shared by every command and by Python.

Order matters and is the same everywhere: an unknown registry name fails first (with suggestions),
then a bad label map, then the stimuli are found and verified, and only then are weights loaded or
downloaded, so a missing data folder never costs a download.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from modelval.api.loading import check_model, load, load_stimuli
from modelval.api.options import EvaluationOptions, ModelOptions
from modelval.errors import ModelvalError

if TYPE_CHECKING:
    import torch

    from modelval.behaviour.label_map import LabelMap
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.evaluation import Evaluation
    from modelval.judgement.preprocessing_check import PreprocessingCheck
    from modelval.judgement.sanity import EarlyDecision
    from modelval.models.entry import LoadedModel
    from modelval.preprocessing import PreprocessConfig
    from modelval.records.output_cache import OutputCache


@dataclass
class ModelRun:
    """A loaded model, its evaluation on a stimulus set and the facts of the run (for reports)."""

    loaded: LoadedModel
    evaluation: Evaluation
    #: The name the model goes by in reports: the spec as given, or the module's ``name``.
    model: str
    facts: dict[str, Any] = field(default_factory=dict)
    options: EvaluationOptions = field(default_factory=EvaluationOptions)
    model_options: ModelOptions = field(default_factory=ModelOptions)
    #: SHA-256 of each stimulus file (by relative path), for saved outputs.
    stimulus_digests: dict[str, str] = field(default_factory=dict)
    stimulus_dataset: str = "cue-conflict"
    #: The sanity gate's verdict from a random sample (``run_model(sanity_probe=True)``), when it was certain.
    #: A failed one means ``evaluation`` covers only that sample: the full run was not needed.
    early_sanity: EarlyDecision | None = None
    #: The declared preprocessing against its near alternatives (``run_model(preprocessing_check=True)`` on a set
    #: with conflict stimuli; ``None``: not checked).
    preprocessing_check: PreprocessingCheck | None = None

    def declared_preprocess(self) -> PreprocessConfig:
        """What the diagnosis holds the run against: the preprocessing the factory, spec or source resolved when
        the run used the model's own normalization (not the registry's default), else the entry's."""
        own = self.options.normalization == "model"
        return (self.loaded.config.preprocess if own else self.loaded.entry.preprocess).for_stimuli(None)

    def provenance(self) -> dict[str, Any]:
        """The record of what produced this run (``"provenance"`` in every result; docs/provenance.md)."""
        from modelval.datasets.manifest import manifest_path
        from modelval.records.provenance import environment, file_digest

        entry, config = self.loaded.entry, self.loaded.config
        record: dict[str, Any] = {**environment(), **self.evaluation.provenance}
        stimuli = dict(record.get("stimuli") or {"dataset": self.stimulus_dataset})
        try:
            stimuli["manifest_sha256"] = file_digest(manifest_path(stimuli["dataset"]))
        except (OSError, KeyError, ModelvalError):
            stimuli["manifest_sha256"] = None
        label_map = self.model_options.label_map
        record.update(
            model={
                "spec": self.model,
                "source": entry.source,
                "weights_url": entry.weights_url or None,
                "checkpoint": config.checkpoint,
                "label_map": None if label_map is None else str(getattr(label_map, "path", label_map)),
            },
            stimuli=stimuli,
            preprocessing=self.preprocessing(),
            protocol={
                "normalization": self.options.normalization,
                "resize": self.options.resize,
                "aggregation": self.options.aggregation,
            },
            threads=self.facts.get("threads"),
        )
        return record

    def detached(self) -> ModelRun:
        """This run without its module (and without the entry's build function): what another process needs to
        judge and report it (a Ray task's or an xdist worker's result), at the size of the outputs, not the weights.
        """
        entry = dataclasses.replace(self.loaded.entry, build=_built_elsewhere, resolve_preprocess=None)
        loaded = dataclasses.replace(self.loaded, entry=entry, model=cast(Any, None), context=None)
        return dataclasses.replace(self, loaded=loaded)

    def preprocessing(self) -> dict[str, object]:
        """The preprocessing applied, and where each value came from."""
        config = self.loaded.config
        return {
            **self.evaluation.config.to_dict(),
            "sources": dict(config.preprocess_sources),
            "native_input_size": config.native_input_size,
        }


def _built_elsewhere(context: Any) -> Any:
    raise ModelvalError("this model run was detached from its module (it ran in another process); load it again")


@contextlib.contextmanager
def prepared(
    model: Any,
    preprocess: PreprocessConfig | None,
    options: EvaluationOptions,
    model_options: ModelOptions,
    *,
    name: str | None = None,
    stimuli: StimulusSet | None = None,
) -> Iterator[tuple[LoadedModel, str, StimulusSet, torch.device, LabelMap | None, int | None]]:
    """The one prologue of every model run (:func:`run_model`, the sensitivity card), in its order: an unknown
    name or a module without its preprocessing fails first, then a bad label map; the device is resolved once;
    the stimuli are found and verified before any weights load (a missing data folder never costs a download);
    then the model loads onto the device. Yields ``(loaded, name, stimuli, device, label map, threads)`` with
    torch's thread setting held for the block.

    Parameters
    ----------
    model, preprocess
        As :func:`run_model` takes them.
    options, model_options
        The run's options.
    name
        The name the model goes by in reports.
    stimuli
        Stimuli already decoded (``None``: found and loaded here).
    """
    from modelval.runtime import resolve_device, torch_threads

    check_model(model, preprocess, model_options.zero_shot)  # an unknown name, a module without preprocessing
    label_map = model_options.read_label_map()  # a bad map fails before anything is loaded
    if stimuli is not None and stimuli.dataset != options.dataset:
        raise ModelvalError(f"the stimuli given are the {stimuli.dataset} set, but options.dataset is "
                            f"{options.dataset}")  # fmt: skip
    device = resolve_device(model_options.device)  # the one place "auto" becomes a device
    with torch_threads(options.threads) as threads:
        if stimuli is None:  # stimuli before weights: a broken data folder fails before any download starts
            stimuli = load_stimuli(options, offline=model_options.offline)
        loaded, label = load(
            model, preprocess=preprocess, normalization=options.normalization, model_options=model_options,
            progress=options.progress, name=name, device=device,
        )  # fmt: skip
        yield loaded, label, stimuli, device, label_map, threads


def run_model(
    model: Any,
    *,
    preprocess: PreprocessConfig | None = None,
    options: EvaluationOptions | None = None,
    model_options: ModelOptions | None = None,
    name: str | None = None,
    sanity_probe: bool = False,
    stimuli: StimulusSet | None = None,
    preprocessing_check: bool = False,
) -> ModelRun:
    """Load a model and evaluate it on a stimulus set: the one pipeline behind every command and front-door call.

    In this order, the same everywhere: an unknown registry name fails first (with suggestions), then a bad label
    map; the stimuli are found, verified against their manifest and decoded (or ``stimuli`` are taken as given);
    the device is resolved once (``model_options.device``, ``"auto"``: CUDA when available); only then is the
    model loaded (weights fetched unless offline) onto that device and evaluated under ``options``: its raw
    outputs (reused from the output cache when stored under the same key), the 1000 -> 16 mapping, per-image
    decisions and the shape bias. With ``sanity_probe`` (cue-conflict) a random sample of the conflict stimuli
    is evaluated first: when it shows for certain that the model is not a working classifier, the run stops
    there and ``evaluation`` covers that sample only; otherwise the full run follows, unchanged.

    Parameters
    ----------
    model
        A registry name or spec (``"efficientnet_lite0"``, ``"timm:resnet50.a1_in1k"``, ...), an ``nn.Module``
        with ``preprocess``, or a :class:`~modelval.models.LoadedModel`.
    preprocess
        The preprocessing an ``nn.Module`` was trained with (:class:`~modelval.PreprocessConfig`).
    options
        The protocol, the stimuli and the machinery (:class:`~modelval.EvaluationOptions`).
    model_options
        How the model is loaded and where it runs (:class:`~modelval.ModelOptions`).
    name
        The name the model goes by in reports (default: the spec, or the module's class name).
    sanity_probe
        Decide the sanity gate early from a random sample (see above).
    stimuli
        Stimuli already decoded (a :class:`~modelval.datasets.stimulus_set.StimulusSet` of ``options.dataset``),
        for a caller that evaluates many models on one set (the validation runner); ``None`` loads them here.
    preprocessing_check
        Hold the declared preprocessing against its near alternatives (channel order, normalization, value
        range) on the conflict stimuli after the full run (:mod:`modelval.judgement.preprocessing_check`).

    Returns
    -------
    ModelRun
        The loaded model, its :class:`~modelval.evaluation.Evaluation`, the run's facts and ``.provenance()``.

    Examples
    --------
    The bundled EfficientNet-Lite0 on ``SUBSET`` (two stimuli per category; a subset is a modified set, so it
    is allowed explicitly):

    >>> import modelval
    >>> options = modelval.EvaluationOptions(data_root=SUBSET, allow_modified_stimuli=True, bootstrap=0)
    >>> run = modelval.run_model("efficientnet_lite0", options=options)
    >>> run.model, len(run.evaluation.decisions), run.evaluation.result.shape_hits, run.evaluation.result.texture_hits
    ('efficientnet_lite0', 32, 3, 15)
    >>> run.provenance()["device"]["type"] in ("cpu", "cuda")
    True
    """
    from modelval.datasets.registry import get_dataset
    from modelval.evaluation import decision_flips, evaluate

    options = options or EvaluationOptions()
    model_options = model_options or ModelOptions()
    with prepared(model, preprocess, options, model_options, name=name, stimuli=stimuli) as ready:
        loaded, label, stimuli, device, label_map, threads = ready
        config = loaded.config.preprocess.for_stimuli(options.resize)
        settings: dict[str, Any] = dict(
            model_name=label,
            batch_size=options.batch_size,
            device=device,
            aggregation=options.aggregation,
            progress=options.progress,
            n_bootstrap=options.bootstrap,
            seed=options.seed,
            resample=options.resample,
            channels_last=options.channels_last,
            label_map=label_map,
        )
        settings["output_cache"] = open_output_cache(options.cache)
        early = None
        gated = sanity_probe and get_dataset(options.dataset).has_conflicts
        if gated and not _outputs_stored(loaded.model, config, stimuli, options, settings):
            # A model whose outputs are stored needs no probe: reading them is cheaper than any sample.
            early, sample = _probe(loaded.model, config, stimuli, options, settings)
            if sample is not None:
                facts = _facts(stimuli, threads, options, sample.output_cache)
                return ModelRun(
                    loaded=loaded, evaluation=sample, model=label, facts=facts, options=options,
                    model_options=model_options, stimulus_digests=stimuli.digests or {},
                    stimulus_dataset=stimuli.dataset, early_sanity=early,
                )  # fmt: skip
        evaluation = evaluate(loaded.model, config, stimuli, amp=options.amp, **settings)  # type: ignore[arg-type]
        facts = _facts(stimuli, threads, options, evaluation.output_cache)
        check = _preprocessing_check(loaded.model, config, stimuli, evaluation, options, settings, preprocessing_check)
        if options.amp:
            # Validation numbers come from fp32; with amp, say how many decisions the cheaper run changed.
            reference = evaluate(loaded.model, config, stimuli, **settings)
            budget = _flip_budget(model, evaluation)
            flips = decision_flips(
                reference.decisions, evaluation.decisions, budget=budget.flip_budget if budget else None,
                budget_entry=budget.entry if budget else None,
            )  # fmt: skip
            facts["amp_flips"] = flips.count
            if flips.budget is not None:
                facts["amp_flip_budget"] = {"flips": flips.budget, "entry": flips.budget_entry or "default"}
            facts["amp_flips_detail"] = flips.flipped[:20]
    return ModelRun(
        loaded=loaded, evaluation=evaluation, model=label, facts=facts, options=options, model_options=model_options,
        stimulus_digests=stimuli.digests or {}, stimulus_dataset=stimuli.dataset, early_sanity=early,
        preprocessing_check=check,
    )  # fmt: skip


def _preprocessing_check(
    model: Any, config: Any, stimuli: StimulusSet, evaluation: Evaluation, options: EvaluationOptions,
    settings: dict[str, Any], wanted: bool,
) -> PreprocessingCheck | None:  # fmt: skip
    """The self-check when ``wanted`` and the set has conflict stimuli (``None`` otherwise)."""
    from modelval.datasets.registry import get_dataset
    from modelval.judgement.preprocessing_check import preprocessing_check

    if not wanted or not get_dataset(options.dataset).has_conflicts:
        return None
    forward = {key: settings[key] for key in ("batch_size", "device", "aggregation", "channels_last", "label_map")}
    return preprocessing_check(model, config, stimuli, evaluation, cache=settings["output_cache"], amp=options.amp,
                               **forward)  # fmt: skip


def _flip_budget(model: Any, evaluation: Any) -> Any:
    """A registered model's expectation for the evaluation's device and dtype, when it states a flip budget."""
    from modelval.judgement.expected import expected_for

    expected = expected_for(model) if isinstance(model, str) else None
    resolved = expected.for_evaluation(evaluation) if expected is not None else None
    return resolved if resolved is not None and resolved.flip_budget is not None else None


def open_output_cache(enabled: bool | None) -> OutputCache | None:
    """The per-user output cache, or ``None`` when turned off (``enabled=False`` or ``$MODELVAL_NO_CACHE``).

    Parameters
    ----------
    enabled
        Whether to cache (``None``: unless ``$MODELVAL_NO_CACHE``).
    """
    from modelval.records.output_cache import OutputCache
    from modelval.records.store import cache_on

    return OutputCache() if cache_on(enabled) else None


def _outputs_stored(
    model: Any, config: Any, stimuli: StimulusSet, options: EvaluationOptions, settings: dict[str, Any]
) -> bool:
    """Whether the output cache holds this run's outputs complete (then the sanity probe is skipped)."""
    from modelval.evaluation import Amp, output_key

    cache = settings.get("output_cache")
    if cache is None:
        return False
    amp = cast(Amp | None, options.amp)
    key = output_key(model, config, stimuli, amp=amp, device=settings["device"], channels_last=options.channels_last)[0]
    return key is not None and cache.contains(key)


def decode_cache_entry(stimuli: StimulusSet) -> dict[str, str] | None:
    """Which decode-cache entry a run read or wrote, and when it was stored (``None`` when the cache was off or
    nothing was decoded). A hit on what feels like a first run is real: any earlier run that decoded these stimuli
    stored them (another model, another command); the entry's time says when.

    Parameters
    ----------
    stimuli
        The loaded stimulus set.
    """
    if stimuli.cache_status not in ("hit", "miss", "rebuilt") or stimuli.digests is None:
        return None
    from datetime import datetime

    from modelval.datasets.cache import DecodeCache, cache_key

    path = DecodeCache().root / f"{cache_key(stimuli.root, stimuli.stimuli, stimuli.digests)}.npy"
    try:
        stored = datetime.fromtimestamp(path.stat().st_mtime).astimezone().isoformat(timespec="seconds")
    except OSError:  # not written (a cache folder that cannot be written only costs the speed-up)
        return {"path": str(path), "stored": "not stored"}
    return {"path": str(path), "stored": stored}


def _facts(stimuli: StimulusSet, threads: int | None, options: EvaluationOptions, cache: str) -> dict[str, Any]:
    return {
        "stimuli": stimuli.verification,
        "threads": threads if threads is not None else _current_threads(),
        "decode_cache": stimuli.cache_status,
        "decode_cache_entry": decode_cache_entry(stimuli),
        "output_cache": cache,
        "precision": options.amp or "fp32",
    }


def _probe(
    model: Any, config: Any, stimuli: StimulusSet, options: EvaluationOptions, settings: dict[str, Any]
) -> tuple[EarlyDecision | None, Evaluation | None]:
    """The sanity probe: ``(decision, evaluation of the sample if it failed the model, else None)``."""
    import time

    from modelval.behaviour.shape_bias import compute_shape_bias
    from modelval.evaluation import Evaluation, decisions_from_probabilities
    from modelval.judgement.sanity import probe_sanity

    start = time.perf_counter()
    forward = {key: settings[key] for key in ("batch_size", "device", "aggregation", "channels_last", "label_map")}
    probe = probe_sanity(model, config, stimuli, amp=options.amp, **forward)
    if probe is None or probe.decision is None or probe.decision.passed:
        return (None if probe is None else probe.decision), None
    sample = [stimuli.stimuli[int(i)] for i in probe.positions]
    decisions = decisions_from_probabilities(sample, probe.probabilities)
    seconds = time.perf_counter() - start
    return probe.decision, Evaluation(
        model_name=settings["model_name"],
        config=config,
        aggregation=settings["aggregation"],
        stimuli=sample,
        category_probabilities=probe.probabilities,
        decisions=decisions,
        result=compute_shape_bias(decisions, n_bootstrap=0),
        timings={"model_and_mapping": seconds, "total": seconds},
        amp=options.amp,
        output_cache="off: the model failed the sanity gate on a sample (its outputs on the sample are not stored)",
        provenance={
            "stimuli": {
                "dataset": stimuli.dataset,
                "images": len(sample),
                "sampled_from": len(stimuli),
                "verification": stimuli.verification,
            }
        },
    )


def _current_threads() -> int:
    import torch

    return int(torch.get_num_threads())
