"""Zero-shot heads against open_clip's own: a random-init open_clip model with its real tokenizer.

No weights can be downloaded here, so the plumbing is checked on the architecture with random weights: the
head modelval builds must equal ``open_clip.build_zero_shot_classifier``'s, the logits must be open_clip's
``scale * normalize(image) @ head``, and SigLIP's scores must be sigmoids.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

open_clip = pytest.importorskip("open_clip")

from modelval.behaviour.categories import CATEGORIES, CategoryMapper  # noqa: E402
from modelval.errors import DataError, ModelvalError  # noqa: E402
from modelval.evaluation.forward import probabilities_from_outputs  # noqa: E402
from modelval.models import parse_spec  # noqa: E402
from modelval.models.zero_shot import (  # noqa: E402
    ZeroShotSettings,
    _class_names,
    _templates_of,
    open_clip_classifier,
)
from modelval.records.digests import architecture_digest  # noqa: E402


@pytest.fixture(scope="module")
def rn50():
    """open_clip's RN50 with random weights (seeded), and its real tokenizer."""
    torch.manual_seed(0)
    model = open_clip.create_model("RN50", pretrained=None).eval()
    return model, open_clip.get_tokenizer("RN50")


def test_names_and_templates_are_open_clips():
    assert _class_names("imagenet1k") == tuple(open_clip.IMAGENET_CLASSNAMES)
    assert _class_names("16") == CATEGORIES
    assert _templates_of("openai80") == tuple(t("{}") for t in open_clip.OPENAI_IMAGENET_TEMPLATES)
    assert _templates_of("simple7") == tuple(t("{}") for t in open_clip.SIMPLE_IMAGENET_TEMPLATES)
    assert _templates_of("{}") == ("{}",) and _templates_of("a photo of a {}.") == ("a photo of a {}.",)


