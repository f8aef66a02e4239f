"""Preprocessing audit: what each source of a model really feeds it, compared on real stimuli.

For every source of a model (torch.hub, transformers, timm, torchvision, PyPI) the audit reports the
effective mean, std, resize, crop and interpolation, read from the source itself where it can be
(a cached ``preprocessor_config.json`` through ``AutoImageProcessor``, timm's pretrained config),
runs that source's own transform on real stimuli, and measures the largest difference from the
*reference*: the model's training normalization applied to the 224 px stimuli as they are (the
cue-conflict protocol: no resize, no crop). Mismatches are flagged in words.

``_measure_normalizations`` adds the measured effect: shape bias and cue-conflict accuracy of the
real model under its own and the forced normalizations. :func:`audit_preprocessing` is the front door
(``modelval models audit``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from PIL import Image

from modelval.behaviour.shape_bias import ShapeBiasResult
from modelval.models.entry import ModelEntry
from modelval.models.registry import get_entry, list_models
from modelval.preprocessing import (
    NORMALIZATION_CHOICES,
    PreprocessConfig,
    pil_to_uint8,
    prepare_batch,
)

if TYPE_CHECKING:
    from modelval.datasets.stimulus_set import StimulusSet

#: Largest input difference (normalized units) still counted as "the same tensor" (float rounding).
PIXEL_TOLERANCE = 1e-3
STIMULUS_SIZE = 224

Transform = Callable[[Sequence[Image.Image]], torch.Tensor]


@dataclass(frozen=True)
class SourceReport:
    """One source's effective preprocessing and how far its input is from the reference input."""

    name: str  # entry name, or a pseudo-source like "DeiTImageProcessor()"
    source: str
    config: PreprocessConfig
    origin: str  # where these numbers were read
    notes: tuple[str, ...] = ()
    max_abs_diff: float | None = None
    mean_abs_diff: float | None = None
    flags: tuple[str, ...] = ()

    @property
    def status(self) -> str:
        """``ok`` or ``MISMATCH: normalization, rescales stimuli, ...`` (the kinds of flag raised)."""
        kinds = [
            kind
            for kind, words in (
                ("normalization", ("normalization",)),
                ("rescales stimuli", ("rescales",)),
                ("eval resize", ("eval resize",)),
                ("interpolation", ("interpolation",)),
            )
            if any(w in f for f in self.flags for w in words)
        ]
        if not self.flags:
            return "ok"
        return "MISMATCH: " + ", ".join(kinds or ["pixels"])

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "source": self.source,
            **self.config.to_dict(),
            "origin": self.origin,
            "notes": list(self.notes),
            "max_abs_diff": self.max_abs_diff,
            "mean_abs_diff": self.mean_abs_diff,
            "status": self.status,
            "flags": list(self.flags),
        }


@dataclass(frozen=True)
class NormalizationMeasurement:
    """The model under one normalization on all stimuli. A normalization under which it is not a working
    classifier (below the sanity gate) has no shape bias: :attr:`withheld` says why, and it is shown nowhere."""

    model: str
    normalization: str
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    shape_bias: float
    cue_accuracy: float
    shape_hits: int
    texture_hits: int
    conflict_images: int
    #: Why the sanity gate withholds the shape bias (cue-conflict accuracy below it), or ``None``.
    withheld: str | None = None

    def to_dict(self) -> dict[str, object]:
        from modelval import jsonio

        payload: dict[str, object] = dataclasses.asdict(self)
        if self.withheld is not None:
            payload["shape_bias"] = jsonio.Undefined(self.withheld)
        return payload


@dataclass
class AuditReport:
    group: str  # "deit_small", "resnet50_SIN", ...
    reference: PreprocessConfig
    reference_origin: str
    images: int
    sources: list[SourceReport]
    measurements: list[NormalizationMeasurement] = field(default_factory=list)
    measurement_notes: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> list[SourceReport]:
        return [s for s in self.sources if s.flags]

    def to_dict(self) -> dict[str, object]:
        return {
            "group": self.group,
            "reference": {**self.reference.to_dict(), "origin": self.reference_origin},
            "images": self.images,
            "sources": [s.to_dict() for s in self.sources],
            "measurements": [m.to_dict() for m in self.measurements],
            "measurement_notes": self.measurement_notes,
        }


