"""The output cache: the key changes with every field that can change an output, entries are atomic and
checksummed, a killed evaluation resumes, concurrent writers leave a valid cache, the size stays bounded.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from modelval.datasets.stimulus_set import StimulusSet
from modelval.evaluation import evaluate, output_key
from modelval.evaluation import forward as evaluation  # the forward path: where the key is computed
from modelval.preprocessing import PreprocessConfig
from modelval.records.output_cache import OutputCache, parse_size


def tiny_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(48, 1000)).eval()


@pytest.fixture(scope="module")
def few(modelval_stimulus_set) -> StimulusSet:
    """The first 32 real stimuli, with their file digests."""
    stimuli = modelval_stimulus_set
    return dataclasses.replace(stimuli, stimuli=stimuli.stimuli[:32], images=stimuli.images[:32])


CONFIG = PreprocessConfig(mean=(0.5,) * 3, std=(0.5,) * 3, interpolation="bicubic")


# --- the key ---------------------------------------------------------------------------------


#: Each field of the key, changed alone: (field, how to change it). A field output_key() records that is
#: not in this table fails test_every_field_of_the_key_is_tested: a cache key that misses a field fails.
def _other_weights(model, config, stimuli, kwargs):
    other = tiny_model()
    with torch.no_grad():
        other[2].bias[0] += 1e-6  # one value, barely: still another model
    return other, config, stimuli, kwargs


def _other_architecture(model, config, stimuli, kwargs):
    # the same weights under another module tree (a ReLU): same state dict, other outputs
    other = torch.nn.Sequential(*model, torch.nn.ReLU())
    return other, config, stimuli, kwargs


def _preprocessing(change):
    return lambda model, config, stimuli, kwargs: (model, dataclasses.replace(config, **change), stimuli, kwargs)


def _other_stimuli(model, config, stimuli, kwargs):
    digests = dict(stimuli.digests)
    first = stimuli.stimuli[0].relpath
    digests[first] = "0" * 64  # one file's content changed
    return model, config, dataclasses.replace(stimuli, digests=digests), kwargs


def _fewer_stimuli(model, config, stimuli, kwargs):
    return model, config, dataclasses.replace(stimuli, stimuli=stimuli.stimuli[:31], images=stimuli.images[:31]), kwargs


def _setting(**change):
    return lambda model, config, stimuli, kwargs: (model, config, stimuli, {**kwargs, **change})


KEY_CHANGES = {
    "weights": [_other_weights],
    "architecture": [_other_architecture],
    "preprocessing": [
        _preprocessing({"mean": (0.485, 0.456, 0.406)}),
        _preprocessing({"std": (0.229, 0.224, 0.225)}),
        _preprocessing({"interpolation": "bilinear"}),
        _preprocessing({"resize": 256, "crop": 224}),
        _preprocessing({"input_size": 240}),
    ],
    "stimuli": [_other_stimuli, _fewer_stimuli],
    "precision": [_setting(amp="bf16")],
    "device_class": [_setting(device="cuda")],
    "channels_last": [_setting(channels_last=True)],
}


def _key(model, config, stimuli, kwargs):
    return output_key(model, config, stimuli, **kwargs)[0]


@pytest.fixture
def as_if_cuda(monkeypatch):
    """output_key only reads the device's type: a CUDA device can be named without one."""
    real = evaluation.resolve_device
    monkeypatch.setattr(evaluation, "resolve_device", lambda d: torch.device("cuda") if d == "cuda" else real(d))


CHANGES = [(field, index) for field, changes in KEY_CHANGES.items() for index in range(len(changes))]


@pytest.mark.parametrize(("field", "index"), CHANGES)
def test_each_field_alone_changes_the_key(field, index, few, as_if_cuda):
    model, kwargs = tiny_model(), {"device": "cpu"}
    base = _key(model, CONFIG, few, kwargs)
    assert base == _key(tiny_model(), CONFIG, few, kwargs)  # the same inputs: the same key
    changed = KEY_CHANGES[field][index](model, CONFIG, few, kwargs)
    assert _key(*changed) != base


