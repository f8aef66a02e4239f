"""Pipelines taken apart into stages, their values read in grey levels, specs with changes, and the statistics a
preprocess diff prints beside its numbers (issue 40)."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest
import torch
from PIL import Image

from modelval.behaviour.paired import mcnemar_mid_p
from modelval.errors import DataError
from modelval.evaluation.pipeline_specs import declared_transform, parse_changes, pipeline_from_spec
from modelval.evaluation.pipelines import GreyMap, Pipeline, classify, derive, next_map, transform_steps
from modelval.models.efficientnet import LITE0_PREPROCESS
from modelval.proportions import newcombe_difference, paired_difference, wilson_interval

RNG = np.random.default_rng(0)
IMAGE = RNG.integers(0, 256, size=(3, 32, 32)).astype(np.float64)


@pytest.mark.parametrize(
    ("after", "stage", "reversed_"),
    [
        (IMAGE[:, 4:28, 4:28], "crop", False),
        (IMAGE[:, ::2, ::2], "resize", False),
        (IMAGE[::-1], "channel order", True),
        (IMAGE / 255, "dtype and range", False),
        ((IMAGE / 255 - np.array([0.485, 0.456, 0.406])[:, None, None]) / 0.229, "normalize", False),
        (np.sqrt(IMAGE), "other", False),
    ],
)
def test_a_step_is_told_by_what_it_does(after, stage, reversed_):
    found, _, flipped = classify(IMAGE, after)
    assert (found, flipped) == (stage, reversed_)


def test_the_grey_map_undoes_a_normalization_and_a_channel_flip():
    normalized = (IMAGE / 255 - 0.5) / 0.5
    _, fit, _ = classify(IMAGE, normalized)
    grey = next_map(GreyMap.identity(), fit, False, torch.from_numpy(normalized))
    assert np.allclose(grey.grey(normalized), IMAGE) and grey.describe() == "v x 127.5 + 127.5"
    _, fit, flipped = classify(normalized, normalized[::-1])
    back = next_map(grey, fit, flipped, torch.from_numpy(normalized[::-1].copy()))
    assert np.allclose(back.grey(normalized[::-1]), IMAGE[::-1])
    # A PIL image or a uint8 tensor is in grey levels, whatever came before.
    assert next_map(None, None, False, torch.zeros(3, 2, 2, dtype=torch.uint8)).same(GreyMap.identity())


def test_torchvision_and_timm_transforms_are_taken_apart_by_type():
    steps = transform_steps(declared_transform(LITE0_PREPROCESS, {"backend": "tensor", "channels": "bgr"}))
    assert [s.stage for s in steps] == ["channel order", "dtype and range", "resize", "crop", "dtype and range",
                                        "normalize"]  # fmt: skip
    plain = transform_steps(lambda image: image)
    assert [s.stage for s in plain] == [None]  # a plain function: its effect on the first image decides


def test_a_spec_with_changes():
    assert parse_changes("model+backend=tensor+batch=4+channels_last") == (
        "model", {"backend": "tensor", "batch": "4", "channels_last": "true"})  # fmt: skip
    pipeline = pipeline_from_spec("model+crop_pct=0.9+batch=4", LITE0_PREPROCESS)
    assert pipeline.batch_size == 4 and "size=[248]" in repr(pipeline.transform)  # floor(224 / 0.9)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("model+colour=grey", "is not a change KEY=VALUE"),
        ("model+batch=0", "batch must be a positive whole number"),
        ("model+channels=rbg", "channels must be one of rgb, bgr"),
        ("model+resize_dtype=float16", "apply to backend=tensor"),
        ("model+std=0,1,1", "std must be positive"),
        ("model+decoder=gpu", "decoder must be one of pillow, nearest-chroma"),
        ("+batch=2", "names no pipeline"),
        ("timm:resnet18+antialias=false", "they apply to `model`"),
    ],
)
def test_a_bad_spec_is_one_line(spec, message):
    with pytest.raises((DataError, ValueError), match=message.replace("(", r"\(")):
        pipeline_from_spec(spec, LITE0_PREPROCESS)


def test_derived_copies_are_deterministic(modelval_data_root):
    data = next(modelval_data_root.glob("*/*.png")).read_bytes()
    assert derive(data, "original") == (data, None)
    _, first = derive(data, "288")
    _, again = derive(data, "288")
    assert first.size == (288, 288) and np.array_equal(np.asarray(first), np.asarray(again))
    jpeg, _ = derive(data, "jpeg")
    assert jpeg == derive(data, "jpeg")[0] and jpeg[:2] == b"\xff\xd8"
    from io import BytesIO

    from PIL import JpegImagePlugin

    with Image.open(BytesIO(jpeg)) as decoded:
        assert decoded.size == (288, 288) and JpegImagePlugin.get_sampling(decoded) == 2  # 4:2:0


def test_a_pipeline_refuses_what_it_cannot_run():
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        Pipeline(lambda x: x, batch_size=0)
    with pytest.raises(ValueError, match="transform must be callable"):
        Pipeline("resize")  # type: ignore[arg-type]


def test_newcombe_matches_the_published_example():
    """Newcombe (1998, Stat Med 17:873), method 10: 56/70 - 48/80 has the 95% interval [0.0524, 0.3339]."""
    low, high = wilson_interval([56, 48], [70, 80])
    interval = newcombe_difference(56 / 70, (low[0], high[0]), 48 / 80, (low[1], high[1]))
    assert interval == pytest.approx((0.0524, 0.3339), abs=5e-5)


def test_the_paired_interval_narrows_with_agreement_and_holds_the_difference():
    # The same marginals (30 and 20 of 50 hits), more and less concordant pairs.
    concordant = paired_difference(20, 10, 0, 20)
    discordant = paired_difference(5, 25, 15, 5)
    for low, high in (concordant, discordant):
        assert low < 0.2 < high
    assert concordant[1] - concordant[0] < discordant[1] - discordant[0]


def test_mcnemar_mid_p_by_hand():
    # 12 pairs only one way, 4 the other: 2 P(X <= 4) - P(X = 4), X ~ Bin(16, 1/2).
    by_hand = (2 * sum(comb(16, k) for k in range(5)) - comb(16, 4)) / 2**16
    assert mcnemar_mid_p(12, 4) == pytest.approx(by_hand) == pytest.approx(0.0490, abs=1e-4)
    assert mcnemar_mid_p(0, 0) == 1.0 and mcnemar_mid_p(5, 5) == 1.0


def test_the_pytest_fixture_fails_a_test_with_the_report(modelval_preprocess_diff):
    diff = modelval_preprocess_diff("model", "model+channels=bgr", expect="differs", limit=16, stimuli="original")
    assert diff.variants[0].first_stage == "channel order"
    with pytest.raises(pytest.fail.Exception, match="preprocessing expected same, found differs"):
        modelval_preprocess_diff("model", "model+channels=bgr", limit=16, stimuli="original")


def test_timm_and_huggingface_pipelines(tmp_path):
    """timm's eval transform is taken apart by type; a HuggingFace processor (read from a folder, never downloaded) is
    one step that does everything, and its output is the model's input."""
    import json

    timm = pipeline_from_spec("timm:resnet18", LITE0_PREPROCESS)
    assert [s.stage for s in timm.steps()] == ["resize", "crop", "dtype and range", "normalize"]
    folder = tmp_path / "processor"
    folder.mkdir()
    (folder / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "ViTImageProcessor", "do_resize": True, "size": {"height": 224, "width": 224},
        "resample": 3, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
        "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    }))  # fmt: skip
    hf = pipeline_from_spec(f"hf:{folder}", LITE0_PREPROCESS)
    (step,) = hf.steps()
    assert step.stage is None  # told by its effect: it resizes and normalizes at once
    out = hf(Image.new("RGB", (288, 288), (255, 0, 0)))
    assert tuple(out.shape) == (3, 224, 224) and float(out[0].mean()) == pytest.approx(1.0)
    with pytest.raises(DataError, match="no image processor in the local cache or folder"):
        pipeline_from_spec(f"hf:{tmp_path / 'nothing'}", LITE0_PREPROCESS)


def test_a_step_that_does_everything_is_named_as_the_whole_transform(modelval_data_root):
    """A plain function that resizes and normalizes at once cannot be taken apart: where it differs, the diff names it
    (on a small random classifier and four stimuli: the stages, not the model, are the subject)."""
    import functools

    from modelval.evaluation.preprocess_diff import run_pipelines

    def squash(image):  # resizes to 224 without a crop, then scales and normalizes, in one go
        pixels = np.asarray(image.resize((224, 224), Image.Resampling.BILINEAR), dtype=np.float32)
        return (torch.from_numpy(pixels).permute(2, 0, 1) / 255 - 0.5) / 0.5

    torch.manual_seed(0)
    tiny = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 8, stride=8), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                               torch.nn.Linear(4, 1000))  # fmt: skip
    files = sorted(modelval_data_root.glob("*/*.png"))[:4]
    items = [functools.partial(derive, f.read_bytes(), "288") for f in files]
    a = pipeline_from_spec("model", LITE0_PREPROCESS)
    run = run_pipelines(tiny, a, Pipeline(squash), items, device=torch.device("cpu"))
    assert run.first_divergence() == "whole transform (squash)"
    assert run.stages_b == ("whole transform",) and run.logits_a.shape == (4, 1000)
