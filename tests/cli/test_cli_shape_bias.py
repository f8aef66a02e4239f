"""The ``modelval shape-bias`` contract: JSON keys, table, decision files, plots, errors."""

import json

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
    assert "22.07%" in row and "21.39%" in row and "+0.68 pp" in row and "PASS" in row  # a difference: in pp
    assert "Shape hits" in out and "162" in out


# The bundled model's end-to-end CLI run (decisions file, plot, recomputation from the decisions) is
# tests/datasets/test_fresh_machine.py::test_first_shape_bias_run_fetches_the_stimuli: one full
# evaluation, in a fresh process as a new user runs it.


def test_missing_data_is_a_clean_error(tmp_path, capsys):
    code = main(["shape-bias", "--model", "efficientnet_lite0", "--data-root", str(tmp_path / "none"), "--json"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("modelval: error: cue-conflict folder not found") and "Traceback" not in err


def test_unknown_model_suggests_close_names(capsys):
    assert main(["shape-bias", "--model", "efficientnet_lite"]) == 2
    assert "Did you mean efficientnet_lite2, efficientnet_lite1, efficientnet_lite0?" in capsys.readouterr().err


def test_model_or_decisions_is_required(capsys):
    assert main(["shape-bias"]) == 2
    assert "one of --model, --decisions, --vlm or --outputs is required" in capsys.readouterr().err


def test_an_in_process_command_leaves_torchs_thread_count_alone(capsys, tmp_path, monkeypatch):
    # The threads setting (MODELVAL_THREADS) sets torch's process-wide count; main() restores it, so a test or a
    # notebook that runs a command in-process keeps its own setting (a leaked 1 made later evaluations 2x slower).
    import torch

    monkeypatch.setenv("MODELVAL_THREADS", "1")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        main(["shape-bias", "--model", "efficientnet_lite0", "--data-root", str(tmp_path / "none")])
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    capsys.readouterr()
