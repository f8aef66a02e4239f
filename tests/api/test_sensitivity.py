"""The protocol-sensitivity card on the bundled model: every variant, one forward per distinct input.

The card runs on every 4th stimulus (320 of 1280): its mechanics do not need the full set, and its
numbers are checked against the session's full-set evaluations restricted to the same images.
"""

from __future__ import annotations

import dataclasses
import json
import math
from itertools import pairwise

import numpy as np
import pytest
import torch

from modelval import jsonio
from modelval.api.protocol import format_card, sensitivity_card
from modelval.behaviour.sensitivity import FACTORS, forwards_needed, protocol_variants
from modelval.figures import plot_sensitivity_card, save
from modelval.preprocessing import PreprocessConfig


class CountingModel(torch.nn.Module):
    """Counts the batches that go through the wrapped model."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.batches = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.batches += 1
        return self.model(x)


SUBSET = slice(None, None, 4)


@pytest.fixture(scope="module")
def subset(modelval_stimulus_set):
    from modelval.datasets.stimulus_set import StimulusSet

    return StimulusSet(
        modelval_stimulus_set.root, modelval_stimulus_set.stimuli[SUBSET], modelval_stimulus_set.images[SUBSET]
    )


# The card evaluates 320 stimuli under every variant (~12 s): the tests that use it are `slow`.
@pytest.fixture(scope="module")
def card(bundled_model, subset):
    counting = CountingModel(bundled_model.model)
    card = sensitivity_card(
        counting, bundled_model.config.preprocess, subset, model_name="efficientnet_lite0",
        batch_size=48, device="cpu", progress=False,
    )  # fmt: skip
    return card, counting.batches / math.ceil(len(subset) / 48)


def subset_result(evaluation):
    from modelval.behaviour.shape_bias import compute_shape_bias

    return compute_shape_bias(evaluation.decisions[SUBSET], n_bootstrap=0)


def row(card, factor, value):
    return next(r for r in card.variants if (r.variant.factor, r.variant.value) == (factor, value))


@pytest.mark.slow
def test_reference_is_the_official_protocol(card, bundled_evaluations):
    card, _ = card
    reference, full_set = card.reference.result, subset_result(bundled_evaluations("model"))
    assert (reference.shape_hits, reference.texture_hits, reference.other) == (
        full_set.shape_hits, full_set.texture_hits, full_set.other,
    )  # fmt: skip
    assert reference.conflict_images == full_set.conflict_images


@pytest.mark.slow
def test_wrong_normalization_matches_the_known_result(card, bundled_evaluations):
    card, _ = card
    imagenet = row(card, "normalization", "imagenet")
    own, wrong = (bundled_evaluations(n).decisions[SUBSET] for n in ("model", "imagenet"))
    assert imagenet.flips == sum(a.response != b.response for a, b in zip(own, wrong, strict=True)) > 50
    assert imagenet.result.shape_hits == subset_result(bundled_evaluations("imagenet")).shape_hits
    assert row(card, "normalization", "half").flips == 0  # the bundled model's own mean/std is 0.5/0.5


@pytest.mark.slow
def test_one_forward_per_distinct_input(card):
    card, passes = card
    # Distinct inputs: the reference (= no resize with either interpolation = model/half normalization,
    # and the 3 aggregations reuse its softmax), 256-crop-224 (= the source's own eval transform), the
    # same with bilinear instead of its own bicubic, and the imagenet normalization.
    assert passes == card.forwards == 4
    for value in ("bilinear", "bicubic"):
        assert row(card, "interpolation", value).flips == 0  # no resize: interpolation cannot act
    assert row(card, "resize", "256-crop-224").flips == row(card, "resize", "source-256-crop-224").flips > 0


@pytest.mark.slow
def test_variants_equal_to_the_reference_are_marked_not_ranked(card):
    card, _ = card
    same = {r.variant.label: r.same_as for r in card.variants if not r.is_effect}
    assert same == {
        "resize: none": "reference",
        "resize: source-256-crop-224": "resize: 256-crop-224",
        "interpolation: bilinear": "reference",
        "interpolation: bicubic": "reference",
        "normalization: model": "reference",
        "normalization: half": "reference",
        "aggregation: mean": "reference",
    }
    payload = json.loads(jsonio.dumps(card.to_dict()))
    marked = next(v for v in payload["variants"] if v["value"] == "half")
    assert marked["p"] is None and "not an effect" in marked["null_reasons"]["p"]


@pytest.mark.slow
def test_interpolation_is_varied_where_it_can_act(card, bundled_evaluations):
    """Under resize 256 / crop 224: bilinear against the model's own bicubic, a paired change with a test."""
    card, _ = card
    variant = row(card, "interpolation", "bilinear (resize 256-crop-224)")
    assert variant.variant.baseline == "resize: 256-crop-224" and variant.is_effect
    resized = row(card, "resize", "256-crop-224")
    assert variant.delta == pytest.approx(variant.result.shape_bias - resized.result.shape_bias)
    assert variant.flips > 0 and 0 <= variant.p <= 1
    effect = next(e for e in card.effects() if e.factor == "interpolation")
    assert effect.row is variant  # the only interpolation row that is an effect