# --- The training preprocessing each family is compared with ---------------------------------------


def _training_reference(entry: ModelEntry) -> tuple[PreprocessConfig, str]:
    """The preprocessing the model was trained/evaluated with by its authors, and where that is documented."""
    if entry.family == "deit":
        from modelval.models.deit import DEIT_REPO_PREPROCESS

        return DEIT_REPO_PREPROCESS, "facebookresearch/deit eval transform (ImageNet mean/std, resize 256 bicubic)"
    if entry.family == "resnet50":
        from modelval.models.resnet import RESNET_PREPROCESS

        return RESNET_PREPROCESS, "PyTorch ImageNet recipe (torchvision / texture-vs-shape)"
    return entry.preprocess, f"{entry.name}'s own registry config"


def _group_of(entry: ModelEntry) -> str:
    return f"{entry.family}_{entry.variant}"


def _entries_in_group(name: str) -> list[ModelEntry]:
    """Entries sharing a model (family + variant): ``deit_small_hf`` or ``deit_small`` -> the three DeiT-S."""
    matches = [e for e in list_models() if _group_of(e) == name]
    if matches:
        return matches
    entry = get_entry(name)
    return [e for e in list_models() if _group_of(e) == _group_of(entry)]


def all_groups() -> list[str]:
    return list(dict.fromkeys(_group_of(e) for e in list_models()))


# --- Each source's own transform -------------------------------------------------------------------


def _modelval_transform(config: PreprocessConfig) -> Transform:
    return lambda images: prepare_batch(torch.stack([pil_to_uint8(i) for i in images]), config)


def _torchvision_transform(config: PreprocessConfig) -> Transform:
    """torchvision's classic ImageNet eval pipeline, as the DeiT repository and the PyTorch example build it."""
    from torchvision import transforms

    steps = []
    if config.resize is not None:
        mode = transforms.InterpolationMode(config.interpolation)
        steps.append(transforms.Resize(config.resize, interpolation=mode))
    if config.crop is not None:
        steps.append(transforms.CenterCrop(config.crop))
    steps += [transforms.ToTensor(), transforms.Normalize(config.mean, config.std)]
    pipeline = transforms.Compose(steps)
    return lambda images: torch.stack([pipeline(i) for i in images])


def _hf_transform(processor: Any) -> Transform:
    return lambda images: processor(images=list(images), return_tensors="pt")["pixel_values"].float()


def _timm_transform(model_name: str) -> Transform:
    from timm.data import create_transform

    from modelval.models.sources import timm_data_config

    pipeline = create_transform(**timm_data_config(model_name), is_training=False)
    return lambda images: torch.stack([pipeline(i) for i in images])


def _source_pipelines(entry: ModelEntry) -> list[tuple[SourceReport, Transform]]:
    """(report without measurements, transform) for each way this entry's source preprocesses images."""
    if entry.source == "huggingface":
        return _hf_pipelines(entry)
    if entry.source == "timm":
        from modelval.models.deit import timm_model_name
        from modelval.models.sources import timm_data_config, timm_preprocess, timm_preprocess_origin

        model_name = timm_model_name(entry.variant)
        config = timm_preprocess(model_name)
        origin = timm_preprocess_origin(model_name)
        crop_pct = timm_data_config(model_name)["crop_pct"]
        notes = (f"crop_pct {crop_pct} -> resize floor({config.crop} / {crop_pct}) = {config.resize}",)
        return [(SourceReport(entry.name, entry.source, config, origin, notes), _timm_transform(model_name))]
    if entry.source == "torch.hub":
        origin = "facebookresearch/deit datasets.build_transform (eval): Resize(int(224/0.875)), CenterCrop(224)"
        return [
            (SourceReport(entry.name, entry.source, entry.preprocess, origin), _torchvision_transform(entry.preprocess))
        ]
    if entry.source in ("torchvision", "texture-vs-shape"):
        origin = "torchvision ResNet50_Weights.IMAGENET1K_V1.transforms() (ImageNet eval transform)"
        return [
            (SourceReport(entry.name, entry.source, entry.preprocess, origin), _torchvision_transform(entry.preprocess))
        ]
    origin = "modelval registry config (the package ships no transform)"
    return [(SourceReport(entry.name, entry.source, entry.preprocess, origin), _modelval_transform(entry.preprocess))]


