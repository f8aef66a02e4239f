"""The Python front door runs the commands' pipeline: the same numbers as the CLI, typed results, strict JSON.

The docs page `docs/python.md` is executed block by block, and the front door's docstring examples run as
doctests, so what a user copies works.
"""

from __future__ import annotations

import doctest
import importlib
import json
import re
from pathlib import Path

import pytest

import modelval
from modelval import api

ROOT = Path(__file__).resolve().parents[2]
#: The front-door functions of issue 18, each with a docstring example that runs.
FRONT_DOOR = ("shape_bias", "accuracy", "compare_with_humans", "sensitivity", "calibration_card")
PYTHON_PAGE = ROOT / "docs" / "python.md"


@pytest.fixture(scope="module")
def lite0_report(modelval_data_root):
    """The bundled model through the front door, once for this module."""
    return modelval.shape_bias("efficientnet_lite0", data_root=modelval_data_root, device="cpu", batch_size=48)


def test_front_door_gives_the_published_number_and_the_clis_json(lite0_report, modelval_data_root, capsys):
    from modelval.cli import main

    assert round(lite0_report.shape_bias, 4) == 0.2394
    assert (lite0_report.result.shape_hits, lite0_report.result.texture_hits) == (197, 626)
    assert main(["shape-bias", "--model", "efficientnet_lite0", "--data-root", str(modelval_data_root), "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    ours = json.loads(lite0_report.to_json())
    for key in ("shape_bias", "shape_hits", "texture_hits", "ci95", "verdict", "expected", "preprocessing", "sanity"):
        assert ours[key] == cli[key], key


def test_a_module_with_its_preprocessing_matches_the_spec(lite0_report, modelval_data_root):
    loaded = modelval.load_model("efficientnet_lite0", device="cpu")
    config = modelval.PreprocessConfig(mean=(0.5,) * 3, std=(0.5,) * 3, interpolation="bicubic")
    mine = modelval.shape_bias(
        loaded.model, preprocess=config, data_root=modelval_data_root, name="mine", batch_size=48
    )
    assert mine.row.model == "mine"
    assert [d.response for d in mine.decisions] == [d.response for d in lite0_report.decisions]


def test_loaded_preprocess_is_the_evaluation_protocol(modelval_data_root, lite0_report):
    """A user's own loop with `loaded.preprocess` gets modelval's decisions (no resize 256 / crop 224)."""
    import torch
    from PIL import Image

    loaded = modelval.load_model("efficientnet_lite0", device="cpu")
    assert loaded.preprocess.config.resize is None and loaded.preprocess.config.crop is None
    assert loaded.config.preprocess.resize == 256  # the source's own eval transform is kept, not applied
    decision = lite0_report.decisions[0]
    image = next(modelval_data_root.rglob(decision.imagename))
    with torch.no_grad():
        logits = loaded.model(loaded.preprocess(Image.open(image)).unsqueeze(0))
    from modelval.behaviour.categories import map_to_categories

    scores = map_to_categories(torch.softmax(logits.double(), dim=1))
    assert modelval.CATEGORIES[int(scores.argmax())] == decision.response


def test_a_module_without_preprocessing_is_refused():
    from torch import nn

    with pytest.raises(modelval.ModelvalError, match="needs its preprocessing"):
        modelval.shape_bias(nn.Linear(2, 2), data_root="/nonexistent")


def test_unknown_keyword_lists_the_options():
    with pytest.raises(TypeError, match=r"unknown option.*normalisation.*the options are: .*normalization"):
        modelval.shape_bias("efficientnet_lite0", normalisation="imagenet")


def test_library_call_restores_torch_threads(modelval_data_root):
    import torch

    before = torch.get_num_threads()
    options = api.EvaluationOptions(data_root=modelval_data_root, threads=1, allow_modified_stimuli=True, bootstrap=0)
    with api.pipeline.torch_threads(options.threads) as used:
        assert used == torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_accuracy_and_humans_take_decision_files(modelval_reference_dir):
    csv = modelval_reference_dir / "edge-experiment_vgg_session_1.csv"
    acc = modelval.accuracy(csv)
    assert acc.result.dataset == "edges" and 0 < acc.accuracy < 1
    assert json.loads(acc.to_json())["observer"] == acc.observer
    humans = modelval.compare_with_humans(csv, reference_dir=modelval_reference_dir, bootstrap=0)
    assert humans.comparison.dataset == "edges"
    assert json.loads(humans.to_json())["error_consistency"] == pytest.approx(humans.error_consistency)


@pytest.mark.slow  # shape_bias's example evaluates the bundled model on the 1280 stimuli
def test_docstring_examples_run(
    modelval_data_root, modelval_reference_dir, vlm_shapebias_dir, stimulus_subset, tmp_path
):
    """Every example of the front door runs as written (STIMULI, SUBSET, REFERENCE and VLM_SHAPEBIAS are data
    folders, FOLDER an empty one)."""
    names = {"STIMULI": modelval_data_root, "SUBSET": stimulus_subset(2), "REFERENCE": modelval_reference_dir,
             "VLM_SHAPEBIAS": vlm_shapebias_dir, "FOLDER": tmp_path / "out"}  # fmt: skip
    front_door = ("cue_conflict", "observers", "calibration")
    for module in (modelval, *(importlib.import_module(f"modelval.api.{name}") for name in front_door)):
        result = doctest.testmod(
            module, extraglobs=names, optionflags=doctest.ELLIPSIS, raise_on_error=False, verbose=False
        )
        assert result.failed == 0, module.__name__
        assert result.attempted > 0, module.__name__
    for name in api.__all__:
        function = getattr(api, name)
        if callable(function) and not isinstance(function, type) and name in FRONT_DOOR:
            assert ">>> " in (function.__doc__ or ""), f"modelval.{name} has no example"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PYTHON_PAGE.read_text(), flags=re.S)


@pytest.mark.parametrize("index", range(len(python_blocks())))
@pytest.mark.slow
def test_python_page_blocks_run(index, modelval_data_root, capsys):
    """Each code block of docs/python.md runs as written (STIMULI is the stimulus folder)."""
    block = python_blocks()[index]
    namespace = {"STIMULI": modelval_data_root}
    exec(compile(block, f"docs/python.md block {index}", "exec"), namespace)
    printed = capsys.readouterr().out
    # A comment that states a printed value (`print(x)   # 0.2394`) is checked against what was printed.
    for claimed in re.findall(r"print\(.*?\)\s*#\s*([\w.\- ]+?)(?:,| the|:|$)", block, flags=re.M):
        assert claimed.strip() in printed, f"block {index} claims {claimed!r}; printed {printed!r}"
