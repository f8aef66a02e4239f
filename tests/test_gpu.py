"""The GPU tier (``make test-gpu``, the nightly's first step): what differs on a CUDA device, measured.

Every test here is marked ``gpu`` and skips, with its reason, where no CUDA device exists. On a GPU:

- every bundled model decides on CUDA as on the CPU (fp32), within the flip budget of its expectation entry;
- bf16 and fp16 autocast, with and without channels-last, decide as the CPU fp32 run within their budgets;
- the front door's defaults pick CUDA and give what an explicit ``device="cuda"`` gives;
- the pytest plugin and ``modelval validate`` run with ``--device cuda``;
- a model that does not fit in the GPU's memory is one line, not a CUDA traceback.

The stimuli are the data home's cue-conflict folder: the published 1280 in the nightly, a subset where only a subset
travelled (the counts are printed with the flips, so a subset run says what it covered).
"""

from __future__ import annotations

import json
import sys
import warnings

import pytest
import torch

import modelval
from modelval.evaluation import AmpFlipWarning, decision_flips, evaluate

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none on this machine)"),
]

BUNDLED = ("efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2")


def flip_budget(model: str, device: str, dtype: str) -> tuple[int, str]:
    """The flips a run on ``device`` in ``dtype`` may show against the fp32 CPU reference, and the entry of
    expected_shape_bias.toml that gave the number (``cuda/bf16``, ``default``)."""
    from modelval.judgement.expected import RunSetting, expected_for

    expected = expected_for(model, setting=RunSetting(device=device, capability=_capability(), dtype=dtype))
    assert expected is not None and expected.flip_budget is not None, f"{model}: no flip budget for {device}/{dtype}"
    return expected.flip_budget, expected.entry or "default"


def _capability() -> str | None:
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return f"{major}.{minor}"


@pytest.fixture(scope="module")
def stimuli(modelval_data_root):
    return modelval.StimulusSet.load(modelval_data_root, allow_modified=True, progress=False)


@pytest.fixture(scope="module")
def fp32_runs(stimuli):
    """Each bundled model's fp32 decisions on the CPU and on CUDA, computed once for the module when a test first
    asks; a model whose weights are not installed (Lite1/Lite2 without ``modelval[lite]``) skips with the reason."""
    from modelval.models.registry import weights_status

    runs: dict[tuple[str, str], object] = {}

    def for_model(name: str) -> dict[tuple[str, str], object]:
        available, message = weights_status(name)
        if not available:
            pytest.skip(message)
        for device in ("cpu", "cuda"):
            if (name, device) not in runs:
                loaded = modelval.load_model(name, device=device, progress=False)
                config = loaded.entry.preprocess.for_stimuli(None)
                runs[name, device] = evaluate(loaded.model, config, stimuli, device=device, progress=False,
                                              n_bootstrap=0)  # fmt: skip
                del loaded
                torch.cuda.empty_cache()
        return runs

    return for_model


def _flips(reference, candidate) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AmpFlipWarning)
        return decision_flips(reference.decisions, candidate.decisions, warn_rate=None).flipped


@pytest.mark.parametrize("model", BUNDLED)
def test_cuda_decides_as_the_cpu_within_the_budget(model, fp32_runs, stimuli):
    runs = fp32_runs(model)
    cpu, cuda = runs[model, "cpu"], runs[model, "cuda"]
    assert cuda.provenance["device"]["type"] == "cuda" and cpu.provenance["device"]["type"] == "cpu"
    flipped = _flips(cpu, cuda)
    budget, entry = flip_budget(model, "cuda", "fp32")
    print(f"{model}: CUDA fp32 vs CPU fp32: {len(flipped)} of {len(stimuli.stimuli)} flipped (budget {budget}, "
          f"{entry})", file=sys.stderr)  # fmt: skip
    assert len(flipped) <= budget, f"{model}: {len(flipped)} flips > {budget} [{entry}]: {flipped[:10]}"


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels-last"])
@pytest.mark.parametrize("amp", ["bf16", "fp16"])
@pytest.mark.parametrize("model", BUNDLED)
def test_autocast_decides_as_fp32_within_the_budget(model, amp, channels_last, fp32_runs, stimuli):
    reference = fp32_runs(model)[model, "cpu"]  # first: skips a model whose weights are not installed
    loaded = modelval.load_model(model, device="cuda", progress=False)
    config = loaded.entry.preprocess.for_stimuli(None)
    run = evaluate(loaded.model, config, stimuli, device="cuda", amp=amp, channels_last=channels_last,
                   progress=False, n_bootstrap=0)  # fmt: skip
    assert run.provenance["precision"] == amp and run.provenance["channels_last"] is channels_last
    flipped = _flips(reference, run)  # the budgets are against the fp32 CPU reference
    budget, entry = flip_budget(model, "cuda", amp)
    print(f"{model}: CUDA {amp}{' channels-last' if channels_last else ''} vs CPU fp32: {len(flipped)} of "
          f"{len(stimuli.stimuli)} flipped (budget {budget}, {entry})", file=sys.stderr)  # fmt: skip
    assert len(flipped) <= budget, f"{model} {amp}: {len(flipped)} flips > {budget} [{entry}]: {flipped[:10]}"