def _hf_pipelines(entry: ModelEntry) -> list[tuple[SourceReport, Transform]]:
    from transformers import DeiTImageProcessor, ViTImageProcessor

    from modelval.models.deit import HF_SHIPPED_PREPROCESS, hf_repo_id
    from modelval.models.hf import load_processor, processor_to_config
    from modelval.models.weights import HFRepo, hf_cache_dir

    repo_id = hf_repo_id(entry.variant)
    pipelines = []
    if HFRepo(repo_id).cached_file("preprocessor_config.json") is not None:
        processor = load_processor(repo_id, cache_dir=hf_cache_dir())
        config, notes = processor_to_config(processor)
        origin = f"cached preprocessor_config.json of {repo_id} via AutoImageProcessor"
    else:
        # Not cached: the documented shipped config, run through the processor class it resolves to.
        config = HF_SHIPPED_PREPROCESS
        processor = ViTImageProcessor(
            image_mean=list(config.mean), image_std=list(config.std), size={"height": 224, "width": 224}
        )
        notes = ["ViTImageProcessor", "direct 224x224 resize (no aspect-preserving resize)"]
        origin = f"{repo_id} is not in the HF cache: documented shipped config (fetch it to read the real file)"
    pipelines.append((SourceReport(entry.name, entry.source, config, origin, tuple(notes)), _hf_transform(processor)))
    default = DeiTImageProcessor()
    default_config, default_notes = processor_to_config(default)
    origin = "transformers DeiTImageProcessor() built without a config (class defaults)"
    pipelines.append(
        (
            SourceReport("DeiTImageProcessor()", "huggingface", default_config, origin, tuple(default_notes)),
            _hf_transform(default),
        )
    )
    return pipelines


# --- Comparison ------------------------------------------------------------------------------------


def _normalization_label(config: PreprocessConfig) -> str:
    name = config.normalization_name
    return f"{name} (mean {tuple(round(m, 3) for m in config.mean)}, std {tuple(round(s, 3) for s in config.std)})"


def _mismatch_flags(config: PreprocessConfig, training: PreprocessConfig, max_abs_diff: float | None) -> list[str]:
    """Plain-language differences from the training config and the stimulus protocol."""
    flags = []
    if not (np.allclose(config.mean, training.mean, atol=1e-3) and np.allclose(config.std, training.std, atol=1e-3)):
        flags.append(
            f"normalization {_normalization_label(config)} differs from the training normalization "
            f"{_normalization_label(training)}"
        )
    if config.resize not in (None, STIMULUS_SIZE):
        flags.append(
            f"resize {config.resize} then crop {config.crop} rescales the {STIMULUS_SIZE} px stimuli by "
            f"{config.resize / STIMULUS_SIZE:.3f} (they need no resize)"
        )
    if config.resize is not None and training.resize is not None and config.resize != training.resize:
        flags.append(f"eval resize {config.resize} differs from the training config's {training.resize}")
    if config.resize not in (None, STIMULUS_SIZE) and config.interpolation != training.interpolation:
        flags.append(
            f"interpolation {config.interpolation} differs from the training config's {training.interpolation}"
        )
    if max_abs_diff is not None and max_abs_diff > PIXEL_TOLERANCE:
        flags.append(f"input differs from the reference by up to {max_abs_diff:.3f} (normalized units)")
    return flags


