"""Rank-based cue sensitivity (Kim et al., 2026, REFINED-BIAS): mean reciprocal rank of the shape and texture labels.

The cue-conflict shape bias looks only at the 16 categories and only at the top decision. REFINED-BIAS
asks how high the model ranks each cue's label among **all** its outputs: for an image whose shape is
category ``s``, the rank of ``s`` is one plus the number of outputs scored strictly higher than the best
of ``s``'s outputs (its ImageNet classes), so rank 1 means ``s`` is the model's top class; the shape
score is the mean of ``1 / rank`` over the conflict images, and the texture score the same for the
texture category. Both lie in (0, 1]; they are reported side by side, not as a ratio (the paper's point
is absolute sensitivity to each cue). Ties are given the better rank.

The reference implementation (github.com/PumjunKim/REFINED-BIAS, ``refined_bias/utils.py``, ``mrr_acc``)
sorts the 1000 softmax probabilities, maps each ImageNet class to its category name and takes the first
position of the target name: the same number as here up to ties.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from modelval.behaviour.categories import CATEGORIES, IMAGENET_LABEL_MAP, LabelMap
from modelval.behaviour.cue_conflict import Stimulus
from modelval.errors import DataError


def _category_ranks(scores: np.ndarray, targets: Sequence[str], label_map: LabelMap = IMAGENET_LABEL_MAP) -> np.ndarray:
    """For each row of ``scores`` (N, K), the rank (1 = top) of ``targets[i]``'s best-scored output among all K."""
    scores = np.asarray(scores)
    if scores.ndim != 2 or len(scores) != len(targets):
        raise DataError(f"scores must be (N, outputs) with one target per row; got {scores.shape} for {len(targets)}")
    label_map.check_outputs(scores.shape[1])
    ranks = np.empty(len(targets), dtype=np.int64)
    for category in set(targets):
        indices = np.asarray(label_map.indices[category], dtype=np.int64)
        if not indices.size:
            raise DataError(f"category {category!r} has no output in the label map: its rank is undefined")
        rows = np.flatnonzero(np.asarray(targets) == category)
        best = scores[np.ix_(rows, indices)].max(axis=1)
        ranks[rows] = 1 + (scores[rows] > best[:, None]).sum(axis=1)
    return ranks


@dataclass(frozen=True)
class RankSensitivity:
    """Mean reciprocal rank of the shape label and of the texture label over the conflict images."""

    shape_mrr: float
    texture_mrr: float
    images: int
    per_category: dict[str, dict[str, float]]

    def to_dict(self) -> dict[str, object]:
        return {
            "shape_mrr": self.shape_mrr,
            "texture_mrr": self.texture_mrr,
            "conflict_images": self.images,
            "per_category": self.per_category,
            "definition": "mean over conflict images of 1/rank of the shape (texture) category among all outputs; "
            "rank = 1 + outputs scored above the category's best output (Kim et al. 2026, REFINED-BIAS)",
        }


def rank_sensitivity(
    scores: np.ndarray, stimuli: Sequence[Stimulus], label_map: LabelMap = IMAGENET_LABEL_MAP
) -> RankSensitivity:
    """REFINED-BIAS's shape and texture MRR of ``scores`` (softmax probabilities or logits: ranks are the same).

    Parameters
    ----------
    scores
        ``(N, 1000)`` probabilities or logits.
    stimuli
        The stimuli, in the rows' order.
    label_map
        The head's label map (default: ImageNet's).
    """
    conflicts = [i for i, stimulus in enumerate(stimuli) if stimulus.is_conflict]
    if not conflicts:
        raise DataError("no cue-conflict images (shape != texture): the shape and texture ranks need them")
    rows = np.asarray(scores)[conflicts]
    shapes = [stimuli[i].shape for i in conflicts]
    textures = [stimuli[i].texture for i in conflicts]
    shape_rr = 1.0 / _category_ranks(rows, shapes, label_map)
    texture_rr = 1.0 / _category_ranks(rows, textures, label_map)
    per_category = {}
    for category in CATEGORIES:
        as_shape, as_texture = np.asarray(shapes) == category, np.asarray(textures) == category
        if as_shape.any() or as_texture.any():
            # the shape score over the images whose shape is the category, the texture score over those whose
            # texture is
            per_category[category] = {
                "shape_mrr": float(shape_rr[as_shape].mean()) if as_shape.any() else float("nan"),
                "texture_mrr": float(texture_rr[as_texture].mean()) if as_texture.any() else float("nan"),
                "images_as_shape": int(as_shape.sum()),
                "images_as_texture": int(as_texture.sum()),
            }
    return RankSensitivity(float(shape_rr.mean()), float(texture_rr.mean()), len(conflicts), per_category)
