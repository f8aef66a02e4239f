"""Skips say what is missing; --strict-data / --strict-weights turn those skips into failures.

Runs pytest itself in a subprocess on one real test, with the data pointed somewhere empty.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_pytest(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODELVAL_STRICT")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rsf", "-q", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("strict", [False, True])
def test_missing_stimuli_skip_or_fail(tmp_path, strict):
    args = ["tests/datasets/test_stimuli.py::test_real_stimuli_counts", "--data-root", str(tmp_path / "absent")]
    result = run_pytest(*args, *(["--strict-data"] if strict else []))
    output = result.stdout + result.stderr
    assert "cue-conflict stimuli not found" in output and "modelval download-data" in output
    if strict:
        assert result.returncode == 1 and "[strict data]" in output  # a setup error: the test does not run
    else:
        assert result.returncode == 0 and "1 skipped" in output


@pytest.mark.parametrize("strict", [False, True])
def test_missing_weights_skip_or_fail(tmp_path, strict):
    """A weight case with an empty checkpoint folder: skip naming the fetch command, or fail when strict."""
    case = (
        "tests/validation/test_shape_bias_validation.py::"
        "test_shape_bias[resnet50-SIN-texture-vs-shape-correct-model-norm]"
    )
    args = [case, "--checkpoint-dir", str(tmp_path)]
    result = run_pytest(*args, *(["--strict-weights"] if strict else []))
    output = result.stdout + result.stderr
    assert "resnet50_train_60_epochs-c8e5653e.pth.tar" in output and "modelval fetch resnet50_sin" in output
    if strict:
        assert result.returncode == 1 and "[strict weights]" in output
    else:
        assert result.returncode == 0 and "1 skipped" in output
