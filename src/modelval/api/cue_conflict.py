"""The shape bias on the cue-conflict stimuli (``shape_bias``, ``shape_bias_of_decisions``) and its
sensitivity to the protocol (``sensitivity``), as ``modelval shape-bias`` and ``modelval sensitivity`` run them.

Every function runs exactly what the matching command runs (the same protocol, sanity gate, label map
and spec options), so a notebook and ``modelval <command> --json`` give the same numbers. Results have
``.to_dict()`` (the command's JSON object) and ``.to_json()`` (strict JSON text).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelval import jsonio
from modelval.api.options import EvaluationOptions, ModelOptions, resolve_options
from modelval.api.pipeline import ModelRun, run_model
from modelval.api.recording import JSONResult, decision_file_provenance, protocol_label
from modelval.errors import DataError
from modelval.records.run_store import record_run

if TYPE_CHECKING:
    from modelval.behaviour.decisions import Decision
    from modelval.behaviour.shape_bias import ShapeBiasResult
    from modelval.judgement.rows import ReportRow
    from modelval.judgement.sanity import Sanity
    from modelval.preprocessing import PreprocessConfig
    from modelval.records.run_store import RunStore


@dataclass
class ShapeBiasReport(JSONResult):
    """The shape bias of one observer (a model or a decision file), with its expected value and sanity check."""

    row: ReportRow
    sanity: Sanity
    decisions: list[Decision]
    #: Run facts for the report: preprocessing and its sources, the stimuli check, threads, timings, ...
    details: dict[str, Any] = field(default_factory=dict)
    #: Whether a failed sanity check withholds the verdict (``sanity_gate=False`` reports it anyway).
    gated: bool = True
    #: The model run behind the report (``None`` for a decision file): its outputs can be saved and re-scored.
    run: ModelRun | None = field(default=None, repr=False)

    @property
    def result(self) -> ShapeBiasResult:
        return self.row.result

    @property
    def shape_bias(self) -> float:
        """The shape bias. When the gate withholds it (not a working classifier: see ``sanity``), reading it
        raises :class:`~modelval.judgement.rows.ShapeBiasWithheld` with the reason (``result.shape_bias`` is the
        raw computation, ungated)."""
        return self.row.shape_bias

    @property
    def gate_failed(self) -> bool:
        """The model is not a working classifier and the gate is on: the number is not a result."""
        return self.gated and not self.sanity.passed

    def to_dict(self) -> dict[str, Any]:
        payload: dict[str, Any] = {**self.row.to_dict(), **self.details, "sanity": self.sanity.to_dict()}
        if self.result.shape_hits + self.result.texture_hits == 0:
            why = jsonio.Undefined("no shape or texture hits among the conflict images: the shape bias is 0/0")
            payload.update({key: why for key in ("shape_bias", "difference") if key in payload})
        return payload


def _mapped_conflicts(
    decisions: list[Decision], unmapped: tuple[str, ...], options: EvaluationOptions, withheld: str | None
) -> dict[str, Any]:
    """The shape bias over the conflict stimuli whose shape and texture the head can both answer."""
    from modelval.behaviour.resampling import DEFAULT_RESAMPLING
    from modelval.behaviour.shape_bias import compute_shape_bias

    kept = [d for d in decisions if d.shape not in unmapped and d.texture not in unmapped]
    result = compute_shape_bias(
        kept, n_bootstrap=options.bootstrap, seed=options.seed, resample=options.resample or DEFAULT_RESAMPLING
    )
    value: Any = jsonio.Undefined(withheld) if withheld else result.shape_bias
    interval: list[Any] = [value, value] if withheld else [result.ci_low, result.ci_high]
    return {
        "shape_bias": value,
        "ci95": interval,
        "shape_hits": result.shape_hits,
        "texture_hits": result.texture_hits,
        "conflict_images": result.conflict_images,
        "note": f"over the {result.conflict_images} conflict stimuli whose shape and texture categories both "
        f"have outputs; the overall shape_bias also counts the conflicts with {', '.join(unmapped)}, which this "
        "head can never answer, so it is not comparable with a 16-class shape bias",
    }


def shape_bias(
    model: Any,
    *,
    preprocess: PreprocessConfig | None = None,
    options: EvaluationOptions | None = None,
    model_options: ModelOptions | None = None,
    sanity_gate: bool = True,
    early_gate: bool = True,
    name: str | None = None,
    run_store: RunStore | None = None,
    **settings: Any,
) -> ShapeBiasReport:
    """Cue-conflict shape bias of a model (Geirhos et al., ICLR 2019), as ``modelval shape-bias --model``.

    The shape bias is shape hits / (shape hits + texture hits) over the conflict stimuli (shape and texture
    from different categories), with the model's 16 decisions read from its ImageNet-1k softmax by the **mean**
    of each category's classes (model-vs-human's protocol: the 224 px stimuli as they are, the model's own
    normalization). The 95% interval is a percentile bootstrap that resamples the texture source images
    (``options.resample``; ``options.bootstrap`` resamples, ``options.seed``). The model runs through
    :func:`run_model`, the one pipeline of every command: the stimuli are verified, the device is resolved once,
    stored outputs are reused (the output cache) and the sanity gate is applied.

    Parameters
    ----------
    model
        A registry name or spec (``"efficientnet_lite0"``, ``"timm:resnet50.a1_in1k"``, ``"hf:..."``,
        ``"path/to/file.py:build"``, ...; see docs/models.md), an ``nn.Module`` with ``preprocess``, or a
        :class:`~modelval.models.LoadedModel`.
    preprocess
        The preprocessing an ``nn.Module`` was trained with (a :class:`~modelval.PreprocessConfig`); a spec
        brings its own.
    options
        How the model is run: the protocol (``normalization``, ``resize``, ``aggregation``), the stimuli
        (``data_root``), the statistics (``bootstrap``, ``seed``, ``resample``) and the machinery
        (:class:`~modelval.EvaluationOptions`).
    model_options
        How a spec is loaded: ``device`` (default ``"auto"``: CUDA when available), weights, label map,
        preprocessing overrides (:class:`~modelval.ModelOptions`).
    sanity_gate
        Withhold the shape bias of a model that is not a working classifier (cue-conflict accuracy below 30%).
    early_gate
        First evaluate a random sample of the conflict stimuli, and stop there when it already shows for
        certain (an exact hypergeometric bound) that the model fails the gate; a passing model's decisions
        are unchanged.
    name
        The name the model goes by in the report (default: the spec, or the module's class name).
    run_store
        Record the run there (``modelval runs``); ``None`` (the library default) records nothing, the command
        line passes the per-user store.
    **settings
        Single fields of ``options`` or ``model_options`` (``normalization="imagenet"``, ``device="cuda"``,
        ``data_root=...``); an unknown one is a ``TypeError`` listing them.

    Returns
    -------
    ShapeBiasReport
        ``.shape_bias``, ``.result`` (hits, per category, interval), ``.sanity``, ``.decisions``, the run facts
        and provenance; ``.to_dict()`` is ``modelval shape-bias --json``. Reading ``.shape_bias`` of a model the
        gate withholds raises :class:`~modelval.judgement.rows.ShapeBiasWithheld` with the reason (``.result``
        keeps the raw computation).

    Raises
    ------
    modelval.ModelvalError
        An unknown model, missing stimuli or weights, a module without ``preprocess``, or a model whose
        outputs are no classifier's (one line each).

    Examples
    --------
    The bundled EfficientNet-Lite0 on the published 1280 stimuli (``STIMULI`` is the cue-conflict folder; leave
    ``data_root`` out to use the data home (``$MODELVAL_DATA_HOME``) or the per-user cache, filled on first use):

    >>> import modelval
    >>> report = modelval.shape_bias("efficientnet_lite0", data_root=STIMULI)
    >>> round(report.shape_bias, 4), report.result.shape_hits, report.result.texture_hits
    (0.2394, 197, 626)
    >>> report.sanity.passed  # a working classifier: cue-conflict accuracy above the 30% gate
    True

    An untrained network is no classifier: its shape bias is withheld, and reading it says why (here on
    ``SUBSET``, two stimuli per category):

    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> untrained = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(48, 1000))
    >>> broken = modelval.shape_bias(untrained, preprocess=modelval.PreprocessConfig(), data_root=SUBSET,
    ...                              allow_modified_stimuli=True, bootstrap=0)
    >>> broken.sanity.passed, broken.sanity.cue_accuracy
    (False, 0.1)
    >>> broken.shape_bias
    Traceback (most recent call last):
    ...
    modelval.judgement.rows.ShapeBiasWithheld: Sequential (model (imagenet)): no shape bias, withheld: NOT A ...
    """

    from modelval.judgement.expected import expected_for
    from modelval.judgement.rows import ReportRow
    from modelval.judgement.sanity import sanity_of
    from modelval.judgement.verdicts import Case, judge

    options, model_options = resolve_options(options, model_options, settings)
    run = run_model(
        model,
        preprocess=preprocess,
        options=options,
        model_options=model_options,
        name=name,
        sanity_probe=sanity_gate and early_gate,
        preprocessing_check=sanity_gate and options.normalization == "model",  # the check holds the declared one
    )
    loaded, evaluation = run.loaded, run.evaluation
    normalization = f"{options.normalization} ({evaluation.config.normalization_name})"
    expected = expected_for(run.model) if isinstance(model, str) else None
    if expected is not None:  # keyed by device and dtype: the entry of this run's setting
        expected = expected.for_evaluation(evaluation)
    entry = loaded.entry
    read_map = model_options.read_label_map()
    unmapped = read_map.unmapped if read_map is not None else ()
    row = ReportRow(
        run.model, entry.display_name, entry.source, normalization, evaluation.result, expected, unmapped=unmapped,
        provenance=run.provenance(),
    )  # fmt: skip
    if expected is not None and expected.value is None and expected.baseline and not unmapped:
        row.baseline = _committed(expected.baseline, evaluation, options)
    sanity = sanity_of(evaluation.result, run.early_sanity)  # the sample's verdict when the run stopped there
    row.verdict = judge(Case(
        name=run.model, result=evaluation.result, decisions=evaluation.decisions, expected=expected,
        sanity=sanity if sanity_gate else None, source=entry.source, config=evaluation.config,
        reference=run.declared_preprocess(), baseline=row.baseline, preprocessing=run.preprocessing_check,
    ))  # fmt: skip
    label_map = model_options.label_map
    if label_map is not None and not isinstance(label_map, str | os.PathLike):
        label_map = "given as a LabelMap"
    details = {
        "preprocessing": run.preprocessing(),
        "spec": run.model,
        "checkpoint": loaded.config.checkpoint,
        "audit": list(loaded.config.audit_notes),
        "label_map": None if label_map is None else str(label_map),
        "aggregation": options.aggregation,
        "images": len(evaluation.stimuli),
        "seconds": round(evaluation.timings["total"], 2),
        "preprocessing_check": _check_record(run, sanity_gate),
        **run.facts,
    }
    if unmapped:
        details["unmapped_categories"] = list(unmapped)
        details["mapped_conflicts"] = _mapped_conflicts(evaluation.decisions, unmapped, options, row.withheld)
    report = ShapeBiasReport(row, sanity, evaluation.decisions, details, gated=sanity_gate, run=run)
    summary = row.summary()  # a withheld number is null with its reason in the store too
    decisions = {d.imagename: [d.shape, d.response] for d in evaluation.decisions}
    protocol = protocol_label(options)
    report.details["run_id"] = record_run(
        run_store, "shape-bias", model=run.model, dataset=options.dataset, summary=summary,
        provenance=row.provenance, decisions=decisions, label=protocol,
    )  # fmt: skip
    return report


def _committed(relpath: str, evaluation: Any, options: EvaluationOptions) -> Any:
    """The registry's committed baseline held against the run, when it was made under the run's protocol."""
    from modelval.judgement.committed import committed_baseline
    from modelval.judgement.verdicts import MAX_BASELINE_FLIPS

    used = {key: str(getattr(options, key)) for key in ("normalization", "resize", "aggregation", "dataset")}
    return committed_baseline(relpath, evaluation.decisions, used, max_flips=MAX_BASELINE_FLIPS,
                              preprocessing=evaluation.config.to_dict())  # fmt: skip


def _check_record(run: ModelRun, gated: bool) -> dict[str, Any]:
    """The self-check's record for the report: its result, or why it did not run."""
    if run.preprocessing_check is not None:
        return run.preprocessing_check.to_dict()
    if not gated:
        why = "off (--no-sanity-gate / sanity_gate=False: neither the gate nor the self-check ran)"
    elif run.options.normalization != "model":
        why = f"not run: the normalization is forced ({run.options.normalization}); the check holds the declared one"
    elif run.early_sanity is not None and not run.early_sanity.passed:
        why = "not run: the model failed the sanity gate on a sample"
    else:
        why = "not run: the dataset has no conflict stimuli"
    return {"passed": None, "status": "not run", "reason": why}