def _audit_group(name: str, images: Sequence[Image.Image]) -> AuditReport:
    """Audit every source of one model on ``images`` (PIL, the real 224 px stimuli)."""
    entries = _entries_in_group(name)
    training, training_origin = _training_reference(entries[0])
    reference = training.for_stimuli(None)
    reference_input = _modelval_transform(reference)(images) if images else None
    reports = []
    for entry in entries:
        for report, transform in _source_pipelines(entry):
            difference = mean_difference = None
            size_flag = []
            if reference_input is not None:
                fed = transform(images)
                if fed.shape == reference_input.shape:
                    delta = (fed - reference_input).abs()
                    difference, mean_difference = float(delta.max()), float(delta.mean())
                else:  # e.g. EfficientNet-Lite1's eval transform crops 240 px: no pixel to compare with
                    height, width = fed.shape[-2:]
                    size_flag = [
                        f"its transform rescales the {STIMULUS_SIZE} px stimuli to {height}x{width} px inputs; the "
                        "reference feeds them as they are, so no pixel-by-pixel difference is defined"
                    ]
            flags = _mismatch_flags(report.config, training, difference) + size_flag
            reports.append(
                dataclasses.replace(report, max_abs_diff=difference, mean_abs_diff=mean_difference, flags=tuple(flags))
            )
    origin = f"{training_origin}; applied to the stimuli as they are (no resize, no crop)"
    return AuditReport(_group_of(entries[0]), reference, origin, len(images), reports)


def _measure_normalizations(
    entry_name: str,
    stimuli: StimulusSet,
    *,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    offline: bool | None = None,
    device: str | torch.device = "auto",
    batch_size: int = 32,
    progress: bool = False,
    evaluated: Callable[[str], ShapeBiasResult] | None = None,
) -> list[NormalizationMeasurement]:
    """Shape bias and cue-conflict accuracy of the real model under each normalization (no resize), each run
    through :func:`modelval.api.run_model` on ``stimuli`` (one distinct mean/std once).

    ``evaluated(normalization)``, when given, supplies results already computed on the same stimuli
    (a test session's validation runner) instead of evaluating again.
    """
    from modelval.api.loading import load
    from modelval.api.options import EvaluationOptions, ModelOptions
    from modelval.api.pipeline import run_model
    from modelval.judgement.sanity import VERDICT, sanity_check
    from modelval.runtime import resolve_device

    target = resolve_device(device)  # a device resolved at the door passes through as it is
    model_options = ModelOptions(device=target, checkpoint_dir=checkpoint_dir, offline=offline)
    measured: list[NormalizationMeasurement] = []
    seen: set[tuple[tuple[float, ...], tuple[float, ...]]] = set()
    own: PreprocessConfig | None = None
    if evaluated is not None:  # only the model's own preprocessing is needed here
        own = load(entry_name, model_options=model_options, device=target)[0].config.preprocess
    for normalization in NORMALIZATION_CHOICES:
        if own is not None:
            config = own.with_normalization(normalization).for_stimuli(None)
            if (config.mean, config.std) in seen:  # the same input as one already measured
                continue
        if evaluated is not None:
            result = evaluated(normalization)
        else:
            options = EvaluationOptions(
                normalization=normalization, batch_size=batch_size, bootstrap=0, progress=progress
            )
            run = run_model(entry_name, options=options, model_options=model_options, stimuli=stimuli)
            own = own or run.loaded.config.preprocess
            result = run.evaluation.result
        assert own is not None
        config = own.with_normalization(normalization).for_stimuli(None)
        seen.add((config.mean, config.std))
        sanity = sanity_check(result)
        withheld = None if sanity.passed else f"withheld: {VERDICT} under this normalization ({sanity.message()})"
        measured.append(
            NormalizationMeasurement(
                entry_name,
                normalization if normalization != "model" else f"model ({config.normalization_name})",
                config.mean,
                config.std,
                result.shape_bias,
                result.cue_accuracy,
                result.shape_hits,
                result.texture_hits,
                result.conflict_images,
                withheld,
            )
        )
    return measured


