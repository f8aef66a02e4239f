"""The plugin in a user's throwaway project: their models file, their test file, -n 0 and -n 2.

The project gets nothing from this repository but ``pip install modelval``: the plugin comes in
through its ``pytest11`` entry point. Its models file lists the three bundled EfficientNet-Lite
models (two of them through specs); the stimuli are 3 per category, so both runs stay short.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest

USER_TEST = """
def test_my_zoo(modelval_case, validation_runner):
    judgement = validation_runner.run(modelval_case)
    assert judgement.passed, judgement.message
"""

MODELS_FILE = """
[models.lite0]
label = "Lite0 (registry)"
spec = "efficientnet_lite0"

[models.lite0_mine]
label = "Lite0 (my factory + checkpoint)"
spec = "nets.py:lite0"
checkpoint = "weights/lite0.pt"
mean = [0.5, 0.5, 0.5]
std = [0.5, 0.5, 0.5]
normalizations = ["model"]

[models.lite1]
label = "Lite1"
spec = "efficientnet_lite1"
normalizations = ["model", "wrong"]

[models.lite2]
label = "Lite2"
spec = "efficientnet_lite2"
normalizations = ["model"]
"""

NETS = """
from efficientnet_lite_pytorch import EfficientNet

def lite0():
    return EfficientNet.from_name("efficientnet-lite0")
"""


@pytest.fixture
def user_project(pytester: pytest.Pytester, stimulus_subset, bundled_model) -> tuple[pytest.Pytester, Path]:
    import torch

    subset = stimulus_subset(3, pytester.path / "stimuli")
    (pytester.path / "weights").mkdir()
    torch.save(bundled_model.model.state_dict(), pytester.path / "weights" / "lite0.pt")
    (pytester.path / "modelval.toml").write_text(MODELS_FILE)
    (pytester.path / "nets.py").write_text(NETS)
    pytester.makepyfile(test_zoo=USER_TEST)
    return pytester, subset


def summary_table(output: str) -> str:
    """The lines of the plugin's summary section (the comparison and breakdown tables)."""
    section = output.split("shape-bias validation", 1)[1]
    return "\n".join(line.rstrip() for line in section.splitlines()[1:] if line.strip() and "=" * 5 not in line
                     and not line.startswith("reports written"))  # fmt: skip


@pytest.mark.slow
def test_plugin_runs_a_users_zoo_and_xdist_gives_the_same_table(user_project, tmp_path):
    pytester, subset = user_project
    common = ["-p", "no:cacheprovider", "--data-root", str(subset), "--allow-modified-stimuli", "--device", "cpu"]
    serial = pytester.runpytest_subprocess(*common, "--report-dir", str(tmp_path / "n0"))
    serial.assert_outcomes(passed=6)
    parallel = pytester.runpytest_subprocess(*common, "-n", "2", "--report-dir", str(tmp_path / "n2"))
    parallel.assert_outcomes(passed=6)
    table = summary_table(serial.stdout.str())
    assert table == summary_table(parallel.stdout.str())
    assert re.search(r"Lite0 \(my factory \+ checkpoint\)\s+factory\s+model \(half\)", table)
    assert "DETECTED (" in table and "FINDING (no expected value)" in table
    # Both report folders hold the same rows, merged from the two workers.
    rows = {run: json.loads((tmp_path / run / "shape_bias.json").read_text()) for run in ("n0", "n2")}
    assert rows["n0"] == rows["n2"] and len(rows["n0"]) == 6
    # The registry and the factory + checkpoint specs of Lite0 decide alike.
    by_label = {(r["label"], r["normalization"]): r for r in rows["n0"]}
    registry, mine = (
        by_label[("Lite0 (registry)", "model (half)")],
        by_label[("Lite0 (my factory + checkpoint)", "model (half)")],
    )
    assert (registry["shape_hits"], registry["texture_hits"]) == (mine["shape_hits"], mine["texture_hits"])


