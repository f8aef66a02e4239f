"""Pipelines named in one string: the model's declared preprocessing, timm's or a HuggingFace processor, or a
callable of the user's, each with changes after ``+``.

    model                                    the model's declared preprocessing (resize, crop, mean/std, ...)
    model+backend=tensor+antialias=false     the same on tensors, without antialiasing
    model+interpolation=bilinear             Pillow's bilinear instead of the declared interpolation
    timm:resnet50                            timm's eval transform for resnet50 (its pretrained config)
    hf:facebook/deit-small-patch16-224       a HuggingFace image processor (from the local cache or a folder)
    my_transforms.py:eval_transform          a callable (a torchvision Compose is taken apart), or a Pipeline
    my_transforms.py:eval_transform+batch=1  any of these with the forward run another way

The changes of the preprocessing (:data:`PREPROCESSING_KEYS`) apply to ``model``; those of the forward
(:data:`FORWARD_KEYS`) and the decoder to every pipeline.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from modelval.errors import DataError
from modelval.evaluation.pipelines import Pipeline, pillow_decode, replace
from modelval.preprocessing import PreprocessConfig

PREPROCESSING_KEYS: dict[str, str] = {
    "resize": "the shorter side's size in pixels, or none",
    "crop": "the center crop's size in pixels, or none",
    "crop_pct": "crop / resize, as timm states it (resize = floor(crop / crop_pct))",
    "interpolation": "nearest, bilinear or bicubic",
    "antialias": "true or false (the tensor backend; Pillow always antialiases)",
    "mean": "R,G,B", "std": "R,G,B",
    "channels": "rgb or bgr",
    "range": "1 (values in [0, 1] before the normalization) or 255",
    "backend": "pil (torchvision's transforms on PIL images) or tensor (on uint8 tensors)",
    "resize_dtype": "uint8, float32 or float16: the values the tensor backend resizes",
    "transform_device": "where the tensor backend's steps run (cpu, cuda, ...)",
}  # fmt: skip
FORWARD_KEYS: dict[str, str] = {
    "batch": "images per forward", "device": "where the forward runs",
    "channels_last": "true or false: the NHWC layout", "compile": "true or false: the model through torch.compile",
    "decoder": "pillow or nearest-chroma",
}  # fmt: skip


class Staged:
    """A step that says its stage (for the steps modelval builds that torchvision has no class for)."""

    def __init__(self, stage: str, name: str, function: Callable[[Any], Any]) -> None:
        self.stage, self.name, self.function = stage, name, function
        self.__name__ = name

    def __call__(self, value: Any) -> Any:
        return self.function(value)

    def __repr__(self) -> str:
        return self.name


def nearest_chroma_decode(data: bytes) -> Any:
    """A decoder that upsamples JPEG's 4:2:0 chroma by repeating each sample (as some GPU decoders do).

    Pillow does not hand out the stored chroma planes, so they are rebuilt: the decoded image's chroma, averaged
    over each 2x2 block and repeated back; the luma is kept.

    Parameters
    ----------
    data
        The file's bytes.
    """
    import numpy as np
    from PIL import Image

    ycbcr = np.asarray(pillow_decode(data).convert("YCbCr"), dtype=np.float64)
    height, width = ycbcr.shape[:2]
    even = ycbcr[: height - height % 2, : width - width % 2, 1:]
    blocks = even.reshape(even.shape[0] // 2, 2, even.shape[1] // 2, 2, 2).mean(axis=(1, 3))
    chroma = blocks.repeat(2, axis=0).repeat(2, axis=1)
    ycbcr[: chroma.shape[0], : chroma.shape[1], 1:] = chroma
    image = Image.fromarray(np.clip(np.rint(ycbcr), 0, 255).astype(np.uint8), mode="YCbCr")
    return image.convert("RGB")


DECODERS: dict[str, Callable[[bytes], Any]] = {"pillow": pillow_decode, "nearest-chroma": nearest_chroma_decode}


def parse_changes(text: str) -> tuple[str, dict[str, str]]:
    """``model+backend=tensor+batch=1`` -> ``("model", {"backend": "tensor", "batch": "1"})``.

    Parameters
    ----------
    text
        The pipeline's spec.
    """
    base, *parts = text.split("+")
    changes: dict[str, str] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        key = key.strip().replace("-", "_")
        if key in ("channels_last", "compile") and not sep:
            value, sep = "true", "="
        if not sep or key not in {**PREPROCESSING_KEYS, **FORWARD_KEYS}:
            known = ", ".join(sorted({**PREPROCESSING_KEYS, **FORWARD_KEYS}))
            raise DataError(f"{text!r}: {part!r} is not a change KEY=VALUE with a known key ({known})")
        changes[key] = value.strip()
    if not base.strip():
        raise DataError(f"{text!r} names no pipeline: give model, timm:NAME, hf:NAME or FILE.py:NAME")
    return base.strip(), changes


def pipeline_from_spec(text: str, config: PreprocessConfig) -> Pipeline:
    """The :class:`Pipeline` a spec names (module docstring).

    Parameters
    ----------
    text
        The spec.
    config
        The model's declared preprocessing (what ``model`` means).
    """
    base, changes = parse_changes(text)
    preprocessing = {k: v for k, v in changes.items() if k in PREPROCESSING_KEYS}
    if base == "model":
        pipeline = Pipeline(declared_transform(config, preprocessing), name=text)
    elif preprocessing:
        raise DataError(f"{text!r}: {', '.join(preprocessing)} change the model's declared preprocessing; they apply "
                        "to `model`, not to a pipeline given whole")  # fmt: skip
    elif base.startswith("timm:"):
        pipeline = Pipeline(_timm_transform(base[5:]), name=text)
    elif base.startswith("hf:"):
        pipeline = Pipeline(_hf_transform(base[3:]), name=text)
    else:
        pipeline = _user_pipeline(base, text)
    return _with_forward(pipeline, changes, text)


def _with_forward(pipeline: Pipeline, changes: dict[str, str], text: str) -> Pipeline:
    updates: dict[str, Any] = {}
    if "batch" in changes:
        updates["batch_size"] = _positive(changes["batch"], "batch", text)
    if "device" in changes:
        updates["device"] = changes["device"]
    for key in ("channels_last", "compile"):
        if key in changes:
            updates[key] = _flag(changes[key], key, text)
    if "decoder" in changes:
        if changes["decoder"] not in DECODERS:
            raise DataError(f"{text!r}: decoder must be one of {', '.join(DECODERS)}, got {changes['decoder']!r}")
        updates["decode"] = DECODERS[changes["decoder"]]
    return replace(pipeline, **updates) if updates else pipeline


def _positive(value: str, key: str, text: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise DataError(f"{text!r}: {key} must be a positive whole number, got {value!r}")
    return int(value)


def _flag(value: str, key: str, text: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise DataError(f"{text!r}: {key} must be true or false, got {value!r}")
    return value.lower() == "true"


def _size(value: str, key: str, text: str) -> int | None:
    return None if value.lower() == "none" else _positive(value, key, text)


def _settings(config: PreprocessConfig, changes: dict[str, str], text: str) -> dict[str, Any]:
    """The declared preprocessing with ``changes`` applied, checked. A config that leaves the size as it is (the
    stimulus protocol's) resizes to its crop, or 224: the derived stimuli are larger than the model's input."""
    crop = config.crop or config.input_size or 224
    settings: dict[str, Any] = {
        "resize": config.resize or crop, "crop": crop, "interpolation": config.interpolation, "antialias": True,
        "mean": config.mean, "std": config.std, "channels": "rgb", "range": "1", "backend": "pil",
        "resize_dtype": "uint8", "transform_device": "cpu",
    }  # fmt: skip
    for key, value in changes.items():
        if key in ("resize", "crop"):
            settings[key] = _size(value, key, text)
        elif key == "crop_pct":
            pct = float(value) if value.replace(".", "", 1).isdigit() else 0.0
            if not 0 < pct <= 1:
                raise DataError(f"{text!r}: crop_pct must be in (0, 1], got {value!r}")
            settings["resize"] = math.floor(settings["crop"] / pct)
        elif key == "antialias":
            settings[key] = _flag(value, key, text)
        elif key in ("mean", "std"):
            settings[key] = tuple(float(v) for v in value.split(","))
        else:
            settings[key] = value
    choices = {"channels": ("rgb", "bgr"), "range": ("1", "255"), "backend": ("pil", "tensor"),
               "resize_dtype": ("uint8", "float32", "float16"), "interpolation": ("nearest", "bilinear", "bicubic")}
    for key, allowed in choices.items():  # fmt: skip
        if settings[key] not in allowed:
            raise DataError(f"{text!r}: {key} must be one of {', '.join(allowed)}, got {settings[key]!r}")
    if settings["backend"] == "pil" and (not settings["antialias"] or settings["resize_dtype"] != "uint8"):
        raise DataError(f"{text!r}: antialias and resize_dtype apply to backend=tensor (Pillow always antialiases "
                        "and resizes uint8 images)")  # fmt: skip
    PreprocessConfig(mean=settings["mean"], std=settings["std"])  # the same checks, one line each
    return settings


def declared_transform(config: PreprocessConfig, changes: dict[str, str], text: str = "model") -> Any:
    """torchvision's transforms for the declared preprocessing with ``changes`` (:data:`PREPROCESSING_KEYS`).

    Parameters
    ----------
    config
        The model's declared preprocessing.
    changes
        Keys of :data:`PREPROCESSING_KEYS` and their values.
    text
        The spec, for messages.
    """
    import torch
    from torchvision.transforms import v2

    s = _settings(config, changes, text)
    mode = v2.InterpolationMode(s["interpolation"])
    steps: list[Any] = []
    if s["channels"] == "bgr":
        steps.append(Staged("channel order", "BGR", _bgr))
    scaled = s["range"] == "1"
    if s["backend"] == "tensor":
        steps.append(v2.ToImage())
        if s["transform_device"] != "cpu":
            device = s["transform_device"]
            steps.append(Staged("dtype and range", f"to {device}", lambda x: x.to(device)))
        if s["resize_dtype"] != "uint8":
            steps.append(v2.ToDtype(getattr(torch, s["resize_dtype"]), scale=scaled))
    if s["resize"] is not None:
        steps.append(v2.Resize(s["resize"], interpolation=mode, antialias=s["antialias"]))
    if s["crop"] is not None:
        steps.append(v2.CenterCrop(s["crop"]))
    if s["backend"] == "pil":
        steps.append(v2.ToImage())
    steps.append(v2.ToDtype(torch.float32, scale=scaled and s["resize_dtype"] == "uint8"))
    steps.append(v2.Normalize(list(s["mean"]), list(s["std"])))
    return v2.Compose(steps)


def _bgr(image: Any) -> Any:
    from PIL import Image

    return Image.merge("RGB", image.split()[::-1])


def _timm_transform(name: str) -> Any:
    from modelval.extras import require

    timm = require("timm", extra="timm", purpose="a timm: pipeline")
    from timm.data import create_transform, resolve_data_config

    try:
        model = timm.create_model(name, pretrained=False)
    except (RuntimeError, ValueError) as error:  # timm: "Unknown model (...)", "Unknown model source"
        raise DataError(f"timm:{name}: {error}") from None
    return create_transform(**resolve_data_config({}, model=model))


def _hf_transform(name: str) -> Callable[[Any], Any]:
    from modelval.extras import require

    require("transformers", extra="hf", purpose="an hf: pipeline")
    from transformers import AutoImageProcessor

    try:  # never a download: the processor is read from the local cache or a folder
        processor = AutoImageProcessor.from_pretrained(name, local_files_only=True)
    except (OSError, ValueError) as error:
        raise DataError(f"hf:{name}: no image processor in the local cache or folder ({_first_line(error)})") from None

    def transform(image: Any) -> Any:
        return processor(images=image, return_tensors="pt")["pixel_values"][0]

    transform.__name__ = f"{type(processor).__name__}({name})"
    return transform


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _user_pipeline(base: str, text: str) -> Pipeline:
    from pathlib import Path

    from modelval.models.files import import_callable

    if ":" not in base:
        raise DataError(f"{text!r}: a pipeline is model, timm:NAME, hf:NAME or FILE.py:NAME")
    target = base.rsplit(":", 1)[0]
    if target.endswith(".py") and not Path(target).expanduser().is_file():
        raise DataError(f"{text!r}: pipeline file not found: {target}")
    found, _ = import_callable(base)
    if isinstance(found, Pipeline):
        return replace(found, name=found.name or text)
    return Pipeline(found, name=text)