def test_the_front_door_defaults_to_cuda_and_agrees_with_an_explicit_device(modelval_data_root):
    common = {"data_root": modelval_data_root, "allow_modified_stimuli": True, "bootstrap": 0, "cache": False}
    default = modelval.shape_bias("efficientnet_lite0", **common)
    explicit = modelval.shape_bias("efficientnet_lite0", device="cuda", **common)
    assert default.row.provenance["device"]["type"] == "cuda"
    assert explicit.row.provenance["device"] == default.row.provenance["device"]
    assert [d.response for d in default.decisions] == [d.response for d in explicit.decisions]


def test_validate_and_the_plugin_run_on_cuda(tmp_path, pytester, modelval_data_root):
    from modelval.cli import main

    models_file = tmp_path / "modelval.toml"
    models_file.write_text('[models.lite0]\nspec = "efficientnet_lite0"\n')
    argv = ["validate", "--models-file", str(models_file), "--data-root", str(modelval_data_root),
            "--allow-modified-stimuli", "--device", "cuda", "--report-dir", str(tmp_path / "cli")]  # fmt: skip
    assert main(argv) == 0
    rows = json.loads((tmp_path / "cli" / "shape_bias.json").read_text())
    assert {row["provenance"]["device"]["type"] for row in rows} == {"cuda"}

    pytester.path.joinpath("modelval.toml").write_text(models_file.read_text())
    pytester.makepyfile(test_zoo="""
        def test_my_zoo(modelval_case, modelval_runner):
            judgement = modelval_runner.run(modelval_case)
            assert judgement.passed, judgement.message
    """)  # fmt: skip
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--modelval-data-root={modelval_data_root}", "--modelval-allow-modified-stimuli",
        "--modelval-device", "cuda", f"--modelval-report-dir={tmp_path / 'plugin'}",
    )  # fmt: skip
    result.assert_outcomes(passed=2)
    rows = json.loads((tmp_path / "plugin" / "shape_bias.json").read_text())
    assert {row["provenance"]["device"]["type"] for row in rows} == {"cuda"}


def test_a_model_that_does_not_fit_is_one_line(tmp_path, stimulus_subset, capsys):
    """On CUDA, as on the CPU (tests/evaluation/test_device.py): one line, exit status 2, no traceback."""
    from memory_helpers import does_not_fit

    does_not_fit("cuda", tmp_path, stimulus_subset, capsys)


def test_preprocess_diff_names_a_cuda_resize_and_a_cuda_forward(modelval_data_root):
    """The same tensor pipeline with its steps on CUDA (pytorch/vision #8399: one grey level) and the forward on CUDA:
    the diff runs each where its pipeline says, and a CUDA forward alone differs only at device and batch."""
    import modelval

    resize = modelval.preprocess_diff("model+backend=tensor", "model+backend=tensor+transform_device=cuda",
                                      stimuli="288", limit=32, data_root=modelval_data_root, device="cpu")  # fmt: skip
    (variant,) = resize.variants
    stages = {s.stage: s for s in variant.stages}
    assert not stages["decode"].diverged and not stages["dtype and range"].diverged
    assert variant.first_stage in (None, "resize"), resize.text()  # CUDA's resize may equal the CPU's on these
    forward = modelval.preprocess_diff("model", "model+device=cuda", stimuli="original", limit=32,
                                       data_root=modelval_data_root, device="cpu")  # fmt: skip
    (variant,) = forward.variants
    assert all(not s.diverged for s in variant.stages[:-1])
    assert variant.first_stage in (None, "device and batch"), forward.text()


def test_preprocess_diff_of_a_compiled_forward(modelval_data_root):
    """torch.compile of the same model on CUDA: the inputs agree; only the forward may move the logits."""
    import modelval

    diff = modelval.preprocess_diff("model+device=cuda", "model+device=cuda+compile", stimuli="original", limit=32,
                                    data_root=modelval_data_root)  # fmt: skip
    (variant,) = diff.variants
    assert all(not s.diverged for s in variant.stages[:-1])
    assert variant.first_stage in (None, "device and batch"), diff.text()
