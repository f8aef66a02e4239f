"""Evaluate a classifier on a stimulus set: decode once, forward, map to 16 categories, decide, score.

- :mod:`modelval.evaluation.forward`: the one forward path (raw outputs, the output-cache key, the 1000 -> 16
  mapping);
- :mod:`modelval.evaluation.flips`: decisions that differ between two runs;
- here: :func:`evaluate`, which runs them in order and returns an :class:`Evaluation`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from modelval.behaviour.categories import CATEGORIES, Aggregation, CategoryMapper
from modelval.behaviour.decisions import Decision
from modelval.behaviour.label_map import LabelMap
from modelval.behaviour.resampling import DEFAULT_RESAMPLING
from modelval.behaviour.shape_bias import ShapeBiasResult, compute_shape_bias
from modelval.datasets.stimuli import Stimulus
from modelval.datasets.stimulus_set import StimulusSet
from modelval.evaluation.flips import AMP_FLIP_WARN_RATE, AmpFlipWarning, FlipReport, decision_flips
from modelval.evaluation.forward import (
    AMP_DTYPES,
    MAPPING_ROWS,
    Amp,
    Model,
    NonFiniteOutputError,
    category_probabilities,
    category_probabilities_by_aggregation,
    checked_logits,
    describe_model,
    logits_of,
    model_outputs,
    place_model,
    probabilities_from_outputs,
)
from modelval.evaluation.stored import FORWARD_PATH_VERSION, output_key
from modelval.preprocessing import PreprocessConfig
from modelval.records.output_cache import NOT_COVERED as OUTPUT_CACHE_NOT_COVERED
from modelval.records.output_cache import OutputCache
from modelval.records.provenance import device_record
from modelval.runtime import DEFAULT_BATCH_SIZE, resolve_device

__all__ = [
    "AMP_DTYPES", "AMP_FLIP_WARN_RATE", "DEFAULT_BATCH_SIZE", "FORWARD_PATH_VERSION", "MAPPING_ROWS", "Amp",
    "AmpFlipWarning", "Evaluation", "FlipReport", "Model", "NonFiniteOutputError",
    "category_probabilities", "category_probabilities_by_aggregation", "checked_logits", "decision_flips",
    "decisions_from_probabilities", "describe_model", "evaluate", "logits_of", "model_outputs", "output_key",
    "place_model", "probabilities_from_outputs",
]  # fmt: skip


@dataclass
class Evaluation:
    """Everything one evaluation produced: per-image scores and decisions, and the shape bias."""

    model_name: str
    config: PreprocessConfig
    aggregation: str
    stimuli: list[Stimulus]
    category_probabilities: np.ndarray  # (N, 16), aggregated probabilities
    decisions: list[Decision]
    result: ShapeBiasResult
    timings: dict[str, float] = field(default_factory=dict)
    amp: str | None = None  # None = fp32
    #: The model's raw outputs (N, K) in float32 (ImageNet logits, or another head's), in stimulus order.
    outputs: np.ndarray | None = field(default=None, repr=False)
    #: "hit", "miss", "resumed: k of N rows reused", or "off" with the reason (see modelval.records.output_cache).
    output_cache: str = "off"
    #: The run's facts: weights digest, preprocessing, stimuli digest, precision, device (modelval.records.provenance).
    provenance: dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "model": self.model_name,
            "preprocessing": self.config.to_dict(),
            "aggregation": self.aggregation,
            "images": len(self.stimuli),
            **self.result.to_dict(),
            "precision": self.amp or "fp32",
            "output_cache": self.output_cache,
            "timings_s": {k: round(v, 4) for k, v in self.timings.items()},
        }


def decisions_from_probabilities(stimuli: Sequence[Stimulus], probabilities: np.ndarray) -> list[Decision]:
    """Argmax over the 16 categories (ties go to the first category in alphabetical order).

    Parameters
    ----------
    stimuli
        The stimuli, in the order of the rows.
    probabilities
        ``(N, 16)`` category probabilities.
    """
    choice = probabilities.argmax(axis=1)
    return [Decision(s.name, s.shape, s.texture, CATEGORIES[int(c)]) for s, c in zip(stimuli, choice, strict=True)]


def evaluate(
    model: Model,
    config: PreprocessConfig,
    stimuli: StimulusSet,
    *,
    model_name: str = "model",
    batch_size: int = DEFAULT_BATCH_SIZE,
    device: str | torch.device = "auto",
    aggregation: Aggregation = "mean",
    progress: bool = True,
    n_bootstrap: int = 1000,
    seed: int = 0,
    resample: str | None = None,
    amp: Amp | None = None,
    channels_last: bool = False,
    label_map: LabelMap | None = None,
    output_cache: OutputCache | None = None,
) -> Evaluation:
    """Evaluate a classifier on decoded stimuli: raw outputs, 16 categories' probabilities, decisions, shape bias.

    The lower-level step under :func:`modelval.run_model` (which also finds and verifies the stimuli, loads the
    model and applies the sanity gate). The stimuli are prepared under ``config`` (resize, crop, normalization)
    batch by batch on ``device``, the model's outputs (ImageNet-1k logits, or another head read through
    ``label_map``) are kept as float32, the softmax is mapped to the 16 categories by ``aggregation`` of each
    category's classes, the argmax is each image's decision, and the shape bias (shape hits / (shape + texture
    hits) over the conflict images) gets a bootstrap 95% interval. ``device`` is resolved once here (``"auto"``:
    CUDA when available) and an ``nn.Module`` that sits elsewhere is moved there in place (the provenance's
    ``model_moved_from`` says from where). The weights digest of the output-cache key is computed once per
    model and remembered while no tensor changes.

    Parameters
    ----------
    model
        An ``nn.Module`` (or a callable) mapping a float batch (N, 3, H, W) to logits (N, K).
    config
        The preprocessing to apply (a :class:`~modelval.PreprocessConfig`; ``loaded.config.preprocess`` of a
        loaded model, ``.for_stimuli(None)`` for the protocol's no-resize).
    stimuli
        Decoded stimuli (a :class:`~modelval.datasets.stimulus_set.StimulusSet`).
    model_name
        The name in the result and in the output cache's record.
    batch_size
        Images per forward pass (decisions do not depend on it).
    device
        ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda[:N]"``, ``"mps"``, or a ``torch.device``.
    aggregation
        ``"mean"`` (model-vs-human), ``"sum"`` or ``"max"`` over each category's ImageNet classes.
    progress
        Show a progress bar.
    n_bootstrap
        Bootstrap resamples of the shape bias's 95% interval (0: none).
    seed
        The bootstrap's seed.
    resample
        The bootstrap's unit (``None``: texture images; see :mod:`modelval.behaviour.resampling`).
    amp
        ``"bf16"``: bfloat16 autocast for the forward (decisions may flip; softmax and mapping stay float32).
    channels_last
        Run the model and inputs in NHWC layout.
    label_map
        For a head that is not ImageNet-1k: each of the 16 categories -> its output indices.
    output_cache
        An :class:`~modelval.records.output_cache.OutputCache`: outputs stored under the same key are reused,
        others stored (``None``: nothing is cached).

    Returns
    -------
    Evaluation
        ``.decisions``, ``.result`` (the shape bias), ``.category_probabilities``, ``.outputs``, ``.timings``,
        ``.provenance``.

    Examples
    --------
    The bundled EfficientNet-Lite0 on ``SUBSET`` (two stimuli per category, a subset of the published set):

    >>> import modelval
    >>> loaded = modelval.load_model("efficientnet_lite0", progress=False)
    >>> stimuli = modelval.StimulusSet.load(SUBSET, allow_modified=True, progress=False)
    >>> evaluation = modelval.evaluate(loaded.model, loaded.config.preprocess.for_stimuli(None), stimuli,
    ...                                n_bootstrap=0, progress=False)
    >>> len(evaluation.decisions), evaluation.result.shape_hits, evaluation.result.texture_hits
    (32, 3, 15)
    >>> evaluation.decisions[0]
    Decision(imagename='airplane1-bicycle2.png', shape='airplane', texture='bicycle', response='bottle')
    """
    start = time.perf_counter()
    mapper = CategoryMapper(aggregation, label_map)
    target = resolve_device(device)  # once per run; everything below gets this torch.device
    # Placed before the key: the digest is then taken of the tensors the forward uses, and stays valid next time.
    moved_from = place_model(model, target)
    key, fields = output_key(model, config, stimuli, amp=amp, device=target, channels_last=channels_last)
    cache = output_cache if key is not None else None
    memory_notes: list[str] = []
    outputs, status = model_outputs(
        model, stimuli.images, config, batch_size=batch_size, device=target, progress=progress, amp=amp,
        channels_last=channels_last, check_width=mapper.label_map.check_outputs, cache=cache, cache_key=key,
        cache_meta={"model": model_name, "fields": fields}, names=[s.name for s in stimuli.stimuli],
        memory_notes=memory_notes,
    )  # fmt: skip
    forward = time.perf_counter() - start
    if output_cache is None:
        status = "off"
    elif key is None:
        status = "off: the model has no state dict to identify its weights"
    probabilities = probabilities_from_outputs(outputs, {aggregation: mapper})[aggregation]
    decisions = decisions_from_probabilities(stimuli.stimuli, probabilities)
    result = compute_shape_bias(decisions, n_bootstrap=n_bootstrap, seed=seed, resample=resample or DEFAULT_RESAMPLING)
    provenance: dict[str, object] = {
        "weights_sha256": fields["weights"],
        "weights_digest_method": "SHA-256 of the state dict (names, dtypes, shapes, bytes)",
        "architecture_sha256": fields["architecture"],
        "preprocessing": config.to_dict(),
        "stimuli": stimuli.provenance(content_sha256=str(fields["stimuli"])),
        "precision": amp or "fp32",
        "channels_last": channels_last,
        "device": device_record(target),
        "model_moved_from": moved_from,
        "batch_size": batch_size,
        "forward_path": FORWARD_PATH_VERSION,
        "output_cache": status,
        "output_cache_key": key,
        "output_cache_not_covered": OUTPUT_CACHE_NOT_COVERED if cache is not None else None,
        "bootstrap": {"resamples": n_bootstrap, "seed": seed, "unit": result.ci_resampling},
    }
    if memory_notes:  # the batches that ran out of device memory and were run again at half the size
        provenance["out_of_memory"] = memory_notes
    zero_shot = getattr(model, "zero_shot_record", None)  # a CLIP / SigLIP head (modelval.models.zero_shot)
    if callable(zero_shot):
        provenance["zero_shot"] = zero_shot()
    return Evaluation(
        model_name=model_name,
        config=config,
        aggregation=aggregation,
        stimuli=stimuli.stimuli,
        category_probabilities=probabilities,
        decisions=decisions,
        result=result,
        timings={"model_and_mapping": forward, "total": time.perf_counter() - start},
        amp=amp,
        outputs=outputs,
        output_cache=status,
        provenance=provenance,
    )