def test_versions_and_the_forward_path_are_in_the_key(few, monkeypatch):
    model = tiny_model()
    base = _key(model, CONFIG, few, {"device": "cpu"})
    monkeypatch.setattr(evaluation, "FORWARD_PATH_VERSION", evaluation.FORWARD_PATH_VERSION + 1)
    assert _key(model, CONFIG, few, {"device": "cpu"}) != base
    monkeypatch.undo()
    real = evaluation.package_version
    monkeypatch.setattr(evaluation, "package_version", lambda name: "9.9" if name == "torch" else real(name))
    assert _key(model, CONFIG, few, {"device": "cpu"}) != base


def test_every_field_of_the_key_is_tested(few):
    """A field added to the key without a test that changes it alone fails here."""
    _, fields = output_key(tiny_model(), CONFIG, few, device="cpu")
    covered = set(KEY_CHANGES) | {"forward_path", "versions"}
    assert set(fields) == covered


def test_a_model_without_a_state_dict_is_never_cached(few, tmp_path):
    cache = OutputCache(tmp_path)
    module = tiny_model()
    result = evaluate(lambda x: module(x), CONFIG, few, progress=False, n_bootstrap=0, output_cache=cache)
    assert result.output_cache.startswith("off: the model has no state dict")
    assert cache.entries() == []


# --- hits, entries, eviction ------------------------------------------------------------------


def test_a_hit_gives_the_fresh_run_exactly(few, tmp_path):
    cache = OutputCache(tmp_path)
    fresh = evaluate(tiny_model(), CONFIG, few, progress=False, n_bootstrap=0, batch_size=8, output_cache=cache)
    again = evaluate(tiny_model(), CONFIG, few, progress=False, n_bootstrap=0, batch_size=32, output_cache=cache)
    uncached = evaluate(tiny_model(), CONFIG, few, progress=False, n_bootstrap=0, batch_size=8)
    assert (fresh.output_cache, again.output_cache, uncached.output_cache) == ("miss", "hit", "off")
    assert np.array_equal(fresh.category_probabilities, again.category_probabilities)
    assert np.array_equal(fresh.category_probabilities, uncached.category_probabilities)
    assert [d.response for d in again.decisions] == [d.response for d in uncached.decisions]
    (entry,) = cache.entries()
    assert entry.meta["rows"] == 32 and entry.meta["shape"] == [32, 1000]


def test_a_damaged_entry_is_a_miss_and_is_removed(tmp_path):
    cache = OutputCache(tmp_path)
    key = "ab" * 32
    cache.save(key, np.arange(12, dtype=np.float32).reshape(3, 4), {"model": "m"})
    array, meta = cache.load(key)
    assert array.shape == (3, 4) and meta["model"] == "m"
    path = cache.entry_dir(key) / "outputs.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # one flipped bit in the last value
    path.write_bytes(bytes(data))
    assert cache.load(key) is None
    assert not cache.entry_dir(key).exists()


def test_least_recently_used_entries_go_first(tmp_path):
    cache = OutputCache(tmp_path, max_bytes=10**9)
    keys = [f"{i:02d}" * 32 for i in range(3)]
    for number, key in enumerate(keys):
        cache.save(key, np.zeros((100, 1000), dtype=np.float32), {"model": f"m{number}"})
        os.utime(cache.entry_dir(key) / "meta.json", (1000 + number, 1000 + number))
    cache.load(keys[0])  # used now: the most recent
    cache.max_bytes = 2 * 400_500  # room for two entries
    removed = cache.evict()
    assert removed == [keys[1]]
    assert [entry.key for entry in cache.entries()] == [keys[2], keys[0]]
    assert cache.info()["entries"] == 2 and cache.clear() == 2 and cache.entries() == []


