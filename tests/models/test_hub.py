"""The torch.hub path: ``torch.hub.load(..., source="local")`` on a facebookresearch/deit-shaped checkout."""

from __future__ import annotations

import sys

import pytest
import torch

from modelval.errors import WeightsNotAvailableError
from modelval.models import load_model, weights_status
from modelval.models.deit import DEIT_RELEASE_URLS, _deit_hub_entry
from modelval.preprocessing import prepare_batch
from weights_helpers import random_deit, save_deit_release, serve, write_deit_hub


@pytest.fixture
def hub_model(tmp_path, isolated_caches, temporary_entry):
    """A hub checkout in $TORCH_HOME, and a DeiT-tiny release file served on 127.0.0.1, loaded via load_model."""
    write_deit_hub(isolated_caches["torch"])
    reference = random_deit("tiny")
    served = save_deit_release(reference, tmp_path / "served")
    with serve(served.parent) as server:
        entry = temporary_entry(_deit_hub_entry("tiny", url=f"{server.url}/{served.name}", name="deit_tiny_hub_test"))
        loaded = load_model(entry.name, progress=False)
    return reference, loaded, served


@pytest.mark.slow
def test_hub_entry_runs_the_hub_code_and_matches_timm(hub_model, few_stimuli, isolated_caches):
    reference, loaded, served = hub_model
    assert type(loaded.model).__module__ == "timm.models.vision_transformer"
    assert (isolated_caches["checkpoints"] / served.name).is_file()
    inputs = prepare_batch(few_stimuli, loaded.config.preprocess.for_stimuli())
    with torch.inference_mode():
        difference = (loaded.model(inputs) - reference(inputs)).abs().max().item()
    assert difference < 1e-4


@pytest.mark.slow
def test_hub_code_does_not_leak_into_timm_or_sys_modules(hub_model):
    import timm
    from timm.models import _registry

    # DeiT's models.py re-registers timm's own names; after loading, timm's functions must be back.
    assert _registry._model_entrypoints["deit_tiny_patch16_224"].__module__ == "timm.models.deit"
    assert "models" not in sys.modules or "facebookresearch_deit" not in str(sys.modules["models"])
    assert timm.create_model("deit_tiny_patch16_224.fb_in1k", pretrained=False) is not None


def test_missing_hub_code_and_checkpoint_are_both_named(isolated_caches):
    status = weights_status("deit_tiny_hub")
    assert not status.available
    hub_dir = isolated_caches["torch"] / "hub" / "facebookresearch_deit_main"
    assert str(hub_dir) in status.message
    assert DEIT_RELEASE_URLS["tiny"] in status.message
    assert str(isolated_caches["checkpoints"] / "deit_tiny_patch16_224-a1311bcf.pth") in status.message
    assert "modelval models fetch deit_tiny_hub" in status.message

    write_deit_hub(isolated_caches["torch"])
    status = weights_status("deit_tiny_hub")
    assert str(hub_dir) not in status.message  # the code is there now: only the file is missing
    with pytest.raises(WeightsNotAvailableError) as caught:
        load_model("deit_tiny_hub", offline=True, progress=False)
    assert str(caught.value).startswith(status.message)
