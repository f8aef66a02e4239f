"""Every case of the matrix is gated, whatever its normalization role, and a withheld number is shown nowhere.

Issue 27 found a models-file entry with random weights and ``normalizations = ["imagenet"]`` passing
``modelval validate`` (exit 0, "46.47% FINDING" at 14% cue-conflict accuracy), and the wrong-normalization
row of a broken model showing 37-46% and passing. These tests run the real bundled EfficientNet-Lite0 and
untrained or deliberately broken networks on a subset of the real stimuli through ``modelval validate``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelval.cli import main

ZOO = """
import torch

import modelval


def untrained():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(48, 1000))


class Fragile(torch.nn.Module):
    '''The real Lite0 (trained with mean = std = 0.5), whose head is scrambled when the input leaves the range
    its own normalization gives ([-1, 1]): under ImageNet mean/std it is no classifier any more.'''

    def __init__(self):
        super().__init__()
        self.net = modelval.load_model("efficientnet_lite0", device="cpu", progress=False).model

    def forward(self, x):
        logits = self.net(x)
        return logits.roll(500, dims=1) if float(x.min()) < -1.01 else logits


def fragile():
    return Fragile()


def raises():
    raise RuntimeError("factory exploded")
"""

MODELS = """
[models.untrained_imagenet_only]
label = "alone"
spec = "zoo.py:untrained"
mean = [0.5, 0.5, 0.5]
std = [0.5, 0.5, 0.5]
normalizations = ["imagenet"]

[models.untrained]
label = "untrained"
spec = "zoo.py:untrained"
mean = [0.5, 0.5, 0.5]
std = [0.5, 0.5, 0.5]

[models.fragile]
label = "fragile"
spec = "zoo.py:fragile"
mean = [0.5, 0.5, 0.5]
std = [0.5, 0.5, 0.5]

[models.raises]
label = "raises"
spec = "zoo.py:raises"
normalizations = ["model"]
"""


@pytest.fixture
def zoo(tmp_path: Path) -> Path:
    (tmp_path / "zoo.py").write_text(ZOO)
    (tmp_path / "modelval.toml").write_text(MODELS)
    return tmp_path / "modelval.toml"


@pytest.mark.slow  # the real Lite0 under two normalizations, on 64 stimuli
def test_every_case_is_gated_and_a_withheld_number_is_shown_nowhere(zoo, stimulus_subset, tmp_path, capsys):
    from modelval.records.run_store import RunStore

    reports = tmp_path / "reports"
    argv = ["validate", "--models-file", str(zoo), "--data-root", str(stimulus_subset(4)), "--allow-modified-stimuli",
            "--device", "cpu", "--no-cache", "--report-dir", str(reports)]  # fmt: skip
    assert main([*argv, "--json"]) == 1
    cases = json.loads(capsys.readouterr().out)["cases"]
    by_case = {(case["label"], case["normalization"].split()[0]): case for case in cases}

    # Listed without its own normalization: gated on its own (it passed with 46% before).
    alone = by_case[("alone", "imagenet")]
    assert alone["verdict"] == "NOT A WORKING CLASSIFIER" and alone["shape_bias"] is None
    # Not a working classifier under its own normalization: every case of it fails, no number anywhere.
    assert by_case[("untrained", "model")]["verdict"] == "NOT A WORKING CLASSIFIER"
    wrong = by_case[("untrained", "imagenet")]  # the default "wrong" case: ImageNet mean/std for a 0.5/0.5 model
    assert wrong["verdict"] == "NOT A WORKING CLASSIFIER (under its own normalization)"
    assert wrong["shape_bias"] is None and wrong["difference"] is None
    # A working model that the wrong normalization breaks: detected (the case passes), its number withheld.
    assert by_case[("fragile", "model")]["verdict"] == "FINDING (no expected value)"
    assert by_case[("fragile", "model")]["shape_bias"] > 0
    broken = by_case[("fragile", "imagenet")]
    assert broken["verdict"].startswith("DETECTED (it breaks the model: cue-conflict accuracy")
    assert broken["shape_bias"] is None
    # A model that cannot be loaded is a row with its verdict and one-line reason.
    error = by_case[("raises", "model")]
    assert error["verdict"] == "ERROR" and error["error"].endswith("raised RuntimeError: factory exploded")
    assert len(cases) == 6

    # The files: null with the reason in the JSON, "withheld" in the tables, no plot of a withheld case.
    rows = json.loads((reports / "shape_bias.json").read_text())
    withheld = [r for r in rows if r["verdict"].startswith(("NOT A WORKING", "DETECTED (it breaks", "ERROR"))]
    assert len(withheld) == 5 and all(r["shape_bias"] is None for r in withheld)
    assert all(r["null_reasons"]["shape_bias"].startswith(("withheld:", "error:")) for r in withheld)
    markdown = (reports / "shape_bias.md").read_text()
    assert markdown.count("withheld") >= 4
    assert sorted(p.name for p in (reports / "plots").glob("*.png")) == ["fragile.png"]
    # The run store: the same null, and no decisions kept for a withheld case.
    for run in RunStore().runs(command="validate", limit=50):
        if run.summary["verdict"].startswith(("NOT A WORKING", "DETECTED (it breaks", "ERROR")):
            assert run.summary["shape_bias"] is None and run.decisions is None

    # The text table: the ERROR row is there with its reason; withheld numbers read "withheld".
    assert main(argv) == 1
    out = capsys.readouterr().out
    table = out.split("\n\n")[0]
    assert "ERROR: the model factory" in table and "factory exploded" in table
    lines = [line for line in table.splitlines() if line.startswith(("alone ", "untrained "))]  # rows, not notes
    assert len(lines) == 3 and all("withheld" in line and "%" not in line for line in lines)


def test_reading_a_withheld_shape_bias_says_why():
    from modelval.behaviour.shape_bias import compute_shape_bias
    from modelval.judgement.rows import ReportRow, ShapeBiasWithheld
    from modelval.judgement.sanity import VERDICT
    from modelval.judgement.verdict import Verdict

    result = compute_shape_bias([], n_bootstrap=0)
    gated = ReportRow("m", "M", "python", "model (half)", result, verdict=Verdict("withheld", False, VERDICT))
    with pytest.raises(ShapeBiasWithheld, match="M \\(model \\(half\\)\\): no shape bias, withheld: NOT A WORKING"):
        _ = gated.shape_bias
    detected = Verdict("detected", True, "DETECTED (...)",
                       withholds="NOT A WORKING CLASSIFIER under this normalization")  # fmt: skip
    broken = ReportRow("m", "M", "python", "imagenet (imagenet)", result, verdict=detected)
    with pytest.raises(ShapeBiasWithheld, match="under this normalization"):
        _ = broken.shape_bias
    assert broken.to_dict()["shape_bias"].reason.startswith("withheld:")  # null in JSON, with the reason
    error = ReportRow.for_error("m", "M", "python", "model", "the model factory raised")
    assert error.final_verdict.text == "ERROR" and error.summary()["error"] == "the model factory raised"
    assert (error.summary()["passed"], error.summary()["status"]) == (False, "error")
    with pytest.raises(ShapeBiasWithheld, match="error: the model factory raised"):
        _ = error.shape_bias
