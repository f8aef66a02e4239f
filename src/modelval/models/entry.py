"""What a model entry is: its source, weights and preprocessing as data (:class:`ModelEntry`), what its builder
may use (:class:`LoadContext`), and a loaded model with its configuration (:class:`LoadedModel`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads on first use: listing models or parsing specs stays light
    import torch
    from torch import nn

from modelval.extras import EXTRA_OF_SOURCE
from modelval.models.weights import WeightsPart
from modelval.preprocessing import Preprocess, PreprocessConfig


@dataclass(frozen=True)
class LoadContext:
    """What a builder may use: where weights are cached, whether it may download, the device."""

    checkpoint_dir: Path
    offline: bool
    device: torch.device
    progress: bool = True
    #: Paths of the entry's weights parts (same order as ``ModelEntry.weights``), resolved by ``load_model``.
    weight_paths: tuple[Path, ...] = ()


@dataclass(frozen=True)
class TrainingData:
    """What a model learned from, as its source states it: shown beside its results (``modelval benchmark``)."""

    data: str  # the stages: "ImageNet-1k", "LAION-2B, then ImageNet-1k"
    images: int | None  # images (or image-text pairs) of the largest stage; None: not known
    kind: str  # "supervised", "self-supervised", "image-text contrastive", ...
    source: str = ""  # where this is read from, when not the registry entry itself (a timm tag)


#: ImageNet-1k's training set (ILSVRC-2012): 1,281,167 images of 1000 classes.
IMAGENET_1K = TrainingData("ImageNet-1k", 1_281_167, "supervised")


@dataclass(frozen=True)
class ModelEntry:
    """One registered model. ``preprocess`` is the preprocessing the model was trained/evaluated with."""

    name: str
    family: str  # "resnet50", "deit", "efficientnet"
    variant: str  # "IN", "SIN", "tiny", "lite0", ...
    source: str  # "torchvision", "texture-vs-shape", "torch.hub", "huggingface", "timm", "pypi"
    preprocess: PreprocessConfig
    build: Callable[[LoadContext], nn.Module] = field(repr=False, compare=False)
    weights_url: str | None = None
    weights_file: str | None = None  # file name in the checkpoint cache, when modelval downloads it
    provenance: str = ""
    label: str = ""  # human-readable name for tables ("ResNet-50 (SIN)")
    #: What must be present before ``build`` runs (files, hub code, HF repos); empty: bundled.
    weights: tuple[WeightsPart, ...] = field(default=(), compare=False)
    #: The preprocessing the source itself ships, read at load time when it can be (HF processor
    #: configs in the cache), optionally with where it was read; ``None`` keeps ``preprocess``.
    resolve_preprocess: Callable[[LoadContext], PreprocessConfig | tuple[PreprocessConfig, str]] | None = field(
        default=None, repr=False, compare=False
    )
    #: Where ``preprocess`` (mean, std, interpolation) comes from, for provenance in reports;
    #: empty: "registry entry <name>".
    preprocess_origin: str = ""
    #: The resolution the source trains/evaluates at (timm input_size, a processor's crop); reported,
    #: not applied: the stimuli are fed at 224 px unless ``--input-size`` says otherwise.
    native_input_size: int | None = None
    #: What the model was trained on, when the entry (or its source, e.g. a timm tag) says; ``None``: not stated.
    training: TrainingData | None = field(default=None, compare=False)
    #: Its parameter count, when the entry states it (an evaluated model's is counted from the module).
    parameters: int | None = None
    #: The optional extra of pyproject.toml its weights or code come with (``lite`` for Lite1/Lite2); ``None``:
    #: the one its source needs (``timm``, ``hf``, see :data:`modelval.extras.EXTRA_OF_SOURCE`), if any.
    extra: str | None = None

    @property
    def display_name(self) -> str:
        return self.label or self.name

    @property
    def required_extra(self) -> str | None:
        """The extra this model needs (``"lite"``, ``"timm"``, ``"hf"``, ...), or ``None`` for a core one."""
        return self.extra or EXTRA_OF_SOURCE.get(self.source)


@dataclass(frozen=True)
class ModelConfig:
    """The effective configuration of a loaded model (its entry plus the requested normalization)."""

    name: str
    source: str
    normalization: str  # what was requested: "model", "imagenet" or "half"
    preprocess: PreprocessConfig
    weights_url: str | None
    provenance: str
    #: Where each overridable preprocessing value came from: source, override or default.
    preprocess_sources: dict[str, str] = field(default_factory=dict)
    spec: str = ""
    native_input_size: int | None = None
    checkpoint: str | None = None
    #: Where the registry knows better than the source (e.g. an HF repository shipping a processor
    #: config that is not the one the weights were trained with).
    audit_notes: tuple[str, ...] = ()

    @property
    def mean(self) -> tuple[float, float, float]:
        return self.preprocess.mean

    @property
    def std(self) -> tuple[float, float, float]:
        return self.preprocess.std

    @property
    def interpolation(self) -> str:
        return self.preprocess.interpolation

    @property
    def resize(self) -> int | None:
        return self.preprocess.resize

    @property
    def crop(self) -> int | None:
        return self.preprocess.crop

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "source": self.source,
            "normalization": self.normalization,
            **self.preprocess.to_dict(),
            "weights_url": self.weights_url,
            "provenance": self.provenance,
            "preprocess_sources": dict(self.preprocess_sources),
            "spec": self.spec or self.name,
            "native_input_size": self.native_input_size,
            "checkpoint": self.checkpoint,
            "audit_notes": list(self.audit_notes),
        }


@dataclass
class LoadedModel:
    """A model ready to evaluate: the module in eval mode, its preprocessing and its configuration.

    ``preprocess`` turns a PIL image into the model input exactly as modelval's evaluation does (the
    224 px stimuli as they are: no resize or crop; the model's mean/std and interpolation), so a
    user's own loop gets modelval's numbers. The source's own eval transform (e.g. resize 256,
    crop 224) is ``config.preprocess``.
    """

    entry: ModelEntry
    model: nn.Module
    preprocess: Preprocess
    config: ModelConfig
    #: How the module was built (where its weights came from, the device): :func:`reconfigured` needs it.
    context: LoadContext | None = field(default=None, repr=False, compare=False)
