"""End to end on the real 1280 stimuli with the real bundled ImageNet model (EfficientNet-Lite0)."""


import numpy as np
import pytest
import torch

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.decisions import by_stimulus, read_decisions
from modelval.datasets.stimulus_set import StimulusSet
from modelval.errors import ModelvalError
from modelval.evaluation import category_probabilities, decisions_from_probabilities, evaluate
from modelval.paths import package_data
from modelval.runner.matrix import MAX_BASELINE_FLIPS

BASELINE = package_data("baselines/efficientnet_lite0.csv")
CHANCE = 1 / len(CATEGORIES)


@pytest.mark.slow
def test_bundled_model_is_a_texture_biased_imagenet_cnn(bundled_evaluations):
    result = bundled_evaluations("model").result
    assert result.conflict_images == 1200 and result.excluded_no_conflict == 80
    # A real ImageNet classifier names the shape or the texture far more often than 16-way chance...
    assert result.cue_accuracy > 5 * CHANCE
    # ... and, like every ImageNet-trained CNN in Geirhos et al., prefers texture: far below humans (~96%).
    assert result.shape_bias < 0.5
    assert result.texture_hits > 2 * result.shape_hits
    assert result.ci_low < result.shape_bias < result.ci_high


@pytest.mark.slow
def test_wrong_normalization_changes_decisions(bundled_evaluations):
    correct, wrong = bundled_evaluations("model"), bundled_evaluations("imagenet")
    assert correct.config.normalization_name == "half" and wrong.config.normalization_name == "imagenet"
    flips = sum(a.response != b.response for a, b in zip(correct.decisions, wrong.decisions, strict=True))
    assert flips > 100
    assert correct.result.cue_accuracy > wrong.result.cue_accuracy


@pytest.mark.slow
def test_decisions_match_the_committed_baseline(bundled_evaluations):
    """The regression check after preprocessing changes: per-image decisions vs modelval/data/baselines."""
    current = by_stimulus(bundled_evaluations("model").decisions)
    baseline = by_stimulus(read_decisions(BASELINE))
    assert current.keys() == baseline.keys()
    flipped = sorted(
        f"{name}: {baseline[name].response} -> {current[name].response}"
        for name in current
        if current[name].response != baseline[name].response
    )
    assert len(flipped) <= MAX_BASELINE_FLIPS, f"{len(flipped)} decisions flipped:\n" + "\n".join(flipped[:30])


@pytest.mark.slow
def test_decisions_do_not_depend_on_batch_size(bundled_model, modelval_stimulus_set):
    subset = modelval_stimulus_set.images[::20]  # 64 images from every category
    config = bundled_model.entry.preprocess.for_stimuli(None)
    runs = {
        size: category_probabilities(bundled_model.model, subset, config, batch_size=size, device="cpu", progress=False)
        for size in (1, 7, 64)
    }
    choices = {size: probabilities.argmax(1) for size, probabilities in runs.items()}
    assert np.array_equal(choices[1], choices[7]) and np.array_equal(choices[1], choices[64])
    np.testing.assert_allclose(runs[1], runs[64], rtol=0, atol=1e-5)


@pytest.mark.slow
def test_decisions_do_not_depend_on_decoding_workers(bundled_model, modelval_data_root):
    from modelval.datasets.stimuli import decode_stimuli, discover_stimuli

    stimuli = discover_stimuli(modelval_data_root)[5::40]
    config = bundled_model.entry.preprocess.for_stimuli(None)
    results = []
    for workers in (0, 2):
        images = decode_stimuli(modelval_data_root, stimuli, workers=workers, progress=False)
        probabilities = category_probabilities(bundled_model.model, images, config, device="cpu", progress=False)
        results.append([d.response for d in decisions_from_probabilities(stimuli, probabilities)])
    assert results[0] == results[1]


def test_accepts_callables_and_hf_style_outputs(modelval_stimulus_set):
    """Any callable returning ImageNet logits works, including outputs with a ``.logits`` attribute."""

    class Output:
        def __init__(self, logits):
            self.logits = logits

    def always_cat(inputs):
        logits = torch.zeros(len(inputs), 1000)
        logits[:, 281] = 10.0  # tabby cat
        return Output(logits)

    stimuli = modelval_stimulus_set
    small = StimulusSet(stimuli.root, stimuli.stimuli[:32], stimuli.images[:32])
    evaluation = evaluate(always_cat, bundled_config(), small, progress=False, n_bootstrap=0)
    assert {d.response for d in evaluation.decisions} == {"cat"}
    assert evaluation.result.shape_hits == 0  # the first 32 stimuli are airplanes


def bundled_config():
    from modelval.preprocessing import PreprocessConfig

    return PreprocessConfig()


def test_non_imagenet_models_get_a_clear_error(modelval_stimulus_set):
    with pytest.raises(ModelvalError, match=r"head has 10 outputs, not ImageNet-1k's 1000: pass --label-map"):
        category_probabilities(lambda x: torch.zeros(len(x), 10), modelval_stimulus_set.images[:2], bundled_config())
    with pytest.raises(ModelvalError, match="returned str, expected a logits tensor"):
        category_probabilities(lambda x: "nope", modelval_stimulus_set.images[:2], bundled_config())
