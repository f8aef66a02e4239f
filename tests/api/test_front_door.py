"""The Python front door runs the commands' pipeline: the same numbers as the CLI, typed results, strict JSON.

What a user copies works: docs/python.md's blocks run, in order, in tests/test_docs.py, and every public
function's examples run as doctests in tests/test_public_docstrings.py.
"""

from __future__ import annotations

import json

import pytest

import modelval
from modelval import api

#: The front-door functions of issue 18, each with a docstring example that runs.
FRONT_DOOR = ("shape_bias", "accuracy", "compare_with_humans", "sensitivity", "calibration_card")


@pytest.fixture
def lite0_report(modelval_data_root, session_caches, bundled_forward):
    """The bundled model through the front door (its forward run once a session, by whichever worker is first)."""
    with bundled_forward("model"):
        return modelval.shape_bias("efficientnet_lite0", data_root=modelval_data_root, device="cpu", batch_size=48)


def test_front_door_gives_the_published_number_and_the_clis_json(lite0_report, modelval_data_root, capsys):
    from modelval.cli import main

    assert round(lite0_report.shape_bias, 4) == 0.2394
    assert (lite0_report.result.shape_hits, lite0_report.result.texture_hits) == (197, 626)
    assert main(["shape-bias", "--model", "efficientnet_lite0", "--data-root", str(modelval_data_root), "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    ours = json.loads(lite0_report.to_json())
    for key in ("shape_bias", "shape_hits", "texture_hits", "ci95", "verdict", "expected", "preprocessing"):
        assert ours[key] == cli[key], key
    # The gate's verdict is the same; whether it decided early on a sample depends on whether the forward ran (an
    # output-cache hit has every output at once), and the first of the two runs here may have been served.
    assert {k: v for k, v in ours["sanity"].items() if k != "decided_early"} == {
        k: v for k, v in cli["sanity"].items() if k != "decided_early"
    }
    early = [run["sanity"]["decided_early"] for run in (ours, cli)]
    assert all(decision is None or decision["passed"] for decision in early), early


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

    from modelval.runtime import torch_threads

    before = torch.get_num_threads()
    options = api.EvaluationOptions(data_root=modelval_data_root, threads=1, allow_modified_stimuli=True, bootstrap=0)
    with torch_threads(options.threads) as used:
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


def test_every_front_door_function_has_an_example():
    """The examples themselves run as doctests in tests/test_public_docstrings.py (every public function)."""
    for name in api.__all__:
        function = getattr(api, name)
        if callable(function) and not isinstance(function, type) and name in FRONT_DOOR:
            assert ">>> " in (function.__doc__ or ""), f"modelval.{name} has no example"
