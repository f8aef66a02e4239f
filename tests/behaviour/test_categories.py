"""The 16-category mapping against the reference toolbox's lists and a plain-loop reference."""

import pytest
import torch

from modelval.behaviour.categories import (
    CATEGORIES,
    IMAGENET_INDICES,
    CategoryMapper,
    aggregation_matrix,
    category_index,
    map_to_categories,
)
from modelval.errors import ModelvalError

# Counts of ImageNet classes per category in model-vs-human's human_categories.py (*_indices lists).
REFERENCE_COUNTS = {
    "airplane": 1, "bear": 4, "bicycle": 2, "bird": 49, "boat": 5, "bottle": 7, "car": 3, "cat": 6,
    "chair": 4, "clock": 3, "dog": 109, "elephant": 2, "keyboard": 2, "knife": 1, "oven": 1, "truck": 8,
}  # fmt: skip


def test_categories_are_the_sixteen_sorted():
    assert tuple(sorted(REFERENCE_COUNTS)) == CATEGORIES


def test_index_counts_match_the_reference_toolbox():
    assert {c: len(v) for c, v in IMAGENET_INDICES.items()} == REFERENCE_COUNTS


def test_indices_are_disjoint_and_in_range():
    every = [i for v in IMAGENET_INDICES.values() for i in v]
    assert len(every) == 207 == len(set(every))
    assert all(0 <= i < 1000 for i in every)


def test_spot_check_known_classes():
    # 404 = airliner, 499 = cleaver, 766 = rotisserie, 281 = tabby cat in the ImageNet-1k class order.
    assert IMAGENET_INDICES["airplane"] == (404,)
    assert IMAGENET_INDICES["knife"] == (499,)
    assert IMAGENET_INDICES["oven"] == (766,)
    assert 281 in IMAGENET_INDICES["cat"]


def _loop_reference(probabilities: torch.Tensor, aggregation: str) -> torch.Tensor:
    """What the reference toolbox does: a Python loop over categories."""
    columns = []
    for name in CATEGORIES:
        values = probabilities[:, list(IMAGENET_INDICES[name])]
        columns.append({"mean": values.mean(1), "sum": values.sum(1), "max": values.amax(1)}[aggregation])
    return torch.stack(columns, dim=1)


@pytest.mark.parametrize("aggregation", ["mean", "sum", "max"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mapping_equals_loop_reference(aggregation, seed):
    generator = torch.Generator().manual_seed(seed)
    probabilities = torch.softmax(torch.randn(64, 1000, generator=generator) * 3, dim=1)
    mapped = map_to_categories(probabilities, aggregation)
    expected = _loop_reference(probabilities, aggregation)
    torch.testing.assert_close(mapped, expected, rtol=1e-5, atol=1e-7)
    assert torch.equal(mapped.argmax(1), expected.argmax(1))


def test_mean_matrix_columns_sum_to_one():
    matrix = aggregation_matrix("mean")
    torch.testing.assert_close(matrix.sum(0), torch.ones(16))
    assert int((aggregation_matrix("sum") > 0).sum()) == 207


def test_mapper_rejects_a_head_that_is_not_1000_way_without_a_label_map():
    with pytest.raises(ModelvalError, match=r"head has 10 outputs, not ImageNet-1k's 1000: pass --label-map"):
        CategoryMapper()(torch.rand(4, 10))


def test_unknown_aggregation_and_category_are_clear_errors():
    with pytest.raises(ValueError, match="aggregation must be one of"):
        CategoryMapper("median")
    with pytest.raises(ValueError, match="unknown category 'zebra'"):
        category_index("zebra")
    with pytest.raises(ValueError, match="not linear"):
        aggregation_matrix("max")