def test_a_templates_file(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("# mine\na photo of a {}.\n\na drawing of a {}.\n")
    assert _templates_of(str(path)) == ("a photo of a {}.", "a drawing of a {}.")
    path.write_text("no placeholder\n")
    with pytest.raises(DataError, match="one template per line"):
        _templates_of(str(path))
    with pytest.raises(DataError, match="not a template set"):
        _templates_of("openai81")


def test_settings_are_checked():
    with pytest.raises(DataError, match="class space"):
        ZeroShotSettings(class_space="1000")
    with pytest.raises(DataError, match="logit scale"):
        ZeroShotSettings(logit_scale="learned")


def test_spec_needs_a_pretrained_tag():
    assert parse_spec("open_clip:ViT-L-14/openai").detail == "openai"
    with pytest.raises(ModelvalError, match="open_clip:<model>/<pretrained>"):
        parse_spec("open_clip:RN50")


# 112 and 16 texts; the seven-template average (13 s of text tower) is the slow tier's, one template the edit loop's.
@pytest.mark.parametrize(
    ("space", "templates"), [pytest.param("16", "simple7", marks=pytest.mark.slow), ("16", "a photo of a {}.")]
)
def test_the_head_equals_open_clips(rn50, space, templates):
    model, tokenizer = rn50
    settings = ZeroShotSettings(class_space=space, templates=templates)
    ours = open_clip_classifier(model, tokenizer, settings, source="test").head
    names = list(_class_names(space))
    theirs = open_clip.build_zero_shot_classifier(model, tokenizer, names, list(_templates_of(templates)))
    assert ours.shape == theirs.shape == (1024, len(names))
    difference = float((ours - theirs).abs().max())
    print(f"max |head - open_clip's| ({space}, {templates}): {difference:.3g}")
    assert difference < 1e-6
    assert torch.allclose(ours.norm(dim=0), torch.ones(len(names)), atol=1e-6)


def test_the_imagenet_class_space_is_open_clips():
    """The imagenet1k space's names are open_clip's ``IMAGENET_CLASSNAMES``, in order. With the head builder equal
    to open_clip's on the spaces above (the same code for any list of names), the ImageNet head is open_clip's;
    building both 1,000-class heads through the text tower took 77 s on a CPU to say the same."""
    assert _class_names("imagenet1k") == tuple(open_clip.IMAGENET_CLASSNAMES)


def test_logits_are_open_clips_and_scale_is_recorded(rn50):
    model, tokenizer = rn50
    classifier = open_clip_classifier(model, tokenizer, ZeroShotSettings(class_space="16", templates="{}"), "test")
    images = torch.rand(2, 3, 224, 224)
    with torch.no_grad():
        expected = model.logit_scale.exp() * model.encode_image(images, normalize=True) @ classifier.head
        logits = classifier(images)
    assert torch.allclose(logits, expected, atol=1e-5)
    record = classifier.zero_shot_record()
    assert record["scoring"] == "softmax" and record["logit_bias"] is None
    assert record["logit_scale_value"] == pytest.approx(1 / 0.07)  # open_clip's initial scale
    fixed = open_clip_classifier(model, tokenizer, ZeroShotSettings("16", "{}", "100"), "test")
    assert fixed.scale == 100.0


def test_siglip_scores_are_sigmoids(rn50):
    model, tokenizer = rn50
    model.logit_bias = torch.nn.Parameter(torch.tensor([-10.0]))  # what a SigLIP model carries
    try:
        classifier = open_clip_classifier(model, tokenizer, ZeroShotSettings("16", "{}"), "test")
    finally:
        del model.logit_bias
    images = torch.rand(3, 3, 224, 224)
    with torch.no_grad():
        z = model.logit_scale.exp() * model.encode_image(images, normalize=True) @ classifier.head - 10.0
        outputs = classifier(images)
    assert classifier.scoring == "sigmoid" and classifier.zero_shot_record()["logit_bias"] == -10.0
    assert torch.allclose(outputs, F.logsigmoid(z), atol=1e-5)
    # the forward path's softmax of those outputs: each class's sigmoid, normalized over the classes
    mapper = CategoryMapper("mean", _identity_map())
    probabilities = probabilities_from_outputs(outputs.numpy(), {"mean": mapper})["mean"]
    sigmoid = torch.sigmoid(z).numpy()
    assert np.allclose(probabilities, sigmoid / sigmoid.sum(axis=1, keepdims=True), atol=1e-6)
    assert (probabilities.argmax(axis=1) == sigmoid.argmax(axis=1)).all()


def _identity_map():
    from modelval.api.options import ModelOptions

    label_map = ModelOptions(zero_shot=ZeroShotSettings(class_space="16")).read_label_map()
    assert label_map is not None
    return label_map


def test_every_setting_is_in_the_output_cache_key(rn50):
    """The key hashes the module's repr (the architecture digest) and its state dict (the head is a buffer)."""
    model, tokenizer = rn50
    variants = (ZeroShotSettings("16", "{}"), ZeroShotSettings("16", "{}", "100"), ZeroShotSettings("16", "a {}"))
    classifiers = [open_clip_classifier(model, tokenizer, settings, "test") for settings in variants]
    assert len({architecture_digest(classifier) for classifier in classifiers}) == 3
    for settings, classifier in zip(variants, classifiers, strict=True):
        assert json_of(settings) in repr(classifier) and "head" in classifier.state_dict()
    assert not torch.equal(classifiers[0].head, classifiers[2].head)  # other templates: another head
    again = open_clip_classifier(model, tokenizer, ZeroShotSettings("16", "{}"), "test")
    assert architecture_digest(again) == architecture_digest(classifiers[0])
    assert torch.equal(again.head, classifiers[0].head)


def json_of(settings: ZeroShotSettings) -> str:
    return f'"templates": "{settings.templates}"'


def test_the_spec_end_to_end(stimulus_subset, tmp_path, monkeypatch):
    """``open_clip:RN50/none`` through the one pipeline: 16 outputs, the zero-shot record, the cache reused."""
    import modelval

    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(tmp_path / "cache"))
    settings = ZeroShotSettings(class_space="16", templates="{}", logit_scale="100")
    run = dict(data_root=stimulus_subset(2), allow_modified_stimuli=True, bootstrap=0, zero_shot=settings,
               sanity_gate=False, device="cpu")  # fmt: skip
    first = modelval.shape_bias("open_clip:RN50/none", **run)
    assert first.run is not None and first.run.evaluation.outputs.shape == (32, 16)
    record = first.to_dict()["provenance"]["zero_shot"]
    assert record["class_space"] == "16" and record["templates"] == "{}" and record["logit_scale_value"] == 100.0
    assert record["scoring"] == "softmax" and record["source"] == "open_clip RN50/none"
    preprocessing = first.to_dict()["preprocessing"]
    assert preprocessing["interpolation"] == "bicubic"
    assert preprocessing["mean"] == pytest.approx(open_clip.OPENAI_DATASET_MEAN)
    assert "open_clip's transform" in str(preprocessing["sources"])
    assert not math.isnan(first.result.cue_accuracy)


