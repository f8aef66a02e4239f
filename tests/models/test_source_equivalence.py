"""Same weights, three sources (timm, transformers, torch.hub): the logits must agree.

A random-init timm DeiT is converted to the transformers ViT layout (config built locally) and laid
out in an HF cache; timm's own copy goes into the cache under ``timm/...fb_in1k``; the release format
is served for the torch.hub path. The *registered* entries then load them through their real code
paths, offline. Equal logits settle "is it the model source?" whenever the weights are the same.
"""

from __future__ import annotations

import pytest
import torch

from modelval.models import load_model, weights_status
from modelval.models.convert import hf_vit_from_timm_state_dict, timm_vit_to_hf_vit
from modelval.models.deit import DEIT_REPO_PREPROCESS, _deit_hub_entry
from modelval.preprocessing import prepare_batch
from weights_helpers import (
    VIT_HALF_PROCESSOR,
    random_deit,
    save_deit_release,
    serve,
    write_deit_hub,
    write_hf_deit,
    write_timm_deit,
)

TOLERANCE = 1e-4


@pytest.fixture
def three_sources(tmp_path, isolated_caches, temporary_entry):
    reference = random_deit("tiny", seed=1)
    write_hf_deit(isolated_caches["hf"], reference, "tiny", VIT_HALF_PROCESSOR, tmp_path)
    write_timm_deit(isolated_caches["hf"], reference, "tiny", tmp_path)
    write_deit_hub(isolated_caches["torch"])
    served = save_deit_release(reference, tmp_path / "served")
    with serve(served.parent) as server:
        hub = temporary_entry(_deit_hub_entry("tiny", url=f"{server.url}/{served.name}", name="deit_tiny_hub_test"))
        models = {
            "hub": load_model(hub.name, progress=False).model,
            "hf": load_model("deit_tiny_hf", offline=True, progress=False).model,
            "timm": load_model("deit_tiny_timm", offline=True, progress=False).model,
        }
    return reference, models


@pytest.mark.slow
def test_timm_hf_and_hub_give_equal_logits_on_real_stimuli(three_sources, few_stimuli):
    reference, models = three_sources
    assert weights_status("deit_tiny_hf").available
    assert weights_status("deit_tiny_timm").available
    assert type(models["hf"].inner).__name__ == "ViTForImageClassification"
    assert type(models["timm"]).__module__ == "timm.models.vision_transformer"
    # One input tensor for all: this test isolates the model code path from preprocessing.
    inputs = prepare_batch(few_stimuli, DEIT_REPO_PREPROCESS.for_stimuli())
    with torch.inference_mode():
        expected = reference(inputs)
        logits = {name: model(inputs) for name, model in models.items()}
    for name, value in logits.items():
        assert value.shape == (len(few_stimuli), 1000), name
        assert (value - expected).abs().max().item() < TOLERANCE, name
    # The comparison has teeth: another random model is far from these logits.
    with torch.inference_mode():
        other = random_deit("tiny", seed=2)(inputs)
    assert (other - expected).abs().max().item() > 100 * TOLERANCE


@pytest.mark.parametrize("variant", ["small"])
@pytest.mark.slow
def test_conversion_of_a_larger_variant(variant, few_stimuli):
    reference = random_deit(variant, seed=3)
    converted = hf_vit_from_timm_state_dict(reference.state_dict(), variant)
    inputs = prepare_batch(few_stimuli[:2], DEIT_REPO_PREPROCESS.for_stimuli())
    with torch.inference_mode():
        difference = (converted(pixel_values=inputs).logits - reference(inputs)).abs().max().item()
    assert difference < TOLERANCE


def test_conversion_refuses_keys_it_does_not_know():
    state = random_deit("tiny").state_dict()
    state["dist_token"] = torch.zeros(1, 1, 192)  # a distilled DeiT is not a plain ViT
    with pytest.raises(ValueError, match="dist_token"):
        timm_vit_to_hf_vit(state)