def audit_preprocessing(
    model: str | None = None,
    *,
    images: int = 16,
    measure: bool = False,
    data_root: str | os.PathLike[str] | None = None,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    offline: bool | None = None,
    device: str = "auto",
    batch_size: int = 32,
    progress: bool = False,
) -> list[AuditReport]:
    """Compare each source's preprocessing of a model with its training config, pixel by pixel on real stimuli.

    For every registered source of the model (torchvision, torch.hub, HuggingFace's shipped processor, timm's
    data config, ...) the input that source would feed is computed on ``images`` real cue-conflict stimuli and
    compared with the training reference (the model's own mean/std, interpolation, no resize); differences in
    normalization, interpolation or size are flagged. With ``measure`` the model is also evaluated on all
    stimuli under each normalization (its weights must be present: measuring never downloads); a
    normalization under which it is no working classifier has its shape bias withheld.

    Parameters
    ----------
    model
        A registry entry (``deit_small_hf``: that entry's group) or a model group (``deit_small``); ``None``:
        every model.
    images
        The number of stimuli compared pixel by pixel (1 to 1280), spread over the set.
    measure
        Also evaluate the model (each entry of the group whose weights are present) under each normalization.
    data_root
        The cue-conflict folder (default: the data home's, else the per-user cache).
    checkpoint_dir
        Where downloaded weights are (default: ``$MODELVAL_CHECKPOINT_DIR``, else the per-user cache).
    offline
        Never download the stimuli (``None``: ``$MODELVAL_OFFLINE``).
    device
        ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda[:N]"`` or ``"mps"``, for ``measure``.
    batch_size
        Images per batch, for ``measure``.
    progress
        Show progress bars.

    Returns
    -------
    list of AuditReport
        One report per model group: each source's preprocessing, its pixel difference from the reference, its
        flags, and (with ``measure``) the measurements.

    Examples
    --------
    The bundled EfficientNet-Lite0 (``STIMULI`` is the cue-conflict folder): its package's own eval transform
    resizes to 256 px and crops 224, which rescales the 224 px stimuli, so its input differs from the protocol's:

    >>> import modelval
    >>> report, = modelval.audit_preprocessing("efficientnet_lite0", images=4, data_root=STIMULI)
    >>> source = report.sources[0]
    >>> source.status, (source.config.resize, source.config.crop), round(source.max_abs_diff, 3)
    ('MISMATCH: rescales stimuli', (256, 224), 2.0)
    """
    from modelval.datasets.fetch import ensure_stimuli
    from modelval.datasets.stimuli import discover_stimuli, load_image
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.errors import InputValidationError
    from modelval.models import weights_status

    if not 1 <= images <= 1280:
        raise InputValidationError(f"images must be 1 to 1280 (the stimuli compared), got {images}")
    groups = [_group_of(_entries_in_group(model)[0])] if model else all_groups()  # an unknown name fails first
    root = ensure_stimuli(data_root, offline=offline, progress=progress)
    stimuli = discover_stimuli(root)
    step = max(1, len(stimuli) // images)
    from torchvision.transforms.functional import to_pil_image

    pictures = [to_pil_image(load_image(root / s.relpath)) for s in stimuli[::step][:images]]
    reports = [_audit_group(group, pictures) for group in groups]
    if measure:
        from modelval.runtime import resolve_device

        target = resolve_device(device)  # at the door, once for every model and normalization measured
        full = StimulusSet.load(root, progress=progress)
        for report in reports:
            # A registry entry measures that entry; a model group measures each source that is present.
            single = model is not None and model not in all_groups()
            names = [model] if single and model is not None else [e.name for e in _entries_in_group(report.group)]
            for name in names:
                status = weights_status(name, checkpoint_dir)
                if not status.available:
                    # Measuring never downloads: weights are fetched explicitly (`modelval models fetch`).
                    report.measurement_notes.append(f"not measured: {status.message}")
                    continue
                report.measurements += _measure_normalizations(
                    name, full, checkpoint_dir=checkpoint_dir, offline=offline, device=target, batch_size=batch_size,
                    progress=progress,
                )  # fmt: skip
    return reports
