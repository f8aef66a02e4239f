"""Seeded preprocessing regressions and benign rewrites of the bundled EfficientNet-Lite0's eval transform.

Each regression is a pair of pipelines that a lab could have shipped one after the other, the stimulus copy on
which it shows, and the stage a preprocess diff must name. The benign rewrites compute the same input another way
and must be called the same. Shared by tests/evaluation/test_preprocess_mutations.py and
benchmarks/preprocess_mutations.py (which prints each one's flips and shape-bias change on all 1,280 stimuli).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

HALF = "mean=0.5,0.5,0.5+std=0.5,0.5,0.5"
IMAGENET = "mean=0.485,0.456,0.406+std=0.229,0.224,0.225"
SWAPPED = "mean=0.229,0.224,0.225+std=0.485,0.456,0.406"


@dataclass(frozen=True)
class Mutation:
    name: str
    a: Any
    b: Any
    copy: str
    stage: str | None  # None: a benign rewrite (nothing may differ)


def v1_transform() -> Any:
    """Lite0's eval transform as a lab writes it with torchvision's v1 transforms."""
    from torchvision import transforms as T

    return T.Compose([T.Resize(256, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(224), T.ToTensor(),
                      T.Normalize([0.5] * 3, [0.5] * 3)])  # fmt: skip


def v2_transform() -> Any:
    """The same with the v2 transforms."""
    import torch
    from torchvision.transforms import v2

    return v2.Compose([v2.Resize(256, interpolation=v2.InterpolationMode.BICUBIC), v2.CenterCrop(224), v2.ToImage(),
                       v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.5] * 3, [0.5] * 3)])  # fmt: skip


def by_hand(image: Any) -> Any:
    """ToTensor + Normalize written out: (x / 255 - 0.5) / 0.5 in float32."""
    import torch

    x = torch.from_numpy(np.asarray(image, dtype=np.uint8).copy()).permute(2, 0, 1).float() / 255
    return (x - 0.5) / 0.5


def by_hand_transform() -> Any:
    from torchvision import transforms as T

    return T.Compose([T.Resize(256, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(224), by_hand])


def bgr_after_normalize() -> Any:
    """A BGR flip a port appended after the normalization (a step out of the usual order)."""
    from torchvision import transforms as T

    return T.Compose([*v1_transform().transforms, T.Lambda(lambda x: x.flip(0))])


def per_batch_standardized(batch_size: int) -> Any:
    """A loader that standardizes each batch by its own statistics: its input depends on how the batches split."""
    from modelval.evaluation.pipelines import Pipeline

    def standardize(batch: Any) -> Any:
        return (batch - batch.mean()) / batch.std()

    return Pipeline(v1_transform(), name=f"per-batch standardization, batch {batch_size}", batch_size=batch_size,
                    batch_transform=standardize)  # fmt: skip


def mutations() -> list[Mutation]:
    """The seeded regressions, then the benign rewrites."""
    tensor = "model+backend=tensor"
    return [
        Mutation("antialias off", tensor, f"{tensor}+antialias=false", "288", "resize"),
        Mutation("torch bicubic instead of PIL bicubic", "model", tensor, "288", "resize"),
        Mutation("BGR", "model", "model+channels=bgr", "288", "channel order"),
        Mutation("mean and std swapped", f"model+{IMAGENET}", f"model+{SWAPPED}", "288", "normalize"),
        Mutation("resize 256 / crop 224 against none", "model+resize=none+crop=none", "model", "original", "resize"),
        Mutation("crop_pct 0.875 against 0.9", "model+crop_pct=0.875", "model+crop_pct=0.9", "288", "resize"),
        Mutation("uint8 against float resize path", tensor, f"{tensor}+resize_dtype=float32", "288", "resize"),
        Mutation("fp16 rounding before the resize", f"{tensor}+resize_dtype=float32", f"{tensor}+resize_dtype=float16",
                 "288", "dtype and range"),
        Mutation("nearest against smooth chroma upsampling", "model", "model+decoder=nearest-chroma", "jpeg", "decode"),
        Mutation("Pillow bilinear against bicubic", "model", "model+interpolation=bilinear", "288", "resize"),
        Mutation("batch-size split (32 -> 7) of a per-batch standardization", per_batch_standardized(32),
                 per_batch_standardized(7), "288", "device and batch"),
        Mutation("values in [0, 255]", "model", "model+range=255", "288", "dtype and range"),
        Mutation("BGR after the normalization", v1_transform(), bgr_after_normalize(), "288", "channel order"),
        Mutation("ToTensor + Normalize against the arithmetic by hand", v1_transform(), by_hand_transform(), "288",
                 None),
        Mutation("torchvision v1 against v2 transforms", v1_transform(), v2_transform(), "288", None),
        Mutation("channels-last", "model", "model+channels_last", "288", None),
        Mutation("batch 32 against 7", "model", "model+batch=7", "288", None),
    ]