@pytest.mark.slow
def test_every_effect_has_a_paired_interval_and_test(card, bundled_evaluations):
    """Δ, its paired interval and p refer to the same two protocols on the same stimuli."""
    from modelval.behaviour.permutation import permutation_test

    card, _ = card
    imagenet = row(card, "normalization", "imagenet")
    low, high = imagenet.delta_ci95
    assert low < imagenet.delta < high and imagenet.test is not None
    own, wrong = (bundled_evaluations(n).decisions[SUBSET] for n in ("model", "imagenet"))

    def terms(decisions):
        conflicts = [d for d in decisions if d.is_conflict]
        shape = np.array([d.response == d.shape for d in conflicts], dtype=float)
        return shape, shape + np.array([d.response == d.texture for d in conflicts], dtype=float)

    expected = permutation_test(*terms(wrong), *terms(own), permutations=card.permutations, seed=card.seed)
    assert imagenet.p == expected.p and imagenet.test.observed == pytest.approx(imagenet.delta)
    payload = card.to_dict()
    variant = next(v for v in payload["variants"] if v["value"] == "imagenet")
    assert {"delta", "delta_ci95", "p", "baseline", "same_as"} <= variant.keys()
    assert payload["ci95_resampling"] == "texture" and payload["test"]["method"] == "paired permutation"


@pytest.mark.slow
def test_ranking_says_not_distinguishable_where_the_data_do_not_separate(card):
    card, _ = card
    ranked = [e for e in card.effects() if e.row is not None]
    assert len(card.separations) == len(ranked) - 1
    for separation, (first, second) in zip(card.separations, pairwise(ranked), strict=True):
        assert (separation.first, separation.second) == (first.factor, second.factor)
        assert separation.difference == pytest.approx(first.size - second.size)
    text = card.ranking_text()
    for separation in card.separations:
        assert (" > " if separation.distinguishable else " ≈ ") in text
    if card.separations and not card.separations[0].distinguishable:
        assert card.top_factor == "not distinguishable"


@pytest.mark.slow
def test_ranking_orders_the_factors_by_their_largest_effect(card):
    card, _ = card
    ranking = card.ranking()
    assert sorted(name for name, _ in ranking) == sorted(FACTORS)
    effects = [value for _, value in ranking]
    assert effects == sorted(effects, reverse=True)
    top, effect = ranking[0]
    assert effect == max(abs(r.delta) for r in card.variants if r.is_effect)
    assert card.top_factor in (top, "not distinguishable")
    assert f"moves the number most: {card.top_factor}" in format_card(card)


@pytest.mark.slow
def test_card_is_strict_json(card, tmp_path):
    card, _ = card
    payload = json.loads(jsonio.dumps(card.to_dict()), parse_constant=lambda c: pytest.fail(c))
    assert {"reference", "variants", "forwards", "top_factor"} <= payload.keys()
    assert {"factor", "value", "shape_bias", "ci95", "cue_accuracy", "flips"} <= payload["variants"][0].keys()
    figure = plot_sensitivity_card(card)
    labels = [tick.get_text() for tick in figure.axes[0].get_yticklabels()]
    assert len(labels) == sum(r.is_effect for r in card.variants)  # rows equal to the reference are not drawn
    save(figure, tmp_path / "card.png")
    assert (tmp_path / "card.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    ("source", "distinct"),
    [
        # timm DeiT: its own eval transform (248/224) differs from 256/224: one more distinct input, and
        # bilinear under each of the two resizes two more.
        (PreprocessConfig(interpolation="bicubic", resize=248, crop=224), 6),
        # no source transform at all: reference, 256-crop-224 (+ its bicubic twin), half normalization.
        (PreprocessConfig(), 4),
    ],
)
def test_identical_inputs_are_found_from_the_configs(source, distinct):
    reference, variants = protocol_variants(source)
    assert forwards_needed([reference, *variants]) == distinct
    assert dataclasses.replace(reference.config) == reference.config  # configs compare by value
