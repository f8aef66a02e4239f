"""The real download -> verify -> load path, driven against checkpoint files served on 127.0.0.1."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from modelval.errors import ChecksumError, DataError, WeightsNotAvailableError
from modelval.models import fetch_weights, load_model, weights_status
from modelval.models.checkpoints import load_state_dict_file
from modelval.models.resnet import SIN_URL, _resnet50_entry
from modelval.preprocessing import prepare_batch
from weights_helpers import save_geirhos_checkpoint, save_with_hash_name, serve


@pytest.fixture(scope="session")
def geirhos(tmp_path_factory: pytest.TempPathFactory):
    """A random-init ResNet-50 saved exactly like the texture-vs-shape checkpoints, with a correct hash name."""
    from torchvision.models import resnet50

    torch.manual_seed(0)
    model = resnet50(weights=None).eval()
    served = tmp_path_factory.mktemp("served")
    return model, save_geirhos_checkpoint(model, served)


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def local_entry(url: str):
    return _resnet50_entry("resnet50_local_test", "SIN", url, "state_dict", "texture-vs-shape")


@pytest.mark.slow
def test_geirhos_checkpoint_downloads_verifies_and_loads_strictly(
    geirhos, isolated_caches, temporary_entry, few_stimuli
):
    model, served_file = geirhos
    with serve(served_file.parent) as server:
        entry = temporary_entry(local_entry(f"{server.url}/{served_file.name}"))
        assert weights_status(entry.name).available is False
        loaded = load_model(entry.name, progress=False)
    cached = isolated_caches["checkpoints"] / served_file.name
    assert files_in(isolated_caches["checkpoints"]) == [served_file.name]  # no temporary file left
    assert cached.read_bytes() == served_file.read_bytes()
    assert weights_status(entry.name).available is True
    inputs = prepare_batch(few_stimuli[:2], loaded.config.preprocess)
    with torch.inference_mode():
        assert torch.equal(loaded.model(inputs), model(inputs))
    # Second load: from the cache, offline, no server.
    again = load_model(entry.name, offline=True, progress=False)
    with torch.inference_mode():
        assert torch.equal(again.model(inputs), model(inputs))


def test_state_dict_keys_are_stripped_and_loaded_strictly(geirhos, tmp_path):
    _, served_file = geirhos
    raw = load_state_dict_file(served_file, key="state_dict")
    assert all(k.startswith("module.") for k in raw)
    # A checkpoint missing a tensor must not load silently.
    del raw["module.fc.bias"]
    broken = save_with_hash_name({"state_dict": raw}, tmp_path, "broken", ".pth.tar")
    from modelval.models.resnet import _resnet50_from_checkpoint

    with pytest.raises(RuntimeError, match=r"fc\.bias"):
        _resnet50_from_checkpoint(broken, key="state_dict")


def test_wrong_hash_on_the_real_entry_is_refused_and_removed(isolated_caches, tmp_path, monkeypatch):
    served = tmp_path / "served"
    served.mkdir()
    name = SIN_URL.rsplit("/", 1)[-1]
    torch.save({"state_dict": {"w": torch.zeros(3)}}, served / name)  # right name, wrong content
    with serve(served) as server:
        monkeypatch.setenv("MODELVAL_MIRROR", server.url)
        with pytest.raises(WeightsNotAvailableError) as caught:
            load_model("resnet50_sin", progress=False)
    message = str(caught.value)
    assert "'resnet50_sin'" in message
    assert str(isolated_caches["checkpoints"] / name) in message
    assert f"{server.url}/{name}" in message
    assert "modelval models fetch resnet50_sin" in message and "MODELVAL_CHECKPOINT_DIR=" in message
    assert "SHA-256" in message and "c8e5653e" in message
    assert files_in(isolated_caches["checkpoints"]) == []


@pytest.mark.parametrize(
    ("mode", "reason", "attempts"),
    [("truncate", "IncompleteRead|cut short", 4), ("error500", "HTTP 500", 4), ("close", "onnection", 4)],
)
def test_failed_downloads_leave_no_file_and_name_everything(
    geirhos, isolated_caches, temporary_entry, mode, reason, attempts
):
    _, served_file = geirhos
    with serve(served_file.parent, mode) as server:
        url = f"{server.url}/{served_file.name}"
        entry = temporary_entry(local_entry(url))
        with pytest.raises(WeightsNotAvailableError) as caught:
            load_model(entry.name, progress=False)
    message = str(caught.value)
    assert entry.name in message and served_file.name in message and url in message
    assert f"modelval models fetch {entry.name}" in message
    assert re.search(reason, message)
    assert sum(server.requests.values()) == attempts  # first try + 3 retries
    assert files_in(isolated_caches["checkpoints"]) == []


def test_connection_refused(isolated_caches, temporary_entry):
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/resnet50_train_60_epochs-c8e5653e.pth.tar"
    entry = temporary_entry(local_entry(url))
    with pytest.raises(WeightsNotAvailableError, match="connection failed") as caught:
        load_model(entry.name, progress=False)
    assert url in str(caught.value)
    assert files_in(isolated_caches["checkpoints"]) == []


def test_offline_and_not_cached_never_connects(geirhos, isolated_caches, temporary_entry):
    _, served_file = geirhos
    with serve(served_file.parent) as server:
        entry = temporary_entry(local_entry(f"{server.url}/{served_file.name}"))
        status = weights_status(entry.name)
        with pytest.raises(WeightsNotAvailableError) as caught:
            load_model(entry.name, offline=True, progress=False)
    assert server.requests == {}
    assert str(caught.value).startswith(status.message)
    assert "offline" in str(caught.value)


def test_offline_environment_variable(isolated_caches, monkeypatch):
    monkeypatch.setenv("MODELVAL_OFFLINE", "1")
    with pytest.raises(WeightsNotAvailableError, match=r"resnet50_in.*resnet50-0676ba61\.pth"):
        load_model("resnet50_in", progress=False)


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_fetch_offline_checks_the_cache_and_never_connects(how, geirhos, isolated_caches, temporary_entry, capsys):
    """`modelval models fetch --offline` was documented but unrecognised, and MODELVAL_OFFLINE=1 still downloaded."""
    from modelval.cli import main

    _, served_file = geirhos
    with serve(served_file.parent) as server:
        entry = temporary_entry(local_entry(f"{server.url}/{served_file.name}"))
        argv = ["models", "fetch", entry.name, *(["--offline"] if how == "flag" else [])]
        with pytest.MonkeyPatch.context() as patch:
            if how == "environment":
                patch.setenv("MODELVAL_OFFLINE", "1")
            assert main(argv) == 2
            err = capsys.readouterr().err
            assert server.requests == {}
            assert "offline mode: nothing is downloaded" in err and "Traceback" not in err
            (isolated_caches["checkpoints"] / served_file.name).write_bytes(served_file.read_bytes())
            assert main(argv) == 0  # cached and verified: nothing to download
            assert (
                f"ok      {entry.name}: {isolated_caches['checkpoints'] / served_file.name}" in capsys.readouterr().out
            )
            assert server.requests == {}
            with pytest.raises(Exception, match="--force downloads again"):
                fetch_weights(entry.name, force=True, offline=True)


@pytest.mark.slow
def test_corrupt_cached_file_is_detected_before_load_and_fetch_repairs_it(
    geirhos, isolated_caches, temporary_entry, few_stimuli
):
    model, served_file = geirhos
    cached = isolated_caches["checkpoints"] / served_file.name
    data = bytearray(served_file.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte: still a loadable zip, wrong weights
    cached.write_bytes(bytes(data))
    with serve(served_file.parent) as server:
        entry = temporary_entry(local_entry(f"{server.url}/{served_file.name}"))
        with pytest.raises(ChecksumError) as caught:
            load_model(entry.name, offline=True, progress=False)
        assert "corrupt" in str(caught.value)
        fetch = f"MODELVAL_CHECKPOINT_DIR={isolated_caches['checkpoints']} modelval models fetch {entry.name}"
        assert fetch in str(caught.value)
        assert server.requests == {}
        fetch_weights(entry.name, progress=False)
    assert cached.read_bytes() == served_file.read_bytes()
    loaded = load_model(entry.name, offline=True, progress=False)
    inputs = prepare_batch(few_stimuli[:1], loaded.config.preprocess)
    with torch.inference_mode():
        assert torch.equal(loaded.model(inputs), model(inputs))


def test_torch_hub_cache_is_used_when_it_holds_the_file(geirhos, isolated_caches, temporary_entry):
    _, served_file = geirhos
    hub_checkpoints = isolated_caches["torch"] / "hub" / "checkpoints"
    hub_checkpoints.mkdir(parents=True)
    (hub_checkpoints / served_file.name).symlink_to(served_file)
    entry = temporary_entry(local_entry(f"http://127.0.0.1:9/{served_file.name}"))
    status = weights_status(entry.name)
    assert status.available, status.message
    assert str(hub_checkpoints) in status.message


def test_checkpoints_with_code_objects_are_refused(tmp_path):
    path = tmp_path / "evil.pth"
    torch.save({"state_dict": {"w": torch.zeros(1)}, "object": Path("x")}, path)
    with pytest.raises(DataError, match="refused to load"):
        load_state_dict_file(path, key="state_dict")


# --- checkpoints in common layouts, and files that are no checkpoint (issue 23) ---------------------------

NET = """
import torch
def net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(12, 1000))
"""


@pytest.fixture
def small_net(tmp_path):
    (tmp_path / "net.py").write_text(NET)
    torch.manual_seed(1)  # other weights than the factory's own, so loading them is visible
    trained = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(12, 1000))
    return f"{tmp_path / 'net.py'}:net", trained.state_dict()


def _loaded_weight(spec, path, **options):
    return load_model(spec, checkpoint=path, progress=False, **options).model[2].weight


def test_a_lightning_checkpoint_gets_the_prefix_to_strip(small_net, tmp_path):
    spec, state = small_net
    path = tmp_path / "epoch=3.ckpt"
    torch.save({"state_dict": {f"model.{k}": v for k, v in state.items()}, "epoch": 3, "global_step": 10}, path)
    with pytest.raises(DataError, match=r"keys start with 'model\.': pass --strip-prefix model\.$"):
        load_model(spec, checkpoint=path, progress=False)
    assert torch.equal(_loaded_weight(spec, path, strip_prefix="model."), state["2.weight"])
    with pytest.raises(DataError, match=r"no key starts with 'net\.' \(--strip-prefix\)"):
        load_model(spec, checkpoint=path, strip_prefix="net.", progress=False)


def test_an_ema_state_dict_is_named_and_chosen_with_checkpoint_key(small_net, tmp_path):
    spec, state = small_net
    path = tmp_path / "timm-train.pth.tar"
    ema = {k: v + 1 for k, v in state.items()}
    torch.save({"state_dict": {f"{k}.old": v for k, v in state.items()}, "state_dict_ema": ema, "epoch": 9}, path)
    with pytest.raises(DataError, match=r"also holds state dicts under 'state_dict_ema': pass --checkpoint-key "):
        load_model(spec, checkpoint=path, progress=False)
    assert torch.equal(_loaded_weight(spec, path, checkpoint_key="state_dict_ema"), ema["2.weight"])
    with pytest.raises(DataError, match=r"no 'ema' in the checkpoint \(--checkpoint-key\); it holds 'state_dict', "):
        load_model(spec, checkpoint=path, checkpoint_key="ema", progress=False)
    with pytest.raises(DataError, match=r"'epoch' is not a state dict"):
        load_model(spec, checkpoint=path, checkpoint_key="epoch", progress=False)
    only_ema = tmp_path / "only-ema.pth"
    torch.save({"model_ema": ema, "optimizer": {"lr": 0.1}}, only_ema)
    with pytest.raises(DataError, match=r"holds state dicts under 'model_ema': pass --checkpoint-key model_ema"):
        load_model(spec, checkpoint=only_ema, progress=False)


def test_the_cli_takes_checkpoint_key_and_strip_prefix(small_net, tmp_path, stimulus_subset, capsys):
    from modelval.cli import main

    spec, state = small_net
    path = tmp_path / "lightning.ckpt"
    torch.save({"state_dict": {f"model.{k}": v for k, v in state.items()}, "ema": state}, path)
    argv = ["shape-bias", "--model", spec, "--checkpoint", str(path), "--data-root", str(stimulus_subset(1))]
    argv += ["--allow-modified-stimuli", "--device", "cpu", "--no-sanity-gate", "--bootstrap", "0", "--json"]
    assert main(argv) == 2
    assert "pass --strip-prefix model." in capsys.readouterr().err
    assert main([*argv, "--strip-prefix", "model."]) == 0
    assert main([*argv, "--checkpoint-key", "ema"]) == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"hello\n", r"not a PyTorch checkpoint \(neither a torch.save archive nor a legacy pickle; 6 bytes"),
        (b"x", r"not a PyTorch checkpoint \(.*1 byte starting b'x'\)"),
        (b"\x80\x02garbage", r"refused to load, the checkpoint holds objects other than tensors or is corrupt"),
        (b"", r"not a PyTorch checkpoint \(.*0 bytes"),
    ],
)
def test_a_checkpoint_that_is_no_checkpoint_is_one_line(content, message, small_net, tmp_path):
    """A text file gave a KeyError traceback from torch's unpickler; a 1-byte file advised weights_only=False."""
    spec, _ = small_net
    path = tmp_path / "best.pt"
    path.write_bytes(content)
    with pytest.raises(DataError, match=message) as caught:
        load_model(spec, checkpoint=path, progress=False)
    assert "\n" not in str(caught.value) and "weights_only=False" not in str(caught.value)


