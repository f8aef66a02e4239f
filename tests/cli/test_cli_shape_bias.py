"""The ``modelval shape-bias`` contract: JSON keys, table, decision files, plots, errors."""

import json

import pytest
from PIL import Image

from modelval.behaviour.decisions import read_decisions
from modelval.cli import main

JSON_KEYS = {"model", "shape_bias", "shape_hits", "texture_hits", "conflict_images", "cue_accuracy", "per_category"}


def test_published_resnet50_through_the_cli(resnet50_reference_csv, capsys):
    assert main(["shape-bias", "--decisions", str(resnet50_reference_csv), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload.keys() >= JSON_KEYS
    assert (payload["shape_hits"], payload["texture_hits"], payload["conflict_images"]) == (162, 572, 1200)
    assert round(payload["shape_bias"], 4) == 0.2207
    assert set(payload["per_category"]) == {
        "airplane", "bear", "bicycle", "bird", "boat", "bottle", "car", "cat",
        "chair", "clock", "dog", "elephant", "keyboard", "knife", "oven", "truck",
    }  # fmt: skip


def test_table_compares_with_the_expected_value(resnet50_reference_csv, capsys):
    assert main(["shape-bias", "--decisions", str(resnet50_reference_csv), "--model", "resnet50_in"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("Model"))
    for column in ("Shape bias", "Expected", "Difference"):
        assert column in header
    row = next(line for line in out.splitlines() if line.startswith("ResNet-50 (IN)"))
    assert "22.07%" in row and "21.39%" in row and "+0.68%" in row and "PASS" in row
    assert "Shape hits" in out and "162" in out


@pytest.mark.slow
def test_bundled_model_end_to_end(data_root, tmp_path, capsys, bundled_evaluations):
    decisions_out, plot = tmp_path / "decisions.csv", tmp_path / "plot.png"
    argv = ["shape-bias", "--model", "efficientnet_lite0", "--data-root", str(data_root), "--device", "cpu"]
    argv += ["--decisions-out", str(decisions_out), "--plot", str(plot), "--json", "--no-progress"]
    assert main(argv) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["model"] == "efficientnet_lite0" and payload["conflict_images"] == 1200
    # The CLI (batch 32) and the library (batch 64) agree decision by decision.
    library = bundled_evaluations("model")
    written = read_decisions(decisions_out)
    assert [d.response for d in written] == [d.response for d in library.decisions]
    assert payload["shape_hits"] == library.result.shape_hits
    with Image.open(plot) as image:
        assert image.format == "PNG" and image.width > 400
    # Recomputing from the written decisions gives the same numbers.
    assert main(["shape-bias", "--decisions", str(decisions_out), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["shape_hits"], again["texture_hits"]) == (payload["shape_hits"], payload["texture_hits"])


def test_missing_data_is_a_clean_error(tmp_path, capsys):
    code = main(["shape-bias", "--model", "efficientnet_lite0", "--data-root", str(tmp_path / "none"), "--json"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("modelval: error: cue-conflict folder not found") and "Traceback" not in err


def test_unknown_model_suggests_close_names(capsys):
    assert main(["shape-bias", "--model", "efficientnet_lite"]) == 2
    assert "Did you mean efficientnet_lite2, efficientnet_lite1, efficientnet_lite0?" in capsys.readouterr().err


def test_model_or_decisions_is_required(capsys):
    with pytest.raises(SystemExit):
        main(["shape-bias"])
    assert "--model or --decisions" in capsys.readouterr().err