class WordTokenizer:
    """A stand-in for a transformers tokenizer (no vocabulary files can be downloaded here): one id per word."""

    def __init__(self, length: int = 16) -> None:
        self.length = length
        self.paddings: list[object] = []

    def __call__(self, texts, padding=False, truncation=False, return_tensors=None):
        self.paddings.append(padding)
        ids = [[*[self.id(word) for word in text.split()][: self.length - 1], 1] for text in texts]
        width = self.length if padding == "max_length" else max(len(row) for row in ids)
        mask = [[1] * len(row) + [0] * (width - len(row)) for row in ids]
        ids = [row + [0] * (width - len(row)) for row in ids]
        return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask)}

    @staticmethod
    def id(word: str) -> int:
        """A word's id, 2 to 92: the 16 category names ("elephant." ...) all get ids of their own (the sum of the
        characters gave "elephant." and "keyboard." one id, and the head two equal columns, refused as degenerate)."""
        return 2 + sum(31**i * ord(c) for i, c in enumerate(word)) % 91


@pytest.mark.parametrize("kind", ["clip", "siglip"])
def test_transformers_clip_and_siglip(kind):
    """A tiny random transformers CLIPModel / SiglipModel through the same head: CLIP softmax, SigLIP sigmoid
    with its text padded to full length."""
    transformers = pytest.importorskip("transformers")
    from modelval.models.zero_shot import hf_classifier

    torch.manual_seed(0)
    # eos_token_id 1 (WordTokenizer's last id): CLIP pools each text at its end token; without one in the vocabulary
    # every text pooled at its first word ("a"), and the head was 16 times the same column (refused as degenerate)
    text = dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                max_position_embeddings=16, eos_token_id=1)  # fmt: skip
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=32,
                  patch_size=16)  # fmt: skip
    if kind == "clip":
        config = transformers.CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)
        model = transformers.CLIPModel(config).eval()
    else:
        config = transformers.SiglipConfig(text_config=text, vision_config=vision)
        model = transformers.SiglipModel(config).eval()
    tokenizer = WordTokenizer()
    classifier = hf_classifier(model, tokenizer, ZeroShotSettings("16", "a photo of a {}."), "test")
    images = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        outputs = classifier(images)
        image = model.get_image_features(pixel_values=images)
        image = F.normalize(getattr(image, "pooler_output", image), dim=-1)
        z = model.logit_scale.exp() * image @ classifier.head
    assert outputs.shape == (2, 16)
    if kind == "clip":
        assert classifier.scoring == "softmax" and set(tokenizer.paddings) == {True}
        assert torch.allclose(outputs, z, atol=1e-5)
    else:
        assert classifier.scoring == "sigmoid" and set(tokenizer.paddings) == {"max_length"}
        assert torch.allclose(outputs, F.logsigmoid(z + model.logit_bias), atol=1e-5)
