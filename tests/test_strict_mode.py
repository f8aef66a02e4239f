"""Missing data fails with what is missing (--modelval-allow-missing-data skips); missing weights skip
(--modelval-strict-weights fails).

Runs pytest itself in a subprocess on one real test, with the data pointed somewhere empty.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_pytest(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MODELVAL_STRICT")}, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rsf", "-q", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("allow_missing", [False, True])
@pytest.mark.slow
def test_missing_stimuli_fail_or_skip_when_allowed(tmp_path, allow_missing):
    args = [
        "tests/datasets/test_stimuli.py::test_real_stimuli_counts",
        f"--modelval-data-root={tmp_path / 'absent'}",
    ]
    result = run_pytest(*args, *(["--modelval-allow-missing-data"] if allow_missing else []))
    output = result.stdout + result.stderr
    assert "cue-conflict folder not found" in output and "modelval data download" in output
    assert "Traceback" not in output
    if allow_missing:
        assert result.returncode == 0 and "1 skipped" in output
    else:
        assert result.returncode == 1 and "--modelval-allow-missing-data" in output  # a setup error


def test_strict_data_environment_overrides_allow_missing(tmp_path):
    args = [
        "tests/datasets/test_stimuli.py::test_real_stimuli_counts",
        f"--modelval-data-root={tmp_path / 'absent'}",
    ]
    result = run_pytest(*args, "--modelval-allow-missing-data", env={"MODELVAL_STRICT_DATA": "1"})
    assert result.returncode == 1 and "1 error" in result.stdout


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.slow
def test_missing_weights_skip_or_fail(tmp_path, strict):
    """A weight case with an empty checkpoint folder: skip naming the fetch command, or fail when strict."""
    case = (
        "tests/runner/test_shape_bias_validation.py::"
        "test_shape_bias[resnet50-SIN-texture-vs-shape-correct-model-norm]"
    )
    args = [case, f"--modelval-checkpoint-dir={tmp_path}"]
    result = run_pytest(*args, *(["--modelval-strict-weights"] if strict else []))
    output = result.stdout + result.stderr
    assert "resnet50_train_60_epochs-c8e5653e.pth.tar" in output and "modelval models fetch resnet50_sin" in output
    if strict:
        assert result.returncode == 1 and "[strict weights]" in output
    else:
        assert result.returncode == 0 and "1 skipped" in output
