"""Preprocessing as data attached to a model, and the one code path that applies it.

A :class:`PreprocessConfig` says how a model expects its input: normalization mean/std,
interpolation, and the eval-time resize and center crop it was trained with. Images are decoded
once to uint8 tensors; :func:`prepare_batch` turns a uint8 batch into the model's input on the
target device. The PIL entry point (:class:`Preprocess`) goes through the same function, so a single
image and a batch are processed identically.

On the cue-conflict stimuli: they are already 224x224 and the reference toolbox (model-vs-human)
feeds them without resize or crop, so the evaluation protocol drops the model's resize/crop by
default (see :meth:`PreprocessConfig.for_stimuli`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from modelval.errors import InputValidationError

if TYPE_CHECKING:  # torch, torchvision and PIL load on first use: `import modelval` stays light
    import torch
    from PIL import Image

IMAGENET_MEAN: tuple[float, float, float] = (0.485, 0.456, 0.406)
IMAGENET_STD: tuple[float, float, float] = (0.229, 0.224, 0.225)
HALF_MEAN: tuple[float, float, float] = (0.5, 0.5, 0.5)
HALF_STD: tuple[float, float, float] = (0.5, 0.5, 0.5)

#: Named normalizations a user can force on any model ("model" keeps the model's own).
NORMALIZATIONS: dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]] = {
    "imagenet": (IMAGENET_MEAN, IMAGENET_STD),
    "half": (HALF_MEAN, HALF_STD),
}
NORMALIZATION_CHOICES: tuple[str, ...] = ("model", "imagenet", "half")

Normalization = Literal["model", "imagenet", "half"]

#: Interpolation names a config accepts (torchvision's InterpolationMode of the same name).
_INTERPOLATIONS = ("nearest", "bilinear", "bicubic")

#: The largest square input size a config accepts (pixels): past it a value is a typo, and resizing to it
#: would exhaust memory (an input size of 10^9 was a MemoryError deep in PIL).
MAX_INPUT_SIZE = 4096

#: "resize 256 / center-crop 224", the usual ImageNet eval transform, as a stimulus-protocol option.
STANDARD_RESIZE, STANDARD_CROP = 256, 224

#: The stimulus copies a preprocess diff runs on (:func:`modelval.evaluation.pipelines.derive`): the 224 px
#: originals, bicubic upscales to 256 and 288 px, and the 288 px upscale as a 4:2:0 JPEG. Here, in the ground, so that
#: the command line offers them without importing torch.
STIMULUS_COPIES: tuple[str, ...] = ("original", "256", "288", "jpeg")


def _triple(values: Iterable[float], what: str) -> tuple[float, float, float]:
    items = tuple(float(v) for v in values)
    if len(items) != 3:
        raise InputValidationError(f"{what} needs 3 values (one per RGB channel), got {items}")
    if not all(np.isfinite(items)):
        raise InputValidationError(f"{what} must be finite numbers, got {items}")
    return items[0], items[1], items[2]


@dataclass(frozen=True)
class PreprocessConfig:
    """How images become model input. ``resize``/``crop`` of ``None`` mean "leave the size as is"."""

    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    interpolation: str = "bilinear"
    resize: int | None = None
    crop: int | None = None
    #: The square size the model is fed, after resize/crop; ``None``: the images' own size. Set by an
    #: explicit ``--input-size``: the stimulus protocol keeps it where it drops resize and crop.
    input_size: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", _triple(self.mean, "mean"))
        object.__setattr__(self, "std", _triple(self.std, "std"))
        if any(s <= 0 for s in self.std):
            # a zero std divides by zero (every input infinite), a negative one flips the image's contrast
            raise InputValidationError(f"std must be positive (it divides every pixel), got {self.std}")
        if self.interpolation not in _INTERPOLATIONS:
            raise InputValidationError(
                f"interpolation must be one of {sorted(_INTERPOLATIONS)}, got {self.interpolation!r}"
            )
        for name in ("resize", "crop", "input_size"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise InputValidationError(f"{name} must be a positive int or None, got {value!r}")
            if value is not None and value > MAX_INPUT_SIZE:
                raise InputValidationError(f"{name} must be at most {MAX_INPUT_SIZE} pixels, got {value}")

    @property
    def normalization_name(self) -> str:
        """ "imagenet", "half" or "custom", for reports."""
        for name, (mean, std) in NORMALIZATIONS.items():
            if np.allclose(self.mean, mean) and np.allclose(self.std, std):
                return name
        return "custom"

    def with_normalization(self, normalization: str) -> PreprocessConfig:
        """The same config with the model's own ("model") or a forced ("imagenet", "half") mean/std.

        Parameters
        ----------
        normalization
            ``model`` (this config's own), ``imagenet`` or ``half``.
        """
        if normalization == "model":
            return self
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {NORMALIZATION_CHOICES}, got {normalization!r}")
        mean, std = NORMALIZATIONS[normalization]
        return dataclasses.replace(self, mean=mean, std=std)

    def for_stimuli(self, resize: str | int | None = None) -> PreprocessConfig:
        """The config used on the 224 px cue-conflict stimuli.

        ``None``/"none" (the official protocol): no resize, no crop. ``256``: resize the shorter side
        to 256 with the model's interpolation, then center-crop 224.

        Parameters
        ----------
        resize
            ``none`` (the stimuli as published) or ``256`` (resize 256, crop 224).
        """
        if resize in (None, "none"):
            return dataclasses.replace(self, resize=None, crop=None)
        if int(resize) == STANDARD_RESIZE:
            return dataclasses.replace(self, resize=STANDARD_RESIZE, crop=STANDARD_CROP)
        raise ValueError(f"resize must be 'none' or {STANDARD_RESIZE}, got {resize!r}")

    def to_dict(self) -> dict[str, object]:
        return {
            "mean": list(self.mean),
            "std": list(self.std),
            "normalization": self.normalization_name,
            "interpolation": self.interpolation,
            "resize": self.resize,
            "crop": self.crop,
            "input_size": self.input_size,
        }

    def describe(self) -> str:
        size = "as is" if self.resize is None and self.crop is None else f"resize {self.resize}, crop {self.crop}"
        if self.input_size is not None:
            size = f"{size}, fed at {self.input_size} px"
        return (
            f"mean={tuple(round(m, 4) for m in self.mean)} std={tuple(round(s, 4) for s in self.std)} "
            f"({self.normalization_name}), {self.interpolation}, {size}"
        )


def pil_to_uint8(image: Image.Image) -> torch.Tensor:
    """An RGB (3, H, W) uint8 tensor of a PIL image (grayscale/RGBA/palette are converted to RGB).

    Parameters
    ----------
    image
        A PIL image (any mode; converted to RGB).
    """
    import torch

    if image.mode != "RGB":
        image = image.convert("RGB")
    array = np.asarray(image, dtype=np.uint8)
    return torch.from_numpy(array.copy()).permute(2, 0, 1).contiguous()


def _resize_like_pil(images: torch.Tensor, size: int, interpolation: str) -> torch.Tensor:
    """Resize the shorter side of each uint8 image with PIL, exactly as torchvision's PIL transforms do.

    Tensor resizing is not an option here: torch's bicubic kernel (a=-0.75) differs from PIL's
    (a=-0.5) by up to 10 grey levels on the stimuli, and the pipelines users compare against run on PIL.
    """
    import torch
    from PIL import Image
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.v2 import functional as F

    mode = InterpolationMode(interpolation)
    resized = []
    for image in images.cpu():
        pil = Image.fromarray(image.permute(1, 2, 0).numpy())
        resized.append(pil_to_uint8(F.resize(pil, [size], interpolation=mode)))
    return torch.stack(resized)


def prepare_batch(
    images: torch.Tensor,
    config: PreprocessConfig,
    device: torch.device | str | None = None,
    *,
    non_blocking: bool = False,
) -> torch.Tensor:
    """uint8 (N, 3, H, W) or (3, H, W) images -> normalized float32 model input on ``device``.

    Steps, in the order torchvision's ImageNet eval transform applies them: resize (PIL, antialiased),
    center crop, scale to [0, 1], normalize. An ``input_size`` resizes (and center-crops) to that
    square size after the crop. The uint8 batch is moved before conversion, so only a
    quarter of the bytes cross to a GPU.

    Parameters
    ----------
    images
        uint8 images, (N, 3, H, W).
    config
        The preprocessing.
    device
        Where the model runs.
    non_blocking
        Copy to the device asynchronously (pinned memory).
    """
    import torch
    from torchvision.transforms.v2 import functional as F

    if images.dtype != torch.uint8:
        raise TypeError(f"prepare_batch expects uint8 images, got {images.dtype}")
    single = images.ndim == 3
    if single:
        images = images.unsqueeze(0)
    if config.resize is not None:
        images = _resize_like_pil(images, config.resize, config.interpolation)
    if config.crop is not None:
        images = F.center_crop(images, [config.crop])
    if config.input_size is not None and tuple(images.shape[-2:]) != (config.input_size, config.input_size):
        images = F.center_crop(_resize_like_pil(images, config.input_size, config.interpolation), [config.input_size])
    if device is not None:
        images = images.to(device, non_blocking=non_blocking)
    mean = torch.tensor(config.mean, device=images.device).view(-1, 1, 1) * 255.0
    std = torch.tensor(config.std, device=images.device).view(-1, 1, 1) * 255.0
    # In place on the fresh float copy: the same arithmetic as (x - mean) / std without two more batch-sized buffers.
    batch = images.float().sub_(mean).div_(std)
    return batch[0] if single else batch


class Preprocess:
    """PIL image -> model input tensor (3, H, W), via :func:`prepare_batch`."""

    def __init__(self, config: PreprocessConfig) -> None:
        self.config = config

    def __call__(self, image: Image.Image) -> torch.Tensor:
        return prepare_batch(pil_to_uint8(image), self.config)

    def __repr__(self) -> str:
        return f"Preprocess({self.config.describe()})"


#: Where a resolved preprocessing value came from, for the keys that can be overridden.
OVERRIDABLE: tuple[str, ...] = ("mean", "std", "interpolation", "input_size")
INTERPOLATIONS: tuple[str, ...] = tuple(_INTERPOLATIONS)


@dataclass(frozen=True)
class PreprocessOverrides:
    """User overrides of a source's preprocessing (``--mean``, ``--std``, ``--interpolation``, ``--input-size``)."""

    mean: tuple[float, float, float] | None = None
    std: tuple[float, float, float] | None = None
    interpolation: str | None = None
    input_size: int | None = None
    #: How the user gave them, for provenance ("--mean", "models file my.toml [models.x]").
    origin: str = "override"

    def __post_init__(self) -> None:
        # The same checks as PreprocessConfig, raised now, naming the override.
        PreprocessConfig(
            mean=self.mean or IMAGENET_MEAN,
            std=self.std or IMAGENET_STD,
            interpolation=self.interpolation or "bilinear",
            input_size=self.input_size,
        )

    def given(self) -> dict[str, object]:
        return {key: getattr(self, key) for key in OVERRIDABLE if getattr(self, key) is not None}

    def apply(self, config: PreprocessConfig, sources: dict[str, str]) -> tuple[PreprocessConfig, dict[str, str]]:
        """``config`` with the given values replaced, and ``sources`` updated to say so.

        Parameters
        ----------
        config
            The source's own preprocessing.
        sources
            Where each value came from (updated in place).
        """
        given = self.given()
        if not given:
            return config, sources
        updated = dict(sources)
        for key in given:
            updated[key] = (
                f"{self.origin} ({key})" if self.origin != "override" else f"override (--{key.replace('_', '-')})"
            )
        return dataclasses.replace(config, **given), updated  # type: ignore[arg-type]