def shape_bias_of_decisions(
    path: str | os.PathLike[str],
    *,
    observer: str | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    sanity_gate: bool = True,
    resample: str | None = None,
    parse: str | None = None,
) -> ShapeBiasReport:
    """The shape bias recomputed from a per-image decision CSV (the published raw-data format, or a VLM's answers).

    Shape hits / (shape + texture hits) over the conflict images of the file, with the texture-image bootstrap
    interval, the expected value of ``observer`` when it is a registered model, and the sanity gate. A response
    file of Gavrikov et al. (``image, response, pred_label, ...``: CLIP, ImageNet classifiers, VLMs) is read by
    its ``pred_label`` as published, or by re-parsing its answers (``parse``); answers with no class are
    *abstentions*, counted beside the shape bias (neither a shape nor a texture hit; the cue-conflict accuracy
    is over all conflict stimuli).

    Parameters
    ----------
    path
        The decision CSV: texture-vs-shape's ``raw-data`` format (subj, session, trial, rt, object_response,
        category, condition, imagename), or a published response file (``image``, ``response``, ``pred_label``).
    observer
        A registered model whose published value the report compares with (``"resnet50_in"``).
    bootstrap
        Bootstrap resamples of the 95% interval (0: none).
    seed
        The bootstrap's seed.
    sanity_gate
        Withhold the shape bias when the cue-conflict accuracy is below the gate.
    resample
        The bootstrap's unit: ``"texture"`` (default), ``"shape"``, ``"two-way"`` or ``"stimuli"``
        (:mod:`modelval.behaviour.resampling`).
    parse
        For a response file: ``None`` takes ``pred_label`` as published; ``"vqa"`` re-parses ``response`` by the
        authors' rule, ``"caption-judge"`` reads the LLM judge's letters, ``"caption-names"`` a caption's words
        (:mod:`modelval.behaviour.answers`).

    Returns
    -------
    ShapeBiasReport
        As :func:`shape_bias`, without a model run (``.run`` is ``None``); ``.result.abstentions`` counts the
        conflict stimuli answered with no class.

    Examples
    --------
    The paper's ResNet-50 from its published decisions (``REFERENCE`` is texture-vs-shape's ``raw-data/``
    folder): 162 shape and 572 texture hits, the published 22.07%.

    >>> import modelval
    >>> resnet50 = REFERENCE / "style-transfer-512-nomask-experiment_resnet50_session-1.csv"
    >>> report = modelval.shape_bias_of_decisions(resnet50, observer="resnet50_in", bootstrap=0)
    >>> round(report.shape_bias, 4), report.result.shape_hits, report.result.texture_hits, report.row.final_verdict.text
    (0.2207, 162, 572, 'PASS')

    GPT-4V's published VQA answers (Gavrikov et al.), re-parsed: 126 of the 1,200 conflict stimuli got no class.

    >>> gpt4v = VLM_SHAPEBIAS / "vlm/vqa/20240228_002836_openai_vision.csv"
    >>> report = modelval.shape_bias_of_decisions(gpt4v, parse="vqa", bootstrap=0)
    >>> round(report.shape_bias, 4), round(report.result.cue_accuracy, 4), report.result.abstentions
    (0.4791, 0.6975, 126)
    """
    from modelval.behaviour.answers import is_response_file, read_responses
    from modelval.behaviour.cue_conflict import EXPECTED_IMAGES
    from modelval.behaviour.decisions import read_decisions
    from modelval.behaviour.resampling import resolve_unit
    from modelval.behaviour.shape_bias import compute_shape_bias
    from modelval.judgement.expected import expected_for
    from modelval.judgement.rows import ReportRow
    from modelval.judgement.sanity import sanity_check
    from modelval.judgement.verdicts import Case, judge

    path = Path(path)
    if not path.exists():  # said before the file is read as one kind or the other
        raise DataError(f"decision file not found: {path}")
    response_file = is_response_file(path)
    if parse is not None and not response_file:
        raise DataError(
            f"{path}: --parse re-reads the answers of a response file (image, response, pred_label, ...); this is a "
            "decision file in the raw-data format, whose object_response is already a class"
        )
    decisions = read_responses(path, parse=parse) if response_file else read_decisions(path)
    expected = expected_for(observer) if observer else None
    label = expected.label if expected else (observer or path.stem)
    unit = resolve_unit(resample, cue_conflict=True)
    result = compute_shape_bias(decisions, n_bootstrap=bootstrap, seed=seed, resample=unit)
    row = ReportRow(
        observer or label, label, "decision file", "n/a", result, expected, provenance=decision_file_provenance(path)
    )
    sanity = sanity_check(result)
    row.verdict = judge(Case(name=observer or label, result=result, decisions=decisions, expected=expected,
                             sanity=sanity if sanity_gate else None, source="decision file"))  # fmt: skip
    details: dict[str, Any] = {"decisions_file": str(path), "images": len(decisions)}
    if response_file:
        from modelval.api.vlm import ABSTENTION_RULE

        details["answers"] = f"re-parsed with {parse!r}" if parse else "pred_label as published"
        details["abstention_rule"] = ABSTENTION_RULE
    if len(decisions) != EXPECTED_IMAGES:
        details["coverage_warning"] = (
            f"{path} covers {len(decisions)} of the {EXPECTED_IMAGES} cue-conflict images; the result is not "
            "comparable with published values"
        )
    return ShapeBiasReport(row, sanity, decisions, details, gated=sanity_gate)
