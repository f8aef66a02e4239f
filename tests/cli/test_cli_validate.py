"""``modelval validate``: a models file's cases, the table or JSON, and the exit status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelval.cli import main

MODELS = """
[models.lite0]
label = "EfficientNet-Lite0"
spec = "efficientnet_lite0"
normalizations = ["model"]

[models.random]
label = "an untrained network"
spec = "nets.py:untrained"
normalizations = ["model"]
"""

NETS = """
import torch

def untrained():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(8), torch.nn.Flatten(), torch.nn.Linear(192, 1000))
"""


@pytest.fixture
def subset(stimulus_subset) -> Path:
    return stimulus_subset(4)


@pytest.mark.slow
def test_validate_reports_every_case_and_fails_on_a_broken_model(subset, tmp_path, capsys):
    (tmp_path / "modelval.toml").write_text(MODELS)
    (tmp_path / "nets.py").write_text(NETS)
    argv = ["validate", "--models-file", str(tmp_path / "modelval.toml"), "--data-root", str(subset)]
    argv += ["--allow-modified-stimuli", "--device", "cpu"]
    assert main([*argv, "--json"]) == 1  # the untrained network fails the sanity gate
    payload = json.loads(capsys.readouterr().out)
    cases = {case["label"]: case for case in payload["cases"]}
    assert set(cases["EfficientNet-Lite0"]) == {
        "label", "spec", "normalization", "normalization_case", "shape_bias", "expected", "difference", "passed",
        "status", "reason", "verdict", "null_reasons",
    }  # fmt: skip  (the verdict as data: passed, status, reason; its text beside them)
    assert (cases["EfficientNet-Lite0"]["normalization_case"], cases["EfficientNet-Lite0"]["normalization"]) == (
        "model", "model (half)"
    )  # fmt: skip
    assert "no published value" in cases["EfficientNet-Lite0"]["null_reasons"]["expected"]  # why Expected is null
    assert cases["EfficientNet-Lite0"]["verdict"] == "FINDING (no expected value)"
    assert (cases["EfficientNet-Lite0"]["passed"], cases["EfficientNet-Lite0"]["status"]) == (True, "finding")
    assert cases["an untrained network"]["verdict"] == "NOT A WORKING CLASSIFIER"
    untrained = cases["an untrained network"]
    assert (untrained["passed"], untrained["status"]) == (False, "withheld")
    assert untrained["reason"].startswith("NOT A WORKING CLASSIFIER: cue-conflict accuracy")
    assert cases["an untrained network"]["shape_bias"] is None  # no shape bias anywhere, with the reason
    assert cases["an untrained network"]["null_reasons"]["shape_bias"].startswith("withheld: NOT A WORKING")
    assert cases["an untrained network"]["spec"] == "nets.py:untrained"
    # The same number as the library's evaluation of the same images (the same pipeline).
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.evaluation import evaluate
    from modelval.models import load_model

    loaded = load_model("efficientnet_lite0", progress=False)
    images = StimulusSet.load(subset, expected_count=None, verify=False, progress=False)
    direct = evaluate(loaded.model, loaded.config.preprocess.for_stimuli(None), images, progress=False)
    assert cases["EfficientNet-Lite0"]["shape_bias"] == pytest.approx(direct.result.shape_bias)
    assert main(argv) == 1
    out = capsys.readouterr()
    assert "NOT A WORKING CLASSIFIER" in out.out and "FAILED random-model-norm" in out.out
    assert "1 of 2 cases failed" in out.err


def test_validate_without_a_models_file_says_how_to_write_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["validate"]) == 2
    assert "no models file: write modelval.toml" in capsys.readouterr().err


TEN_WAY = """
[models.ten]
label = "a 10-way head"
spec = "ten.py:ten_way"
label_map = "ten-map.json"
normalizations = ["model", "imagenet"]
"""


def test_a_label_mapped_head_is_read_once_for_all_its_cases(subset, ten_way_head, tmp_path, capsys, monkeypatch):
    from modelval.behaviour import label_map as label_map_module

    (tmp_path / "modelval.toml").write_text(TEN_WAY)  # beside ten.py and ten-map.json: relative paths
    reads = []
    original = label_map_module.read_label_map
    monkeypatch.setattr(label_map_module, "read_label_map", lambda path: reads.append(path) or original(path))
    argv = ["validate", "--models-file", str(tmp_path / "modelval.toml"), "--data-root", str(subset)]
    assert main([*argv, "--allow-modified-stimuli", "--device", "cpu", "--json"]) == 1  # untrained: sanity gate
    cases = json.loads(capsys.readouterr().out)["cases"]
    assert [c["normalization"].split()[0] for c in cases] == ["model", "imagenet"]
    assert reads == [ten_way_head.label_map]  # resolved from the file's folder, read once


BROKEN_ZOO = """
[models.works]
spec = "zoo.py:works"
normalizations = ["model"]

[models.raises]
spec = "zoo.py:raises"

[models.nan]
spec = "zoo.py:nan"
normalizations = ["model"]
"""

ZOO = """
import torch

def works():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(12, 1000))

def raises():
    raise RuntimeError("factory exploded")

class Nan(torch.nn.Module):
    def forward(self, x):
        return torch.full((len(x), 1000), float("nan"))

def nan():
    return Nan()
"""


def test_a_broken_model_fails_its_own_cases_and_the_others_run(stimulus_subset, tmp_path, capsys):
    (tmp_path / "modelval.toml").write_text(BROKEN_ZOO)
    (tmp_path / "zoo.py").write_text(ZOO)
    argv = ["validate", "--models-file", str(tmp_path / "modelval.toml"), "--data-root", str(stimulus_subset(1))]
    argv += ["--allow-modified-stimuli", "--device", "cpu"]
    assert main([*argv, "--json"]) == 1
    cases = json.loads(capsys.readouterr().out)["cases"]
    verdicts = {(case["label"], case["normalization"].split()[0]): case["verdict"] for case in cases}
    assert verdicts == {
        ("works", "model"): "NOT A WORKING CLASSIFIER",  # it ran: an untrained head, judged as such
        ("raises", "model"): "ERROR",
        ("raises", "wrong"): "ERROR",
        ("nan", "model"): "ERROR",
    }
    errors = {case["label"]: case["error"] for case in cases if case["verdict"] == "ERROR"}
    assert errors["raises"] == f"the model factory {tmp_path / 'zoo.py'}:raises() raised RuntimeError: factory exploded"
    assert errors["nan"].startswith(f"Nan ({tmp_path / 'zoo.py'}) returned NaN logits for 16 of the 16 images")
    assert main(argv) == 1
    out = capsys.readouterr()
    assert "FAILED raises-model-norm: the model factory" in out.out and "Traceback" not in out.out + out.err
    assert "4 of 4 cases failed" in out.err  # the untrained head fails its sanity gate, as it should


def test_validate_report_dir_with_a_hostile_id_writes_nothing_outside(stimulus_subset, tmp_path, capsys):
    project = tmp_path / "project"
    project.mkdir()
    (project / "modelval.toml").write_text('[models."../../../escaped"]\nspec = "efficientnet_lite0"\n')
    reports = project / "reports"
    argv = ["validate", "--models-file", str(project / "modelval.toml"), "--data-root", str(stimulus_subset(1))]
    assert main([*argv, "--allow-modified-stimuli", "--report-dir", str(reports)]) == 2
    err = capsys.readouterr().err
    assert "must be a plain name" in err and err.count("\n") == 1
    assert not [p for p in tmp_path.rglob("*") if "escaped" in p.name]
