"""The 16 entry-level categories of the cue-conflict experiment and their ImageNet-1k classes.

The index lists are exactly the ``*_indices`` lists of the reference toolbox (bethgelab
model-vs-human, ``modelvshuman/helper/human_categories.py``); 207 ImageNet classes in all,
disjoint. A model's 1000 probabilities become 16 category scores by aggregating each category's
classes (the mean by default, as in the paper's evaluation), implemented as one matrix product.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from modelval.errors import DataError, ModelvalError

if TYPE_CHECKING:  # torch loads on first use, so reading categories or decisions stays light
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
    """The index of a category in :data:`CATEGORIES`.

    Parameters
    ----------
    name
        One of the 16 categories.
    """
    try:
        return CATEGORIES.index(name)
    except ValueError:
        raise ValueError(f"unknown category {name!r}; expected one of: {', '.join(CATEGORIES)}") from None


@dataclass(frozen=True)
class LabelMap:
    """Output indices per category; ``origin`` says where the map came from (a file, or ImageNet-1k)."""

    indices: Mapping[str, tuple[int, ...]]
    origin: str = "ImageNet-1k (model-vs-human's table)"

    def __post_init__(self) -> None:
        where = self.origin
        unknown = [name for name in self.indices if name not in CATEGORIES]
        if unknown:
            hints = []
            for name in unknown:
                close = difflib.get_close_matches(name, CATEGORIES, n=1)
                hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise DataError(
                f"label map {where}: unknown categories {', '.join(hints)}; the 16 names are: {', '.join(CATEGORIES)}"
            )
        if not self.indices:
            raise DataError(f"label map {where} maps no category; map at least one of: {', '.join(CATEGORIES)}")
        owner: dict[int, str] = {}
        for name in CATEGORIES:
            if name not in self.indices:
                continue  # a head without this category: it can never be the model's decision
            values = self.indices[name]
            if len(values) == 0:
                raise DataError(f"label map {where}: {name!r} maps to no output; give it at least one index")
            for value in values:
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise DataError(f"label map {where}: {name!r} has index {value!r}; indices are whole numbers >= 0")
                if value in owner:
                    raise DataError(
                        f"label map {where}: output {value} is mapped to both {owner[value]!r} and {name!r}; "
                        "the categories' sets must be disjoint"
                    )
                owner[value] = name
        object.__setattr__(self, "indices", {name: tuple(self.indices.get(name, ())) for name in CATEGORIES})

    @property
    def unmapped(self) -> tuple[str, ...]:
        """Categories the head has no output for (never decided)."""
        return tuple(name for name in CATEGORIES if not self.indices[name])

    @property
    def is_imagenet(self) -> bool:
        return dict(self.indices) == dict(IMAGENET_INDICES)

    @property
    def largest_index(self) -> int:
        return max(max(values) for values in self.indices.values() if values)

    def check_outputs(self, outputs: int) -> None:
        """Raise a clear error when a head with ``outputs`` logits cannot be read with this map.

        Parameters
        ----------
        outputs
            The number of logits of the head.
        """
        if self.is_imagenet and outputs != NUM_IMAGENET_CLASSES:
            raise ModelvalError(
                f"the model's head has {outputs} outputs, not ImageNet-1k's {NUM_IMAGENET_CLASSES}: pass "
                "--label-map FILE.json mapping each of the 16 categories to its output indices "
                "(`label_map` in the models file)"
            )
        if self.largest_index >= outputs:
            bad = {n: [v for v in vs if v >= outputs] for n, vs in self.indices.items()}
            listing = ", ".join(f"{n}: {vs}" for n, vs in bad.items() if vs)
            raise ModelvalError(
                f"label map {self.origin}: indices out of range for a head with {outputs} outputs "
                f"(valid: 0 to {outputs - 1}): {listing}"
            )

    def to_dict(self) -> dict[str, object]:
        return {
            "origin": self.origin,
            "indices": {name: list(values) for name, values in self.indices.items() if values},
            "unmapped": list(self.unmapped),
        }


IMAGENET_LABEL_MAP = LabelMap(IMAGENET_INDICES)


def aggregation_matrix(
    aggregation: Aggregation = "mean",
    *,
    dtype: torch.dtype | None = None,
    indices: Mapping[str, Sequence[int]] = IMAGENET_INDICES,
    outputs: int = NUM_IMAGENET_CLASSES,
) -> torch.Tensor:
    """An (outputs, 16) matrix M with ``probabilities @ M`` = the per-category mean (or sum) score (float32 unless
    ``dtype`` says otherwise).

    Parameters
    ----------
    aggregation
        ``"mean"`` or ``"sum"`` of the ImageNet scores of each category.
    dtype
        The matrix's dtype (default float32).
    indices
        Category -> its ImageNet indices (default: ImageNet's map).
    outputs
        The number of logits.
    """
    import torch

    if aggregation not in ("mean", "sum"):
        raise ValueError(f"aggregation {aggregation!r} is not linear; use 'mean' or 'sum' here")
    matrix = torch.zeros(outputs, len(CATEGORIES), dtype=torch.float64)
    for column, name in enumerate(CATEGORIES):
        rows = list(indices[name])
        if not rows:
            continue  # an unmapped category scores 0: below every mapped one, never the decision
        matrix[rows, column] = 1.0 / len(rows) if aggregation == "mean" else 1.0
    return matrix.to(torch.float32 if dtype is None else dtype)


def _all_indices_padded(indices: Mapping[str, Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    width = max(1, max(len(v) for v in indices.values()))
    index = torch.zeros(len(CATEGORIES), width, dtype=torch.long)
    valid = torch.zeros(len(CATEGORIES), width, dtype=torch.bool)
    for row, name in enumerate(CATEGORIES):
        values = indices[name]
        index[row, : len(values)] = torch.tensor(values)
        valid[row, : len(values)] = True
    return index, valid


class CategoryMapper:
    """Maps (N, K) output probabilities to (N, 16) category scores on the probabilities' device.

    K is 1000 for an ImageNet-1k head (model-vs-human's table); another head needs a
    :class:`~modelval.behaviour.label_map.LabelMap`, checked against K on the first batch. The matrix
    (or the padded index table for ``max``) is built once per device and dtype, so the mapping costs
    one matrix product per batch and no Python loop over categories.
    """

    def __init__(self, aggregation: Aggregation = "mean", label_map: LabelMap | None = None) -> None:
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
        self.aggregation = aggregation
        self.label_map = label_map or IMAGENET_LABEL_MAP
        self._cache: dict[tuple[torch.device, torch.dtype, int], tuple[torch.Tensor, ...]] = {}

    def _tensors(self, device: torch.device, dtype: torch.dtype, outputs: int) -> tuple[torch.Tensor, ...]:
        key = (device, dtype, outputs)
        if key not in self._cache:
            self.label_map.check_outputs(outputs)
            indices = self.label_map.indices
            if self.aggregation == "max":
                index, valid = _all_indices_padded(indices)
                self._cache[key] = (index.to(device), valid.to(device))
            else:
                matrix = aggregation_matrix(self.aggregation, dtype=dtype, indices=indices, outputs=outputs)
                self._cache[key] = (matrix.to(device),)
        return self._cache[key]

    def __call__(self, probabilities: torch.Tensor) -> torch.Tensor:
        if probabilities.ndim != 2:
            raise ValueError(f"expected probabilities of shape (N, outputs), got {tuple(probabilities.shape)}")
        tensors = self._tensors(probabilities.device, probabilities.dtype, probabilities.shape[1])
        if self.aggregation == "max":
            index, valid = tensors
            gathered = probabilities[:, index]  # (N, 16, width)
            return gathered.masked_fill(~valid, float("-inf")).amax(dim=2)
        return probabilities @ tensors[0]


def map_to_categories(
    probabilities: torch.Tensor, aggregation: Aggregation = "mean", label_map: LabelMap | None = None
) -> torch.Tensor:
    """Functional form of :class:`CategoryMapper`.

    Parameters
    ----------
    probabilities
        ``(N, outputs)`` softmax probabilities.
    aggregation
        ``"mean"`` or ``"sum"`` of the ImageNet scores of each category.
    label_map
        The head's label map (default: ImageNet's).
    """
    return CategoryMapper(aggregation, label_map)(probabilities)
