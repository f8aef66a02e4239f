"""An installed modelval works outside the checkout: the wheel, installed in a fresh environment, run from an
empty folder (no fixtures/, no ../shared, no checkout on the path).

The new environment reuses this environment's packages (torch, ...) through a ``.pth`` line instead of
installing them again; modelval itself comes only from the wheel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory, modelval_data_root):
    """(python, modelval executable, environment) of a fresh venv holding only the built wheel."""
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(work), str(ROOT)],
        check=True,
        timeout=300,
    )
    (wheel,) = work.glob("modelval-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for packaged in ("modelval/data/cue_conflict_manifest.json", "modelval/data/baselines/efficientnet_lite0.csv"):
        assert packaged in names
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    target = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    # This environment's dependencies, after the new environment's own site-packages (so the wheel wins).
    (target / "zz_reuse_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        timeout=300,
    )
    scripts = venv / "bin"
    (scripts / "modelval").write_text(f"#!{python}\nimport sys\nfrom modelval.cli import main\nsys.exit(main())\n")
    (scripts / "modelval").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MODELVAL_HOME")}
    env.update(
        MODELVAL_DATA_HOME=str(modelval_data_root.parent),  # the data home: <home>/cue-conflict
        MODELVAL_CACHE_DIR=str(work / "cache"),
        MODELVAL_OFFLINE="1",
        PATH=f"{scripts}{os.pathsep}{env.get('PATH', '')}",
        MPLBACKEND="Agg",
    )
    empty = work / "empty"
    empty.mkdir()
    return python, env, empty


def run(args, installed, **kwargs):
    _, env, empty = installed
    env = kwargs.pop("env", env)
    return subprocess.run(args, cwd=kwargs.pop("cwd", empty), env=env, capture_output=True, text=True, timeout=600)


def test_modelval_comes_from_the_wheel(installed):
    python, _, _ = installed
    result = run([str(python), "-c", "import modelval, sys; print(modelval.__file__)"], installed)
    assert result.returncode == 0, result.stderr
    assert str(ROOT) not in result.stdout and "site-packages" in result.stdout


def test_shape_bias_from_an_empty_folder(installed):
    """The session's output and decode caches (as ``session_caches``): the 1280 forwards ran once in this session,
    and the installed copy serves them only after its own forward of the probe stimuli answers as stored."""
    env = {k: v for k, v in installed[1].items() if k != "MODELVAL_NO_CACHE"}
    env["MODELVAL_CACHE_DIR"] = os.environ["MODELVAL_CACHE_DIR"]
    args = ["modelval", "shape-bias", "--model", "efficientnet_lite0", "--json", "--bootstrap", "0"]
    result = run(args, installed, env=env)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert round(payload["shape_bias"], 4) == 0.2394
    assert payload["stimuli"] == "verified"


def test_verify_data_from_an_empty_folder(installed):
    result = run(["modelval", "data", "verify"], installed)
    assert result.returncode == 0, result.stderr + result.stdout


def test_the_plugin_in_a_scratch_project(installed, tmp_path, stimulus_subset):
    """The installed plugin validates a one-model models file (on 4 stimuli per category: quick)."""
    python, _, _ = installed
    project = tmp_path / "project"
    project.mkdir()
    (project / "modelval.toml").write_text('[models.lite0]\nspec = "efficientnet_lite0"\nnormalizations = ["model"]\n')
    (project / "pytest.ini").write_text(
        f"[pytest]\nmodelval_data_root = {stimulus_subset(4)}\nmodelval_allow_modified_stimuli = true\n"
    )
    (project / "test_zoo.py").write_text(
        "def test_zoo(modelval_case, modelval_runner):\n"
        "    judgement = modelval_runner.run(modelval_case)\n"
        "    assert judgement.passed, judgement.message\n"
    )
    _, env, _ = installed
    env = {k: v for k, v in env.items() if k != "MODELVAL_DATA_HOME"}  # the project's ini names the folder
    result = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "1 passed" in result.stdout and "FINDING" in result.stdout