# --- a damaged weights file in the HF cache (issue 31: 10) ------------------------------------------------------


def _hf_cache_entry(hub: Path, repo: str, weights: bytes) -> Path:
    """``<hub>/models--<repo>/snapshots/<rev>/pytorch_model.bin`` (and config.json), as huggingface_hub lays it."""
    folder = hub / ("models--" + repo.replace("/", "--"))
    snapshot = folder / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text("a" * 40)
    (snapshot / "config.json").write_text('{"model_type": "vit"}')
    (snapshot / "pytorch_model.bin").write_bytes(weights)
    return snapshot / "pytorch_model.bin"


def _pickled_object() -> bytes:
    import datetime
    import pickle

    return pickle.dumps({"fc.weight": datetime.datetime(2020, 1, 1)}, protocol=2)


# Each damage once, each source at least once: what is read of the file does not depend on the source (2 s each).
@pytest.mark.parametrize(
    ("weights", "why", "spec"),
    [
        (b"", "is empty (0 bytes)", "timm:resnet18.a1_in1k"),
        (
            b"<html>rate limited</html>",
            "is not a PyTorch weights file (25 bytes starting b'<html>ra')",
            "hf:someone/tiny-vit",
        ),
        (b"PK\x03\x04cut short", "is a cut-short torch.save archive", "timm:resnet18.a1_in1k"),
    ],
)
def test_a_damaged_weights_file_in_the_hf_cache_says_how_to_refetch(tmp_path, monkeypatch, capsys, spec, weights, why):
    """Before: ``unexpected error: EOFError`` / ``UnpicklingError``, exit 3 (timm), or ``transformers cannot load
    the model (EOFError)`` / "holds objects other than tensors ... save it as model.safetensors" (hf)."""
    from modelval.cli import main

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("MODELVAL_OFFLINE", "1")
    repo = "timm/resnet18.a1_in1k" if spec.startswith("timm:") else spec.removeprefix("hf:")
    path = _hf_cache_entry(tmp_path / "hf" / "hub", repo, weights)
    assert main(["shape-bias", "--model", spec, "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cached weights of model '{spec}' are damaged: {path} {why}" in err
    assert f"Re-fetch them with: modelval models fetch {spec} --force" in err and "weights_only=False" not in err


def test_pickled_objects_in_timms_cached_weights_never_suggest_running_them(tmp_path, monkeypatch, capsys):
    """Before: exit 3 with torch's "If this checkpoint is trusted, retry with weights_only=False"."""
    from modelval.cli import main

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("MODELVAL_OFFLINE", "1")
    path = _hf_cache_entry(tmp_path / "hf" / "hub", "timm/resnet18.a1_in1k", _pickled_object())
    assert main(["shape-bias", "--model", "timm:resnet18.a1_in1k", "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: refused to load, it holds objects other than tensors" in err
    assert "modelval models fetch timm:resnet18.a1_in1k --force" in err and "weights_only=False" not in err


def test_under_one_mirror_the_weights_never_share_a_name_with_the_data(monkeypatch):
    """MODELVAL_MIRROR serves the data and the weights from one folder (docs/data.md): no registered checkpoint's
    file name is a data archive, a set's folder or the human data's folders."""
    from modelval.datasets.registry import list_datasets
    from modelval.models.checkpoints import checkpoint_url
    from modelval.models.registry import list_models
    from modelval.models.weights import UrlCheckpoint

    data = {"raw-data", "model-vs-human"} | {d.folder for d in list_datasets()}
    data |= {f"{folder}.tar.gz" for folder in data}
    weights = {w.file_name for e in list_models() for w in e.weights if isinstance(w, UrlCheckpoint)}
    assert weights and not weights & data and not any(name.endswith(".tar.gz") for name in weights)
    monkeypatch.setenv("MODELVAL_MIRROR", "http://mirror.invalid/all/")
    assert checkpoint_url(SIN_URL) == f"http://mirror.invalid/all/{SIN_URL.rsplit('/', 1)[-1]}"
