"""An evaluation hashes a model's weights once: the second evaluate() of the same model computes no digest, a
weight changed in place between two is hashed again and changes the output-cache key (issue 27)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from modelval.datasets.stimulus_set import StimulusSet
from modelval.evaluation import evaluate
from modelval.preprocessing import PreprocessConfig
from modelval.records.digests import DIGESTS_COMPUTED
from modelval.records.output_cache import OutputCache

CONFIG = PreprocessConfig(mean=(0.5,) * 3, std=(0.5,) * 3, interpolation="bicubic")


def tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, stride=4), torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(64, 1000)
    ).eval()


@pytest.fixture
def subset(stimulus_subset) -> StimulusSet:
    return StimulusSet.load(stimulus_subset(1), allow_modified=True, progress=False, cache=False)


def computed() -> dict[str, int]:
    return {kind: DIGESTS_COMPUTED[kind] for kind in ("weights", "architecture", "stimuli")}


def _evaluate(model, subset, **options):
    return evaluate(model, CONFIG, subset, device="cpu", progress=False, n_bootstrap=0, **options)


def test_a_second_evaluation_of_the_same_model_computes_no_digest(subset):
    model = tiny_model()
    before = computed()
    first = _evaluate(model, subset)
    assert computed() == {kind: n + 1 for kind, n in before.items()}  # the first pays each digest once
    second = _evaluate(model, subset)
    assert computed() == {kind: n + 1 for kind, n in before.items()}  # the second pays none
    assert second.provenance["weights_sha256"] == first.provenance["weights_sha256"]
    assert second.provenance["output_cache_key"] == first.provenance["output_cache_key"]


def test_the_bundled_model_is_hashed_once_over_two_evaluations(bundled_model, subset):
    config = bundled_model.entry.preprocess.for_stimuli(None)
    first = evaluate(bundled_model.model, config, subset, device="cpu", progress=False, n_bootstrap=0)
    before = DIGESTS_COMPUTED["weights"]
    second = evaluate(bundled_model.model, config, subset, device="cpu", progress=False, n_bootstrap=0)
    assert DIGESTS_COMPUTED["weights"] == before
    assert second.provenance["weights_sha256"] == first.provenance["weights_sha256"]
    assert [d.response for d in second.decisions] == [d.response for d in first.decisions]


def test_a_weight_changed_in_place_is_hashed_again_and_misses_the_cache(subset, tmp_path):
    model, cache = tiny_model(), OutputCache(tmp_path)
    first = _evaluate(model, subset, output_cache=cache)
    assert _evaluate(model, subset, output_cache=cache).output_cache == "hit"
    with torch.no_grad():
        model[3].bias[0] += 1.0  # one weight, in place: the same module object, other outputs
    before = DIGESTS_COMPUTED["weights"]
    changed = _evaluate(model, subset, output_cache=cache)
    assert DIGESTS_COMPUTED["weights"] == before + 1
    assert changed.provenance["weights_sha256"] != first.provenance["weights_sha256"]
    assert changed.provenance["output_cache_key"] != first.provenance["output_cache_key"]
    assert changed.output_cache == "miss"  # not the stored outputs of the old weights
    assert not np.array_equal(changed.outputs, first.outputs)


def test_channels_last_evaluations_hash_the_weights_once(subset):
    """The channels-last round trip re-lays the conv weights (new storage): modelval vouches for its own copy."""
    model = tiny_model()
    first = _evaluate(model, subset, channels_last=True)
    before = computed()
    second = _evaluate(model, subset, channels_last=True)
    assert computed() == before
    assert second.provenance["weights_sha256"] == first.provenance["weights_sha256"]
    assert model[0].weight.is_contiguous()  # the default layout is restored