def test_sizes_read_as_people_write_them():
    assert parse_size("2G") == 2 * 1024**3 and parse_size("500MiB") == 500 * 1024**2 and parse_size("1024") == 1024
    with pytest.raises(Exception, match="give a size such as 2G"):
        parse_size("lots")


# --- a killed run resumes; two writers at once -------------------------------------------------

FACTORY = """
import os, signal, torch

class Tiny(torch.nn.Sequential):
    calls = 0

    def forward(self, x):
        Tiny.calls += 1
        if os.environ.get("KILL_AT") and Tiny.calls == int(os.environ["KILL_AT"]):
            os.kill(os.getpid(), signal.SIGKILL)  # as an out-of-memory killer or a pre-empted job would
        return super().forward(x)

def tiny():
    torch.manual_seed(0)
    return Tiny(torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(48, 1000))
"""


def _command(tmp_path: Path, data: Path) -> list[str]:
    return [
        sys.executable, "-m", "modelval", "shape-bias", "--model", f"{tmp_path / 'tiny.py'}:tiny",
        "--mean", "0.5,0.5,0.5", "--std", "0.5,0.5,0.5", "--data-root", str(data), "--allow-modified-stimuli",
        "--batch-size", "8", "--bootstrap", "0", "--no-sanity-gate", "--json", "--device", "cpu",
    ]  # fmt: skip


def _environment(cache: Path, **env: str) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k != "MODELVAL_NO_OUTPUT_CACHE"}
    return {**environment, "MODELVAL_OUTPUT_CACHE": str(cache), **env}


def _shape_bias(tmp_path: Path, data: Path, cache: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        _command(tmp_path, data), capture_output=True, text=True, env=_environment(cache, **env), timeout=300
    )


@pytest.mark.slow
def test_a_killed_evaluation_resumes_from_the_stored_batches(tmp_path, stimulus_subset):
    (tmp_path / "tiny.py").write_text(FACTORY)
    data, cache = stimulus_subset(2), tmp_path / "cache"  # 32 stimuli: 4 batches of 8
    killed = _shape_bias(tmp_path, data, cache, KILL_AT="3")
    assert killed.returncode == -9
    assert len(list(cache.glob("??/*/partial/*.npy"))) == 2  # the two finished batches
    resumed = json.loads(_shape_bias(tmp_path, data, cache).stdout)
    assert resumed["output_cache"] == "resumed: 16 of 32 rows reused"
    fresh = json.loads(_shape_bias(tmp_path, data, tmp_path / "fresh").stdout)
    assert fresh["output_cache"] == "miss"
    assert (resumed["shape_hits"], resumed["texture_hits"], resumed["other"]) == (
        fresh["shape_hits"], fresh["texture_hits"], fresh["other"],
    )  # fmt: skip
    assert json.loads(_shape_bias(tmp_path, data, cache).stdout)["output_cache"] == "hit"
    assert not list(cache.glob("??/*/partial"))  # the finished entry replaced the partial rows


@pytest.mark.slow
def test_two_concurrent_writers_leave_a_valid_cache(tmp_path, stimulus_subset):
    (tmp_path / "tiny.py").write_text(FACTORY)
    data, cache = stimulus_subset(2), tmp_path / "cache"
    command, environment = _command(tmp_path, data), _environment(cache)
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=environment) for _ in range(2)]
    outputs = [json.loads(run.communicate(timeout=300)[0]) for run in runs]
    assert all(run.returncode == 0 for run in runs)
    assert outputs[0]["shape_hits"] == outputs[1]["shape_hits"]
    (entry,) = OutputCache(cache).entries()
    assert OutputCache(cache).load(entry.key) is not None  # whole and checksummed
    assert not list(cache.glob("??/*/.*"))  # no temporary file left behind
    assert json.loads(_shape_bias(tmp_path, data, cache).stdout)["output_cache"] == "hit"
