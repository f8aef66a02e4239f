"""Set-up with no extra step: a new user's first command fetches and verifies the stimuli itself.

Each test runs the real CLI in a subprocess as a new user would: ``HOME`` is an empty folder, no
``MODELVAL_DATA_HOME``, and ``MODELVAL_MIRROR`` points at a server on 127.0.0.1 that serves the
model-vs-human archive built from the real stimuli.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from PIL import Image

from modelval.behaviour.decisions import read_decisions

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cue_conflict_archive(modelval_data_root: Path) -> bytes:
    """``cue-conflict.tar.gz`` in the model-vs-human layout: ``cue-conflict/<category>/<file>.png``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        tar.add(modelval_data_root, arcname="cue-conflict")
    return buffer.getvalue()


def new_user(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MODELVAL_", "HF_", "XDG_"))}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT / "src"), MODELVAL_NO_CACHE="1", **extra)
    return env


def modelval(*args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "modelval", *args], env=env, capture_output=True, text=True, timeout=1200, cwd=cwd
    )


@pytest.mark.slow
def test_first_shape_bias_run_fetches_the_stimuli(tmp_path, local_server, cue_conflict_archive, bundled_evaluations):
    """Also the CLI's end-to-end run on the bundled model: decisions file, plot, recomputation.

    One full evaluation serves both checks; a second in-process CLI run of the same model would cost
    CI another evaluation and test nothing new.
    """
    local_server.add("/cue-conflict.tar.gz", cue_conflict_archive)
    env = new_user(tmp_path / "home", MODELVAL_MIRROR=local_server.url + "/")
    decisions_out, plot = tmp_path / "decisions.csv", tmp_path / "plot.png"
    result = modelval(
        "shape-bias", "--model", "efficientnet_lite0", "--json",
        "--decisions-out", str(decisions_out), "--out", str(plot), env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    fetched = [line for line in result.stderr.splitlines() if "fetching" in line]
    destination = tmp_path / "home" / ".cache" / "modelval" / "cue-conflict"
    assert fetched == [
        f"modelval: fetching the cue-conflict stimuli from {local_server.url}/cue-conflict.tar.gz into {destination}"
    ]
    report = json.loads(result.stdout)
    assert report["model"] == "efficientnet_lite0" and report["conflict_images"] == 1200
    assert round(report["shape_bias"], 4) == 0.2394
    assert (report["shape_hits"], report["texture_hits"]) == (197, 626)
    assert len(list(destination.glob("*/*.png"))) == 1280
    assert local_server.requests == {"/cue-conflict.tar.gz": 1}
    # The CLI (batch 32, a fresh process) and the library (batch 48) agree decision by decision.
    library = bundled_evaluations("model")
    assert [d.response for d in read_decisions(decisions_out)] == [d.response for d in library.decisions]
    with Image.open(plot) as image:
        assert image.format == "PNG" and image.width > 400

    # The second run finds the stimuli (no request, no "fetching" line) and, from the written
    # decisions, recomputes the same numbers.
    again = modelval("shape-bias", "--decisions", str(decisions_out), "--json", env=env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert local_server.requests == {"/cue-conflict.tar.gz": 1} and "fetching" not in again.stderr
    recomputed = json.loads(again.stdout)
    assert (recomputed["shape_hits"], recomputed["texture_hits"]) == (197, 626)


@pytest.mark.parametrize("offline_env", ["MODELVAL_OFFLINE", "HF_HUB_OFFLINE"])
def test_offline_run_fails_in_one_line_without_a_request(tmp_path, local_server, offline_env):
    env = new_user(tmp_path / "home", MODELVAL_MIRROR=local_server.url, **{offline_env: "1"})
    result = modelval("shape-bias", "--model", "efficientnet_lite0", env=env)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "cue-conflict folder not found" in result.stderr and "offline" in result.stderr
    assert local_server.requests == {}


def test_offline_in_the_config_file_fails_in_one_line(tmp_path, local_server):
    env = new_user(tmp_path / "home", MODELVAL_MIRROR=local_server.url)
    (tmp_path / "modelval.toml").write_text("[settings]\noffline = true\n")
    result = modelval("shape-bias", "--model", "efficientnet_lite0", env=env, cwd=tmp_path)
    assert result.returncode == 2 and "offline" in result.stderr and local_server.requests == {}


@pytest.mark.slow
def test_failed_download_names_the_cause(tmp_path, local_server):
    local_server.add("/cue-conflict.tar.gz", b"", mode="error500")
    env = new_user(tmp_path / "home", MODELVAL_MIRROR=local_server.url)
    result = modelval("models", "audit", "--model", "efficientnet_lite0", env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("modelval: error: cue-conflict folder not found") and "500" in error
    assert not (tmp_path / "home" / ".cache" / "modelval" / "cue-conflict").exists()


def test_a_named_data_root_is_never_filled_behind_the_users_back(tmp_path, local_server):
    env = new_user(tmp_path / "home", MODELVAL_MIRROR=local_server.url)
    result = modelval("shape-bias", "--model", "efficientnet_lite0", "--data-root", str(tmp_path / "mine"), env=env)
    assert result.returncode == 2 and "cue-conflict folder not found" in result.stderr
    assert local_server.requests == {}
