"""The preprocessing audit reads each source's real config and measures its input on real stimuli."""

from __future__ import annotations

import pytest
from torchvision.transforms.functional import to_pil_image

from modelval.api.audit import PIXEL_TOLERANCE, _audit_group
from modelval.models import load_model
from modelval.models.convert import hf_vit_config
from modelval.preprocessing import HALF_MEAN, IMAGENET_MEAN, IMAGENET_STD
from weights_helpers import DEIT_IMAGENET_PROCESSOR, VIT_HALF_PROCESSOR, random_deit, write_hf_cache_repo, write_hf_deit


@pytest.fixture(scope="module")
def images(few_stimuli):
    return [to_pil_image(image) for image in few_stimuli[:4]]


def put_processor(cache, variant: str, processor: dict) -> None:
    config = hf_vit_config(variant).to_dict()
    write_hf_cache_repo(
        cache, f"facebook/deit-{variant}-patch16-224", {"config.json": config, "preprocessor_config.json": processor}
    )


def by_name(report):
    return {s.name: s for s in report.sources}


def test_shipped_vit_config_of_non_distilled_deit_is_flagged(isolated_caches, images):
    put_processor(isolated_caches["hf"], "small", VIT_HALF_PROCESSOR)
    report = _audit_group("deit_small", images)
    assert report.reference.mean == IMAGENET_MEAN and report.reference.resize is None
    hf = by_name(report)["deit_small_hf"]
    assert "cached preprocessor_config.json" in hf.origin
    assert "ViTImageProcessor" in hf.notes  # what AutoImageProcessor resolves the file to
    assert hf.config.mean == HALF_MEAN and hf.config.resize == 224 and hf.config.crop is None
    assert any("normalization half" in f and "imagenet" in f for f in hf.flags)
    assert hf.max_abs_diff > 1.0  # 0.5/0.5 vs ImageNet statistics: a large shift of every input value
    assert not any("rescales" in f for f in hf.flags)  # direct 224 resize of 224 px stimuli: no-op
    assert hf.status == "MISMATCH: normalization, eval resize"


def test_class_defaults_timm_crop_pct_and_hub_resize_are_exposed(isolated_caches, images):
    report = by_name(_audit_group("deit_small", images))
    default = report["DeiTImageProcessor()"]
    assert default.config.mean == HALF_MEAN
    assert any("normalization half" in f for f in default.flags)
    timm = report["deit_small_timm"]
    assert timm.config.resize == 248 and timm.config.crop == 224 and "crop_pct 0.9" in timm.notes[0]
    assert any("248 differs from the training config's 256" in f for f in timm.flags)
    hub = report["deit_small_hub"]
    assert hub.config.mean == IMAGENET_MEAN and hub.config.resize == 256
    assert [f for f in hub.flags if "normalization" in f] == []
    assert any("rescales the 224 px stimuli" in f for f in hub.flags)
    assert hub.max_abs_diff > PIXEL_TOLERANCE
    hf = report["deit_small_hf"]
    assert "not in the HF cache" in hf.origin  # nothing cached: the documented config, said so


def test_distilled_style_imagenet_config_has_no_normalization_flag(isolated_caches, images):
    put_processor(isolated_caches["hf"], "base", DEIT_IMAGENET_PROCESSOR)
    hf = by_name(_audit_group("deit_base", images))["deit_base_hf"]
    assert "DeiTImageProcessor" in hf.notes
    assert hf.config.mean == IMAGENET_MEAN and hf.config.std == IMAGENET_STD
    assert (hf.config.resize, hf.config.crop, hf.config.interpolation) == (256, 224, "bicubic")
    assert [f for f in hf.flags if "normalization" in f] == []
    assert any("rescales" in f for f in hf.flags)


def test_a_matching_config_is_not_flagged(isolated_caches, images):
    matching = {**VIT_HALF_PROCESSOR, "image_mean": list(IMAGENET_MEAN), "image_std": list(IMAGENET_STD)}
    matching["do_resize"] = False
    put_processor(isolated_caches["hf"], "tiny", matching)
    hf = by_name(_audit_group("deit_tiny", images))["deit_tiny_hf"]
    assert hf.flags == () and hf.status == "ok"
    assert hf.max_abs_diff < PIXEL_TOLERANCE


@pytest.mark.parametrize(
    ("processor", "mean", "resize"),
    [(VIT_HALF_PROCESSOR, HALF_MEAN, 224), (DEIT_IMAGENET_PROCESSOR, IMAGENET_MEAN, 256)],
)
def test_hf_entry_uses_deit_training_config_and_reads_the_shipped_one(
    isolated_caches, tmp_path, processor, mean, resize
):
    """ "model" normalization is what DeiT was trained with; the shipped config is read for the audit."""
    from modelval.models.deit import DEIT_REPO_PREPROCESS, _hf_shipped_preprocess, hf_repo_id

    write_hf_deit(isolated_caches["hf"], random_deit("tiny"), "tiny", processor, tmp_path)
    loaded = load_model("deit_tiny_hf", offline=True, progress=False)
    assert loaded.config.preprocess == DEIT_REPO_PREPROCESS
    assert loaded.config.mean == IMAGENET_MEAN and loaded.config.resize == 256
    forced = load_model("deit_tiny_hf", normalization="half", offline=True, progress=False)
    assert forced.config.mean == HALF_MEAN
    shipped, notes = _hf_shipped_preprocess(hf_repo_id("tiny"))
    assert shipped.mean == mean and shipped.resize == resize
    assert notes[0].startswith("read from the cached preprocessor_config.json")


def test_resnet_and_bundled_model_groups(images):
    resnet = _audit_group("resnet50_IN", images)
    (row,) = resnet.sources
    assert row.config.mean == IMAGENET_MEAN and any("rescales" in f for f in row.flags)
    lite = _audit_group("efficientnet_lite0", images)
    assert lite.reference.mean == HALF_MEAN


@pytest.mark.parametrize(("group", "size"), [("efficientnet_lite1", 240), ("efficientnet_lite2", 260)])
def test_a_source_that_crops_another_size_is_flagged_not_a_crash(group, size, images):
    """`audit-preprocessing` without --model crashed on Lite1/2: "size of tensor a (240) must match ... (224)"."""
    (row,) = _audit_group(group, images).sources
    assert row.config.crop == size and row.max_abs_diff is None and row.mean_abs_diff is None
    assert any(f"to {size}x{size} px inputs" in flag for flag in row.flags)
    assert row.status.startswith("MISMATCH") and "rescales stimuli" in row.status


def test_audit_preprocessing_of_every_model_runs(modelval_data_root, capsys):
    from modelval.cli import main

    assert main(["models", "audit", "--images", "2", "--data-root", str(modelval_data_root), "--json"]) == 0
    import json

    groups = {report["group"] for report in json.loads(capsys.readouterr().out)}
    assert {"efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2", "deit_small"} <= groups