def test_models_file_errors_name_the_table_and_key(tmp_path):
    from modelval.errors import DataError
    from modelval.validation.models_file import read_models_file

    path = tmp_path / "modelval.toml"
    cases = {
        '[models.a]\nspec = "x"\nexpectd = 0.2\n': r"\[models\.a\]: 'expectd' is not a known key \(did you",
        '[models.a]\nlabel = "no spec"\n': r"\[models\.a\]: 'spec' is required",
        '[models.a]\nspec = "x"\nexpected = 21.4\ntolerance = 0.01\n': r"'expected' is a fraction between 0 and 1",
        '[models.a]\nspec = "x"\nexpected = 0.2\n': r"'tolerance' is required with 'expected'",
        '[models.a]\nspec = "x"\nmean = [0.5, 0.5]\n': r"'mean' must be three numbers",
        '[models.a]\nspec = "x"\nnormalizations = ["sideways"]\n': r"'normalizations' must be a non-empty list",
        '[models.a]\nspec = "x"\ninterpolation = "lanczos"\n': r"'interpolation' must be one of",
        '[model.a]\nspec = "x"\n': r"unknown table or key 'model'",
        "[models.a\n": r"invalid TOML",
    }
    for text, message in cases.items():
        path.write_text(text)
        with pytest.raises(DataError, match=message):
            read_models_file(path)


def test_pyproject_tool_table_and_relative_paths(tmp_path):
    from modelval.validation.models_file import find_models_file, read_models_file

    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [project]
            name = "mine"
            [tool.modelval.models.net]
            spec = "timm:resnet50.a1_in1k"
            checkpoint = "runs/best.pt"
            expected = 0.2139
            tolerance = 0.015
            source = "our paper, Table 2"
            """
        )
    )
    found = find_models_file(tmp_path)
    assert found == tmp_path / "pyproject.toml"
    (model,) = read_models_file(found)
    assert model.checkpoint == tmp_path / "runs" / "best.pt" and model.expected == 0.2139
    assert model.normalizations == ("model", "wrong")
    (tmp_path / "pyproject.toml").write_text('[tool.modelval.models.net]\nspec = "x"\nbogus = 1\n')
    with pytest.raises(Exception, match=r"\[tool\.modelval\.models\.net\]: 'bogus'"):
        read_models_file(tmp_path / "pyproject.toml")
    shutil.rmtree(tmp_path)


@pytest.mark.parametrize(
    ("requested", "worker", "gpus", "device"),
    [
        ("cuda", "gw0", 4, "cuda:0"),
        ("cuda", "gw5", 4, "cuda:1"),
        ("auto", "gw1", 2, "cuda:1"),
        ("cuda", "gw3", 1, "cuda"),  # one GPU: every worker shares it
        ("cpu", "gw1", 4, "cpu"),  # an explicit CPU run stays on the CPU
        ("cuda", None, 4, "cuda"),  # not under xdist
    ],
)
def test_each_xdist_worker_gets_its_own_gpu(requested, worker, gpus, device, monkeypatch):
    import torch

    from modelval.validation.pytest_plugin import worker_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    assert worker_device(requested, worker) == device


def test_models_file_paths_resolve_once_from_a_relative_config(tmp_path, monkeypatch):
    """`--config sub/modelval.toml`: the checkpoint is sub/w.pt, not sub/sub/w.pt."""
    import torch

    from modelval.models import load_model
    from modelval.validation.models_file import read_models_file

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "nets.py").write_text("import torch\ndef net():\n    return torch.nn.Linear(3, 2)\n")
    torch.save(torch.nn.Linear(3, 2).state_dict(), tmp_path / "sub" / "w.pt")
    (tmp_path / "sub" / "modelval.toml").write_text('[models.m]\nspec = "nets.py:net"\ncheckpoint = "w.pt"\n')
    monkeypatch.chdir(tmp_path)
    (model,) = read_models_file(Path("sub/modelval.toml"))
    assert model.checkpoint == Path("sub/w.pt")
    loaded = load_model(model.spec, checkpoint=model.checkpoint, base_dir=model.base_dir, progress=False)
    assert loaded.config.checkpoint == "sub/w.pt"
