"""The options of the Python front door, as typed data (the CLI fills the same objects from its flags).

Importing this module loads no torch: options can be built, compared and printed anywhere.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelval.parsing import BATCH_SIZE, BOOTSTRAP, PERMUTATIONS, WORKERS, check_device, check_seed, check_threads
from modelval.runtime import DEFAULT_BATCH_SIZE

if TYPE_CHECKING:
    import torch

    from modelval.behaviour.label_map import LabelMap
    from modelval.models.zero_shot import ZeroShotSettings
    from modelval.preprocessing import PreprocessOverrides

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class EvaluationOptions:
    """How a model is run on a stimulus set (the protocol and the machinery).

    The defaults are the official protocol of model-vs-human: the 224 px stimuli as they are
    (``resize="none"``), the model's own normalization, softmax over the 1000 ImageNet classes and the
    **mean** of each of the 16 categories' probabilities.
    """

    #: Stimulus set: ``cue-conflict``, ``edges`` or ``filled-silhouettes``.
    dataset: str = "cue-conflict"
    #: ``model`` (the source's own mean/std), or ``imagenet`` / ``half`` forced on any model.
    normalization: str = "model"
    #: ``none`` (as published) or ``256`` (resize 256, center-crop 224).
    resize: str = "none"
    #: ``mean`` (model-vs-human), ``sum`` or ``max`` over each category's ImageNet classes.
    aggregation: str = "mean"
    #: The stimulus folder; ``None``: the data home's (``$MODELVAL_DATA_HOME``), else the per-user cache (fetched on
    #: first use).
    data_root: PathLike | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    #: Decoding worker processes (0: decode in this process).
    workers: int = 0
    #: torch CPU threads: a number or ``"auto"``. ``None`` (the library default) leaves torch's process-wide
    #: setting as it is; the command line passes ``"auto"`` and restores the old value afterwards.
    threads: int | str | None = None
    #: ``"bf16"``: bfloat16 autocast, with the decisions flipped against an fp32 run reported.
    amp: str | None = None
    channels_last: bool = False
    #: Evaluate a folder that differs from the published set (e.g. a subset); the result says so.
    allow_modified_stimuli: bool = False
    progress: bool = False
    #: Bootstrap resamples of the 95% interval (0: none) and their seed.
    bootstrap: int = 1000
    seed: int = 0
    #: What the bootstrap resamples: ``stimuli``, ``texture``, ``shape`` or ``two-way`` (cue-conflict source
    #: images, :mod:`modelval.behaviour.resampling`); ``None``: texture images on cue-conflict, images elsewhere.
    resample: str | None = None
    #: Random sign-flip sets of the paired permutation tests (the sensitivity card's p-values).
    permutations: int = 10_000
    #: Reuse and store what a run can reuse: the decoded stimuli, the model's raw outputs, a VLM's answers (the
    #: caches of :mod:`modelval.records.store`); ``None``: on unless ``$MODELVAL_NO_CACHE`` is set.
    cache: bool | None = None

    def __post_init__(self) -> None:
        # Before any model runs, with the command line's own limits and words (modelval.runtime): a bad value
        # would fail only after the evaluation, or (a negative bootstrap) pass unnoticed.
        check_seed(self.seed)
        BATCH_SIZE.check(self.batch_size, "batch_size")
        WORKERS.check(self.workers, "workers")
        BOOTSTRAP.check(self.bootstrap, "bootstrap")
        PERMUTATIONS.check(self.permutations, "permutations")
        check_threads(self.threads)


@dataclass(frozen=True)
class ModelOptions:
    """How a model spec is loaded: weights, label map, preprocessing overrides, device, caches."""

    #: A state dict to load into the built module (``weights_only=True``, strict).
    checkpoint: PathLike | None = None
    #: The key of the checkpoint's state dict (``state_dict_ema``); default: the file itself, else
    #: ``state_dict`` or ``model``.
    checkpoint_key: str | None = None
    #: A prefix to remove from the checkpoint's keys (Lightning's ``model.``).
    strip_prefix: str | None = None
    #: A JSON file (or a :class:`~modelval.behaviour.label_map.LabelMap`) mapping each of the 16 categories
    #: to output indices, for heads that are not ImageNet-1k.
    label_map: PathLike | LabelMap | None = None
    mean: tuple[float, float, float] | None = None
    std: tuple[float, float, float] | None = None
    interpolation: str | None = None
    input_size: int | None = None
    #: Allow ``hub:`` specs to run the repository's code in this process.
    trust_repo: bool = False
    #: ``auto`` (CUDA when available), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``; a ``torch.device`` resolved at a
    #: door passes through as it is.
    device: str | torch.device = "auto"
    checkpoint_dir: PathLike | None = None
    #: Never download (``None``: ``$MODELVAL_OFFLINE``).
    offline: bool | None = None
    #: The folder a spec's relative file paths are resolved from (a models file's folder); ``None``: as given.
    base_dir: PathLike | None = None
    #: ``open_clip:`` and ``hf:`` CLIP / SigLIP specs: class space, templates and logit scale of the zero-shot head
    #: (:class:`~modelval.models.zero_shot.ZeroShotSettings`; ``None``: ImageNet-1k names, OpenAI's 80 templates).
    zero_shot: ZeroShotSettings | None = None

    def __post_init__(self) -> None:
        check_device(self.device)  # the command line's --device check, in its words

    def overrides(self) -> PreprocessOverrides:
        from modelval.preprocessing import PreprocessOverrides

        return PreprocessOverrides(
            mean=self.mean, std=self.std, interpolation=self.interpolation, input_size=self.input_size
        )

    def read_label_map(self) -> LabelMap | None:
        from modelval.behaviour.label_map import LabelMap, read_label_map

        if self.label_map is None and self.zero_shot is not None and self.zero_shot.class_space == "16":
            from modelval.behaviour.categories import CATEGORIES

            # the zero-shot head's outputs are the 16 categories themselves, in CATEGORIES order
            return LabelMap({name: (i,) for i, name in enumerate(CATEGORIES)}, origin="zero-shot class space 16")
        if self.label_map is None or isinstance(self.label_map, LabelMap):
            return self.label_map
        return read_label_map(Path(self.label_map))


_EVALUATION_FIELDS = {f.name for f in dataclasses.fields(EvaluationOptions)}
_MODEL_FIELDS = {f.name for f in dataclasses.fields(ModelOptions)}


def resolve_options(
    options: EvaluationOptions | None, model_options: ModelOptions | None, settings: Mapping[str, Any]
) -> tuple[EvaluationOptions, ModelOptions]:
    """``options`` and ``model_options`` (defaults when ``None``) with single ``settings`` replaced.

    ``shape_bias("efficientnet_lite0", normalization="imagenet", device="cuda")`` routes each keyword
    to the options object that has it; an unknown keyword is a ``TypeError`` listing the known ones.

    Parameters
    ----------
    options
        The evaluation options (``None``: defaults).
    model_options
        How the model is loaded (``None``: defaults).
    settings
        Single options given as keywords.
    """
    unknown = sorted(set(settings) - _EVALUATION_FIELDS - _MODEL_FIELDS)
    if unknown:
        known = ", ".join(sorted(_EVALUATION_FIELDS | _MODEL_FIELDS))
        raise TypeError(f"unknown option(s) {', '.join(unknown)}; the options are: {known}")
    evaluation = dataclasses.replace(
        options or EvaluationOptions(), **{k: v for k, v in settings.items() if k in _EVALUATION_FIELDS}
    )
    model = dataclasses.replace(
        model_options or ModelOptions(), **{k: v for k, v in settings.items() if k in _MODEL_FIELDS}
    )
    return evaluation, model
