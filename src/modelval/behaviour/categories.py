"""The 16 entry-level categories of the cue-conflict experiment and their ImageNet-1k classes.

The index lists are exactly the ``*_indices`` lists of the reference toolbox (bethgelab
model-vs-human, ``modelvshuman/helper/human_categories.py``); 207 ImageNet classes in all,
disjoint. A model's 1000 probabilities become 16 category scores by aggregating each category's
classes (the mean by default, as in the paper's evaluation), implemented as one matrix product.
"""

from __future__ import annotations

from typing import Literal

import torch

CATEGORIES: tuple[str, ...] = (
    "airplane", "bear", "bicycle", "bird", "boat", "bottle", "car", "cat",
    "chair", "clock", "dog", "elephant", "keyboard", "knife", "oven", "truck",
)  # fmt: skip

IMAGENET_INDICES: dict[str, tuple[int, ...]] = {
    "airplane": (404,),
    "bear": (294, 295, 296, 297),
    "bicycle": (444, 671),
    "bird": (
        8, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22, 23, 24, 80, 81, 82, 83, 87, 88, 89, 90, 91, 92,
        93, 94, 95, 96, 98, 99, 100, 127, 128, 129, 130, 131, 132, 133, 135, 136, 137, 138, 139, 140,
        141, 142, 143, 144, 145,
    ),
    "boat": (472, 554, 625, 814, 914),
    "bottle": (440, 720, 737, 898, 899, 901, 907),
    "car": (436, 511, 817),
    "cat": (281, 282, 283, 284, 285, 286),
    "chair": (423, 559, 765, 857),
    "clock": (409, 530, 892),
    "dog": (
        152, 153, 154, 155, 156, 157, 158, 159, 160, 161, 162, 163, 164, 165, 166, 167, 168, 169, 170,
        171, 172, 173, 174, 175, 176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189,
        190, 191, 193, 194, 195, 196, 197, 198, 199, 200, 201, 202, 203, 205, 206, 207, 208, 209, 210,
        211, 212, 213, 214, 215, 216, 217, 218, 219, 220, 221, 222, 223, 224, 225, 226, 228, 229, 230,
        231, 232, 233, 234, 235, 236, 237, 238, 239, 240, 241, 243, 244, 245, 246, 247, 248, 249, 250,
        252, 253, 254, 255, 256, 257, 259, 261, 262, 263, 265, 266, 267, 268,
    ),
    "elephant": (385, 386),
    "keyboard": (508, 878),
    "knife": (499,),
    "oven": (766,),
    "truck": (555, 569, 656, 675, 717, 734, 864, 867),
}  # fmt: skip

NUM_IMAGENET_CLASSES = 1000

Aggregation = Literal["mean", "sum", "max"]
AGGREGATIONS: tuple[str, ...] = ("mean", "sum", "max")


def category_index(name: str) -> int:
    try:
        return CATEGORIES.index(name)
    except ValueError:
        raise ValueError(f"unknown category {name!r}; expected one of: {', '.join(CATEGORIES)}") from None


def aggregation_matrix(aggregation: Aggregation = "mean", *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A (1000, 16) matrix M with ``probabilities @ M`` = the per-category mean (or sum) score."""
    if aggregation not in ("mean", "sum"):
        raise ValueError(f"aggregation {aggregation!r} is not linear; use 'mean' or 'sum' here")
    matrix = torch.zeros(NUM_IMAGENET_CLASSES, len(CATEGORIES), dtype=torch.float64)
    for column, name in enumerate(CATEGORIES):
        indices = list(IMAGENET_INDICES[name])
        matrix[indices, column] = 1.0 / len(indices) if aggregation == "mean" else 1.0
    return matrix.to(dtype)


def _all_indices_padded() -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(v) for v in IMAGENET_INDICES.values())
    index = torch.zeros(len(CATEGORIES), width, dtype=torch.long)
    valid = torch.zeros(len(CATEGORIES), width, dtype=torch.bool)
    for row, name in enumerate(CATEGORIES):
        indices = IMAGENET_INDICES[name]
        index[row, : len(indices)] = torch.tensor(indices)
        valid[row, : len(indices)] = True
    return index, valid


class CategoryMapper:
    """Maps (N, 1000) ImageNet probabilities to (N, 16) category scores on the probabilities' device.

    The matrix (or the padded index table for ``max``) is built once per device and dtype, so the
    mapping costs one matrix product per batch and no Python loop over categories.
    """

    def __init__(self, aggregation: Aggregation = "mean") -> None:
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
        self.aggregation = aggregation
        self._cache: dict[tuple[torch.device, torch.dtype], tuple[torch.Tensor, ...]] = {}

    def _tensors(self, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        key = (device, dtype)
        if key not in self._cache:
            if self.aggregation == "max":
                index, valid = _all_indices_padded()
                self._cache[key] = (index.to(device), valid.to(device))
            else:
                self._cache[key] = (aggregation_matrix(self.aggregation, dtype=dtype).to(device),)
        return self._cache[key]

    def __call__(self, probabilities: torch.Tensor) -> torch.Tensor:
        if probabilities.ndim != 2 or probabilities.shape[1] != NUM_IMAGENET_CLASSES:
            raise ValueError(
                f"expected ImageNet probabilities of shape (N, {NUM_IMAGENET_CLASSES}), "
                f"got {tuple(probabilities.shape)}; is the model a 1000-class ImageNet classifier?"
            )
        tensors = self._tensors(probabilities.device, probabilities.dtype)
        if self.aggregation == "max":
            index, valid = tensors
            gathered = probabilities[:, index]  # (N, 16, width)
            return gathered.masked_fill(~valid, float("-inf")).amax(dim=2)
        return probabilities @ tensors[0]


def map_to_categories(probabilities: torch.Tensor, aggregation: Aggregation = "mean") -> torch.Tensor:
    """Functional form of :class:`CategoryMapper`."""
    return CategoryMapper(aggregation)(probabilities)
