"""REFINED-BIAS's rank measures (Kim et al. 2026): hand-computed, and against the reference's sort-and-find."""

from __future__ import annotations

import numpy as np
import pytest

from modelval.behaviour.categories import CATEGORIES, IMAGENET_LABEL_MAP, LabelMap
from modelval.behaviour.cue_conflict import Stimulus
from modelval.behaviour.refined_bias import _category_ranks, rank_sensitivity
from modelval.errors import DataError

FIVE = LabelMap({"cat": (0, 1), "dog": (2,), "bear": (3,)}, origin="a five-output test head")


def test_hand_computed_ranks_and_means():
    scores = np.array([[0.10, 0.50, 0.20, 0.15, 0.05], [0.30, 0.10, 0.05, 0.40, 0.15]])
    stimuli = [Stimulus("cat/cat1-dog2.png", "cat", "dog"), Stimulus("dog/dog1-bear1.png", "dog", "bear")]
    # row 1: cat's best output (0.50) is the top -> rank 1; dog (0.20) has one output above it -> rank 2
    # row 2: dog (0.05) has four above -> rank 5; bear (0.40) is the top -> rank 1
    assert list(_category_ranks(scores, ["cat", "dog"], FIVE)) == [1, 5]
    result = rank_sensitivity(scores, stimuli, FIVE)
    assert result.shape_mrr == pytest.approx((1 + 1 / 5) / 2)
    assert result.texture_mrr == pytest.approx((1 / 2 + 1) / 2)
    assert result.per_category["dog"] == {"shape_mrr": pytest.approx(0.2), "texture_mrr": pytest.approx(0.5),
                                          "images_as_shape": 1, "images_as_texture": 1}  # fmt: skip


def _reference_rank(row: np.ndarray, target: str) -> int:
    """The reference's way: sort all outputs, name each by its category, the first position of the target."""
    owner = {index: name for name, indices in IMAGENET_LABEL_MAP.indices.items() for index in indices}
    names = [owner.get(int(index), f"class{index}") for index in np.argsort(-row, kind="stable")]
    return names.index(target) + 1


def test_equals_the_reference_on_random_scores_over_1000_outputs():
    rng = np.random.default_rng(0)
    scores = rng.random((200, 1000))  # continuous: no ties
    targets = [CATEGORIES[i] for i in rng.integers(0, 16, 200)]
    ours = _category_ranks(scores, targets)
    assert list(ours) == [_reference_rank(row, target) for row, target in zip(scores, targets, strict=True)]


def test_ties_get_the_better_rank_and_bad_input_is_one_line():
    assert list(_category_ranks(np.array([[0.5, 0.5, 0.5, 0.5, 0.5]]), ["dog"], FIVE)) == [1]
    with pytest.raises(DataError, match="no cue-conflict images"):
        rank_sensitivity(np.zeros((1, 5)), [Stimulus("cat/cat1-cat1.png", "cat", "cat")], FIVE)
    with pytest.raises(DataError, match="'elephant' has no output"):
        _category_ranks(np.zeros((1, 5)), ["elephant"], FIVE)
