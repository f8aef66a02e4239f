"""`modelval baseline preprocess-diff`: strict JSON, exit 1 when the pipelines differ, 0 when they agree, and bad
inputs as one line with exit 2 that leave nothing behind (issue 40)."""

from __future__ import annotations

import json

import pytest

PIPELINES = '''
import torch
from torchvision.transforms import v2

def raises(image):
    raise RuntimeError("broken transform")

def flat(image):
    return torch.zeros(3 * 224 * 224)

def uint8(image):
    return v2.PILToTensor()(v2.CenterCrop(224)(image))

def crop_200(image):
    return v2.Compose([v2.CenterCrop(200), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])(image)
'''


@pytest.fixture
def project(stimulus_subset, tmp_path, monkeypatch):
    """A folder with a modelval.toml pointing at one stimulus per category, and a file of pipelines."""
    root = stimulus_subset(1)
    work = tmp_path / "work"
    work.mkdir()
    (work / "modelval.toml").write_text(f'[settings]\ndata_root = "{root}"\nallow_modified_stimuli = true\n'
                                        'device = "cpu"\n')  # fmt: skip
    (work / "pipes.py").write_text(PIPELINES)
    monkeypatch.chdir(work)
    return work


def _run(capsys, *argv):
    from modelval.cli import main

    code = main(["baseline", "preprocess-diff", *argv])
    return code, capsys.readouterr()


def test_differing_pipelines_exit_1_with_strict_json(project, capsys):
    code, captured = _run(capsys, "model", "model+interpolation=bilinear", "288", "--json")
    report = json.loads(captured.out, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    assert code == 1 and report["passed"] is False and report["status"] == "differs"
    (variant,) = report["variants"]
    assert variant["images"] == 16 and variant["first_stage"] == "resize"
    assert report["reason"].startswith("first diverges at resize on 288 px upscales")
    stages = {s["stage"]: s for s in variant["stages"]}
    assert not stages["decode"]["diverged"] and stages["resize"]["diverged"]
    assert 0 < stages["resize"]["mean_abs"] <= stages["resize"]["max_abs"] <= 255
    flips = variant["flips"]
    assert flips["count"] == sum(flips["by_transition"].values())
    shape_bias = variant["shape_bias"]
    if shape_bias is not None:
        assert shape_bias["difference"] == pytest.approx(shape_bias["b"] - shape_bias["a"])
    assert sorted(p.name for p in project.iterdir()) == ["modelval.toml", "pipes.py"]


def test_the_same_pipeline_twice_exits_0_and_says_same(project, capsys):
    code, captured = _run(capsys, "model", "model+batch=5", "original")
    assert code == 0, captured.err
    assert captured.out.rstrip().endswith("SAME: no stage differs and no decision flips")
    assert "decisions flipped: 0 of 16" in captured.out


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ("model", "pipes.py:raises", "raised RuntimeError: broken transform"),
        ("model", "pipes.py:flat", "a transform step returned a tensor of shape (150528,)"),
        ("model", "pipes.py:uint8", "returned torch.uint8 values; the model's input is a float tensor"),
        ("model", "pipes.py:crop_200", "the pipelines feed inputs of different sizes"),
        ("model", "model+crop=200", "the pipelines feed inputs of different sizes"),
        ("model", "missing.py:fn", "pipeline file not found: missing.py"),
        ("model", "model+colour=grey", "is not a change KEY=VALUE with a known key"),
        ("model", "model+antialias=false", "antialias and resize_dtype apply to backend=tensor"),
        ("model", "model+crop_pct=1.5", "crop_pct must be in (0, 1]"),
        ("model", "timm:pipes.py:raises", "timm:pipes.py:raises: Unknown model source"),
    ],
)
def test_bad_inputs_are_one_line_with_exit_2_and_leave_nothing(project, capsys, a, b, message):
    code, captured = _run(capsys, a, b, "original")
    assert code == 2, captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("modelval: error:") and message in lines[0], captured.err
    assert captured.out == ""
    assert sorted(p.name for p in project.iterdir()) == ["modelval.toml", "pipes.py"]


def test_an_unknown_stimulus_copy_is_a_usage_error(project, capsys):
    code, captured = _run(capsys, "model", "model", "png")
    assert code == 2 and "invalid choice: 'png'" in captured.err
