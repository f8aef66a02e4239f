"""Preprocessing pipelines as stages that can be compared one by one.

A :class:`Pipeline` is what a lab feeds its model: a decoder (bytes to a PIL image), a transform (PIL image to
tensor, as torchvision's transforms are), and how the forward runs (device, batch size, a transform of the stacked
batch, the memory layout). Its transform is taken apart into steps (a torchvision ``Compose`` of either version,
an ``nn.Sequential`` or a list), and each step gets the stage it belongs to:

    decode, channel order, dtype and range, resize, crop, normalize, device and batch

by its type where torchvision names it (``Resize``, ``CenterCrop``, ``ToTensor``, ``Normalize``, ...) and otherwise
by what it does to the first image (a channel permutation, an affine map of the values, a smaller window, another
size). A step may say its stage itself (an attribute ``stage``). A transform that cannot be taken apart (a plain
function, a HuggingFace image processor) is one step, ``whole transform``.

Every state is also read in grey levels (0-255): each step that maps values is fitted once, on the first image, as
an affine map per channel, so a float tensor in [0, 1], a normalized one and a uint8 one are compared on one scale.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from modelval.errors import DataError, InputValidationError
from modelval.preprocessing import STIMULUS_COPIES

if TYPE_CHECKING:
    import torch
    from PIL import Image

STAGES: tuple[str, ...] = (
    "decode", "channel order", "dtype and range", "resize", "crop", "normalize", "device and batch",
)  # fmt: skip
#: A step that cannot be taken apart counts as the last preprocessing stage: its effect is seen at the end.
WHOLE = "whole transform"
OTHER = "other"
RANK: dict[str, int] = {**{stage: i for i, stage in enumerate(STAGES)}, WHOLE: 5}
#: torchvision's transforms (and timm's) by class name.
TYPE_STAGES: dict[str, str] = {
    "Resize": "resize", "RandomResize": "resize", "CenterCrop": "crop", "FiveCrop": "crop",
    "ToTensor": "dtype and range", "MaybeToTensor": "dtype and range", "PILToTensor": "dtype and range",
    "ToImage": "dtype and range", "ToDtype": "dtype and range", "ConvertImageDtype": "dtype and range",
    "ToPureTensor": "dtype and range", "Normalize": "normalize", "MaybePILToTensor": "dtype and range",
}  # fmt: skip


@dataclass(frozen=True)
class Step:
    """One step of a transform: its stage (``None``: found from its effect on the first image) and its name."""

    stage: str | None
    name: str
    run: Callable[[Any], Any]


def pillow_decode(data: bytes) -> Image.Image:
    """Pillow's decoder (libjpeg-turbo's smooth chroma upsampling for JPEG), as RGB.

    Parameters
    ----------
    data
        The file's bytes.
    """
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return image.convert("RGB")


@dataclass
class Pipeline:
    """How a lab feeds its model: a decoder, a transform from a PIL image to a tensor, and how the forward runs.

    Parameters
    ----------
    transform
        PIL image -> (3, H, W) tensor (a torchvision ``Compose`` is taken apart into its steps).
    name
        How reports name it.
    decode
        The file's bytes -> PIL image (``None``: Pillow's decoder, as RGB).
    batch_size
        Images per forward.
    device
        Where the forward (and a ``batch_transform``) runs; ``None``: the device the run resolved.
    batch_transform
        Applied to each stacked batch on the device (a loader's GPU-side normalization), or ``None``.
    channels_last
        Run the model and its inputs in NHWC layout.
    compile
        Run the model through ``torch.compile`` (a copy of it).
    """

    transform: Callable[[Any], Any]
    name: str = ""
    decode: Callable[[bytes], Any] | None = None
    batch_size: int = 32
    device: str | None = None
    batch_transform: Callable[[Any], Any] | None = None
    channels_last: bool = False
    compile: bool = False

    def __post_init__(self) -> None:
        if not callable(self.transform):
            raise InputValidationError(f"a pipeline's transform must be callable, got {type(self.transform).__name__}")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise InputValidationError(f"batch_size must be a positive int, got {self.batch_size!r}")
        if not self.name:
            self.name = getattr(self.transform, "__name__", type(self.transform).__name__)

    def __call__(self, image: Any) -> Any:
        return self.transform(image)

    def steps(self) -> list[Step]:
        """The transform's steps, in order."""
        return transform_steps(self.transform)

    def decoder(self) -> Callable[[bytes], Any]:
        return self.decode or pillow_decode

    def forward_settings(self) -> dict[str, Any]:
        """What of the forward differs between pipelines (the ``device and batch`` stage)."""
        return {
            "batch_size": self.batch_size, "device": self.device, "channels_last": self.channels_last,
            "compile": self.compile,
            "batch_transform": None if self.batch_transform is None else _name_of(self.batch_transform),
        }  # fmt: skip


def _name_of(thing: Any) -> str:
    """A step's short name: ``Resize(256, bicubic)``, ``Normalize(0.5, 0.5)``, a function's name."""
    short = _torchvision_name(thing)
    text = short or getattr(thing, "__name__", None) or repr(thing)
    return " ".join(str(text).split())[:80]


def _torchvision_name(step: Any) -> str | None:
    kind = type(step).__name__
    if kind == "Resize":
        size = step.size[0] if isinstance(step.size, (list, tuple)) and len(step.size) == 1 else step.size
        mode = getattr(step.interpolation, "value", step.interpolation)
        alias = "" if getattr(step, "antialias", True) in (True, None) else ", no antialias"
        return f"Resize({size}, {mode}{alias})"
    if kind == "CenterCrop":
        size = step.size[0] if len(set(step.size)) == 1 else step.size
        return f"CenterCrop({size})"
    if kind == "Normalize":
        mean, std = (", ".join(f"{float(v):.4g}" for v in values) for values in (step.mean, step.std))
        return f"Normalize(mean {mean}; std {std})"
    if kind == "ToDtype":
        dtype = step.dtype if not isinstance(step.dtype, dict) else next(iter(step.dtype.values()))
        return f"ToDtype({str(dtype).replace('torch.', '')}{', scaled' if step.scale else ''})"
    return None


def transform_steps(transform: Any) -> list[Step]:
    """``transform`` taken apart: each element of a (nested) ``Compose``, ``nn.Sequential`` or list, with its stage.

    Parameters
    ----------
    transform
        A callable from a PIL image to a tensor.
    """
    parts = getattr(transform, "transforms", None)
    if isinstance(transform, (list, tuple)):
        parts = transform
    elif parts is None and type(transform).__name__ == "Sequential":
        parts = list(transform)
    if isinstance(parts, (list, tuple)) and parts:
        return [step for part in parts for step in transform_steps(part)]
    declared = getattr(transform, "stage", None)
    if isinstance(declared, str):
        if declared not in RANK:
            raise InputValidationError(f"a step's stage must be one of {', '.join(STAGES)}; got {declared!r}")
        return [Step(declared, _name_of(transform), transform)]
    kind = TYPE_STAGES.get(type(transform).__name__)
    if kind is None and type(transform).__module__.split(".")[0] not in {"torchvision", "timm"} and not hasattr(
        transform, "transforms"
    ):
        # A plain function or object of the user's: it may do everything at once (a HuggingFace processor), or one
        # thing; its effect on the first image decides (see classify).
        return [Step(None, _name_of(transform), transform)]
    return [Step(kind, _name_of(transform), transform)]


# --- values on one scale ---------------------------------------------------------------------------------------


def raw_values(state: Any, dtype: Any = np.float32) -> np.ndarray:
    """A state as a (C, H, W) array: a PIL image's grey levels, a tensor's values as they are.

    Parameters
    ----------
    state
        A PIL image or a tensor of (C, H, W) (a batch of one is taken as its image).
    dtype
        float32 (the comparisons: 1e-5 of a grey level), or float64 (fitting a step's map).
    """
    import torch
    from PIL import Image

    if isinstance(state, Image.Image):
        array = np.asarray(state.convert("RGB") if state.mode not in ("RGB", "L") else state, dtype=dtype)
        return array[None] if array.ndim == 2 else array.transpose(2, 0, 1)
    if isinstance(state, torch.Tensor):
        values = state.detach()
        if values.ndim == 4 and values.shape[0] == 1:
            values = values[0]
        if values.ndim != 3:
            raise InputValidationError(f"a transform step returned a tensor of shape {tuple(values.shape)}; "
                                       "a pipeline's steps work on one (C, H, W) image")  # fmt: skip
        return values.to("cpu", torch.float64 if dtype == np.float64 else torch.float32).numpy()
    if isinstance(state, np.ndarray) and state.ndim == 3:
        return state.astype(dtype).transpose(2, 0, 1) if state.shape[-1] in (1, 3) else state.astype(dtype)
    raise InputValidationError(f"a transform step returned {type(state).__name__}; a step returns a PIL image or "
                               "a tensor")  # fmt: skip


@dataclass(frozen=True)
class GreyMap:
    """grey level = value x ``scale`` + ``offset``, per channel (``None``: the values have no known scale)."""

    scale: np.ndarray
    offset: np.ndarray

    @classmethod
    def identity(cls, channels: int = 3) -> GreyMap:
        """Values that are grey levels already (a PIL image, a uint8 tensor).

        Parameters
        ----------
        channels
            How many channels.
        """
        return cls(np.ones(channels), np.zeros(channels))

    def grey(self, values: np.ndarray) -> np.ndarray:
        """``values`` (C, H, W) in grey levels.

        Parameters
        ----------
        values
            A state's values.
        """
        scale, offset = (x.astype(values.dtype)[:, None, None] for x in (self.scale, self.offset))
        return values * scale + offset

    def same(self, other: GreyMap) -> bool:
        """The same scale and offset, to float32 rounding.

        Parameters
        ----------
        other
            The other map.
        """
        return bool(np.allclose(self.scale, other.scale, rtol=1e-4) and np.allclose(self.offset, other.offset,
                                                                                      atol=1e-3))  # fmt: skip

    def describe(self) -> str:
        """``v x 127.5 + 127.5`` (one channel's when all agree, else each channel's)."""
        pairs = [f"v x {s:.4g} + {o:.4g}" for s, o in zip(self.scale, self.offset, strict=True)]
        return pairs[0] if len(set(pairs)) == 1 else "(" + "; ".join(pairs) + ")"


def classify(before: np.ndarray, after: np.ndarray) -> tuple[str, np.ndarray | None, bool]:
    """What a step did to the first image: ``(stage, per-channel (slope, intercept) or None, channels reversed)``.

    Parameters
    ----------
    before, after
        The step's input and output values, (C, H, W).
    """
    if before.shape[1:] != after.shape[1:]:
        height, width = after.shape[1:]
        top, left = (before.shape[1] - height) // 2, (before.shape[2] - width) // 2
        window = before[:, top : top + height, left : left + width]
        cropped = window.shape == after.shape and np.allclose(window, after, atol=1e-3)
        return ("crop" if cropped else "resize"), None, False
    if before.shape[0] != after.shape[0]:
        return OTHER, None, False
    plain, plain_error = _affine_fit(before, after)
    flipped, flipped_error = _affine_fit(before[::-1], after)
    if flipped_error < 1e-6 and plain_error > 1e-3 and before.shape[0] == 3:
        return "channel order", flipped, True
    if plain_error > 1e-3:
        return OTHER, None, False
    slopes, intercepts = plain[:, 0], plain[:, 1]
    uniform = np.allclose(slopes, slopes[0], rtol=1e-4) and np.allclose(intercepts, 0, atol=1e-4)
    return ("dtype and range" if uniform else "normalize"), plain, False


def _affine_fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Per channel, y ~ slope x + intercept: the fits and the largest residual relative to y's spread."""
    fits, worst = [], 0.0
    for xc, yc in zip(x.reshape(len(x), -1), y.reshape(len(y), -1), strict=True):
        if np.ptp(xc) == 0:  # a flat channel fixes no slope: take it as a plain shift
            slope, intercept = 1.0, float(yc.mean() - xc.mean())
        else:
            slope, intercept = np.polyfit(xc, yc, 1)
        spread = max(float(np.ptp(yc)), 1e-12)
        worst = max(worst, float(np.max(np.abs(slope * xc + intercept - yc))) / spread)
        fits.append((slope, intercept))
    return np.array(fits, dtype=np.float64), worst


def next_map(previous: GreyMap | None, fit: np.ndarray | None, reversed_: bool, after: Any) -> GreyMap | None:
    """The grey map of a step's output, from its input's and the step's fitted affine map.

    Parameters
    ----------
    previous
        The input's map.
    fit
        The step's (slope, intercept) per channel (``None``: a geometric step, or one that is not affine).
    reversed_
        The step reversed the channels.
    after
        The step's output (a PIL image or a uint8 tensor is in grey levels whatever came before).
    """
    import torch

    if not isinstance(after, torch.Tensor) or after.dtype == torch.uint8:
        return GreyMap.identity(raw_values(after).shape[0])
    if previous is None:
        return None
    scale, offset = (previous.scale[::-1], previous.offset[::-1]) if reversed_ else (previous.scale, previous.offset)
    if fit is None:
        return GreyMap(scale.copy(), offset.copy())
    slope, intercept = fit[:, 0], fit[:, 1]
    if np.any(np.abs(slope) < 1e-12):
        return None
    return GreyMap(scale / slope, offset - intercept * scale / slope)


# --- derived stimuli -------------------------------------------------------------------------------------------

#: The stimulus copies a diff runs on: the 224 px originals, upscaled copies (so that resizers and crops act) and a
#: JPEG copy with 4:2:0 chroma (so that decoders act).
VARIANTS: tuple[str, ...] = STIMULUS_COPIES
JPEG_QUALITY = 90


def derive(data: bytes, variant: str) -> tuple[bytes | None, Any]:
    """One stimulus in ``variant``: ``(bytes to decode, or None, PIL image when the copy is lossless)``.

    ``256`` and ``288`` are bicubic upscales (kept decoded: a PNG would decode to the same pixels); ``jpeg`` is the
    288 px upscale encoded at quality 90 with 4:2:0 chroma subsampling, decoded by each pipeline's own decoder.

    Parameters
    ----------
    data
        The original file's bytes.
    variant
        One of :data:`VARIANTS`.
    """
    from PIL import Image

    if variant == "original":
        return data, None
    original = pillow_decode(data)
    size = 288 if variant == "jpeg" else int(variant)
    upscaled = original.resize((size, size), Image.Resampling.BICUBIC)
    if variant != "jpeg":
        return None, upscaled
    import io

    buffer = io.BytesIO()
    upscaled.save(buffer, format="JPEG", quality=JPEG_QUALITY, subsampling=2)  # 2: 4:2:0
    return buffer.getvalue(), None


def check_variants(variants: Sequence[str] | str) -> tuple[str, ...]:
    """Validated variant names (``"288,jpeg"`` or a sequence).

    Parameters
    ----------
    variants
        Names from :data:`VARIANTS`.
    """
    names = tuple(v.strip() for v in (variants.split(",") if isinstance(variants, str) else variants) if v.strip())
    unknown = [v for v in names if v not in VARIANTS]
    if unknown or not names:
        raise DataError(f"stimuli must be among {', '.join(VARIANTS)}; got {', '.join(unknown) or 'none'}")
    return tuple(dict.fromkeys(names))


def replace(pipeline: Pipeline, **changes: Any) -> Pipeline:
    """A copy of ``pipeline`` with ``changes`` (its forward settings, its name).

    Parameters
    ----------
    pipeline
        The pipeline.
    **changes
        Fields of :class:`Pipeline`.
    """
    return dataclasses.replace(pipeline, **changes)


def as_tensor(state: Any) -> torch.Tensor:
    """A step's final output as a float32 (3, H, W) tensor (the model's input), or one line saying why it is not.

    Parameters
    ----------
    state
        The transform's output.
    """
    import torch

    if not isinstance(state, torch.Tensor):
        raise InputValidationError(f"a pipeline returned {type(state).__name__}; it must return a (3, H, W) tensor")
    if state.ndim == 4 and state.shape[0] == 1:
        state = state[0]
    if state.ndim != 3 or state.shape[0] != 3:
        raise InputValidationError(f"a pipeline returned a tensor of shape {tuple(state.shape)}; it must be (3, H, W)")
    if not state.is_floating_point():
        raise InputValidationError(f"a pipeline returned {state.dtype} values; the model's input is a float tensor")
    return state.float()
