"""The output cache: the key changes with every field that can change an output, entries are atomic and
checksummed, a killed evaluation resumes, concurrent writers leave a valid cache, the size stays bounded.
"""

from __future__ import annotations

import dataclasses
import fcntl
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
from modelval.evaluation import stored as evaluation  # where the output-cache key is computed
from modelval.parsing import size as parse_size
from modelval.preprocessing import PreprocessConfig
from modelval.records.output_cache import OutputCache


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


class _Scaled(torch.nn.Module):
    """The very common wrapper: a normalization kept as plain tensors, a plain flag, a head behind it."""

    def __init__(self, mean: float = 0.5, flip: bool = False) -> None:
        super().__init__()
        self.body = tiny_model()
        self.mean = torch.tensor([mean] * 3).view(1, 3, 1, 1)  # a plain tensor: not in the state dict
        self.flip = flip  # a plain attribute
        self.register_buffer("scale", torch.ones(1), persistent=False)  # not in the state dict either

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.body((x - self.mean) * self.scale)
        return -logits if self.flip else logits


def _plain_tensor(model, config, stimuli, kwargs):
    return _Scaled(mean=0.4), config, stimuli, kwargs


def _plain_attribute(model, config, stimuli, kwargs):
    return _Scaled(flip=True), config, stimuli, kwargs


def _non_persistent_buffer(model, config, stimuli, kwargs):
    other = _Scaled()
    other.scale.fill_(2.0)
    return other, config, stimuli, kwargs


def _hook(model, config, stimuli, kwargs):
    other = _Scaled()
    other.body.register_forward_hook(lambda module, inputs, output: output * 2)
    return other, config, stimuli, kwargs


def _setting(**change):
    return lambda model, config, stimuli, kwargs: (model, config, stimuli, {**kwargs, **change})


KEY_CHANGES = {
    "weights": [_other_weights],
    "module_state": [_plain_tensor, _plain_attribute, _non_persistent_buffer, _hook],
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
    make = _Scaled if field == "module_state" else tiny_model
    model, kwargs = make(), {"device": "cpu"}
    base = _key(model, CONFIG, few, kwargs)
    assert base == _key(make(), CONFIG, few, kwargs)  # the same inputs: the same key
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
    monkeypatch.undo()
    # issue 40: a Pillow or libjpeg-turbo upgrade can move pixels, so it misses the stored outputs
    for codec in ("pillow", "libjpeg_turbo"):
        other = {**evaluation.decoder_record(), codec: "0.0.1"}
        monkeypatch.setattr(evaluation, "decoder_record", lambda other=other: other)
        assert _key(model, CONFIG, few, {"device": "cpu"}) != base
    monkeypatch.undo()
    assert _key(model, CONFIG, few, {"device": "cpu"}) == base


def test_the_decoder_is_named_with_its_codecs_in_the_key_and_the_record(few):
    import PIL

    from modelval.records.provenance import environment

    _, fields = output_key(tiny_model(), CONFIG, few, device="cpu")
    assert fields["decoder"] == environment()["decoder"]
    assert fields["decoder"]["name"] == "Pillow" and fields["decoder"]["pillow"] == PIL.__version__
    assert set(fields["decoder"]) == {"name", "pillow", "libjpeg_turbo", "jpeg", "zlib"}


def test_every_field_of_the_key_is_tested(few):
    """A field added to the key without a test that changes it alone fails here."""
    _, fields = output_key(tiny_model(), CONFIG, few, device="cpu")
    covered = set(KEY_CHANGES) | {"forward_path", "versions", "decoder"}
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
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    cache.save(key, array, {"model": "m"}, probe=array[:1])
    stored = cache.load(key)
    assert stored is not None and stored.outputs.shape == (3, 4) and stored.meta["model"] == "m"
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
        outputs = np.zeros((100, 1000), dtype=np.float32)
        cache.save(key, outputs, {"model": f"m{number}"}, probe=outputs[:1])
        os.utime(cache.entry_dir(key) / "meta.json", (1000 + number, 1000 + number))
    cache.load(keys[0])  # used now: the most recent
    cache.max_bytes = 2 * 405_000  # room for two entries
    removed = cache.evict()
    assert removed == [keys[1]]
    assert [entry.key for entry in cache.entries()] == [keys[2], keys[0]]
    assert cache.info()["entries"] == 2 and cache.clear().entries == 2 and cache.entries() == []


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
    environment = {k: v for k, v in os.environ.items() if k != "MODELVAL_NO_CACHE"}
    return {**environment, "MODELVAL_CACHE_DIR": str(cache.parent), **env}  # the output cache is <cache dir>/outputs


def _shape_bias(tmp_path: Path, data: Path, cache: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        _command(tmp_path, data), capture_output=True, text=True, env=_environment(cache, **env), timeout=300
    )


@pytest.mark.slow
def test_a_killed_evaluation_resumes_from_the_stored_batches(tmp_path, stimulus_subset):
    (tmp_path / "tiny.py").write_text(FACTORY)
    data, cache = stimulus_subset(2), tmp_path / "cache" / "outputs"  # 32 stimuli: 4 batches of 8
    killed = _shape_bias(tmp_path, data, cache, KILL_AT="4")  # the probe's forward, two batches, then killed
    assert killed.returncode == -9
    assert len(list(cache.glob("??/*/partial/0*.npy"))) == 2  # the two finished batches
    resumed = json.loads(_shape_bias(tmp_path, data, cache).stdout)
    assert resumed["output_cache"] == "resumed: 16 of 32 rows reused"
    fresh = json.loads(_shape_bias(tmp_path, data, tmp_path / "fresh" / "outputs").stdout)
    assert fresh["output_cache"] == "miss"
    assert (resumed["shape_hits"], resumed["texture_hits"], resumed["other"]) == (
        fresh["shape_hits"], fresh["texture_hits"], fresh["other"],
    )  # fmt: skip
    assert json.loads(_shape_bias(tmp_path, data, cache).stdout)["output_cache"] == "hit"
    assert not list(cache.glob("??/*/partial"))  # the finished entry replaced the partial rows


@pytest.mark.slow
def test_two_concurrent_writers_leave_a_valid_cache(tmp_path, stimulus_subset):
    (tmp_path / "tiny.py").write_text(FACTORY)
    data, cache = stimulus_subset(2), tmp_path / "cache" / "outputs"
    command, environment = _command(tmp_path, data), _environment(cache)
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=environment) for _ in range(2)]
    outputs = [json.loads(run.communicate(timeout=300)[0]) for run in runs]
    assert all(run.returncode == 0 for run in runs)
    assert outputs[0]["shape_hits"] == outputs[1]["shape_hits"]
    (entry,) = OutputCache(cache).entries()
    assert OutputCache(cache).load(entry.key) is not None  # whole and checksummed
    assert [p.name for p in cache.glob("??/*/.*")] == [".modelval-entry"]  # the mark; no temporary file left
    assert json.loads(_shape_bias(tmp_path, data, cache).stdout)["output_cache"] == "hit"


# --- clean-up deletes only what modelval made; killed writers' files are found ----------------------------


def _filled(tmp_path: Path) -> OutputCache:
    cache = OutputCache(tmp_path / "cache" / "outputs")
    outputs = np.ones((4, 10), dtype=np.float32)
    cache.save("ab" * 32, outputs, {"model": "m"}, probe=outputs[:1])
    cache.start_rows("cd" * 32, outputs[:1])
    cache.save_rows("cd" * 32, 0, outputs[:2])
    return cache


def test_clear_removes_modelvals_entries_and_leaves_the_users_folders(tmp_path):
    """The defect: `cache clear` removed any two-character folder (`db/`, `js/`) and said "removed 0"."""
    cache = _filled(tmp_path)
    mine = {"db/data.sqlite": b"data", "js/app.js": b"code", "ab/notes.txt": b"mine", "ab/" + "ab" * 8 + "/x": b"1"}
    for name, data in mine.items():
        (cache.root / name).parent.mkdir(parents=True, exist_ok=True)
        (cache.root / name).write_bytes(data)
    info = cache.info()
    assert (info["entries"], info["interrupted_runs"]) == (1, 1)
    assert set(info["not_modelvals"]) == {"db/data.sqlite", "js/", "ab/notes.txt", "ab/" + "ab" * 8}
    cleared = cache.clear()
    assert (cleared.entries, cleared.interrupted_runs) == (1, 1) and cleared.bytes > 0
    for name, data in mine.items():
        assert (cache.root / name).read_bytes() == data
    assert not (cache.root / "cd").exists()  # an emptied prefix folder goes; "ab" holds the user's files
    assert cache.entries() == [] and cache.partial_entries() == []


def test_a_killed_writers_temporary_files_are_counted_and_removed(tmp_path):
    cache = _filled(tmp_path)
    folder = cache.entry_dir("ab" * 32)
    killed = folder / ".outputs.npy.modelval-k1ll3d.tmp"  # what a writer killed by SIGKILL leaves (no lock held)
    killed.write_bytes(b"x" * 1000)
    os.utime(killed, (1, 1))
    (folder / "partial").mkdir()
    live = folder / "partial" / ".000000000-000000008-0123456789abcdef.npy.modelval-l1v3.tmp"
    live.write_bytes(b"y" * 10)
    os.utime(live, (1, 1))
    with live.open("rb") as held:  # a live writer holds the lock of its temporary file
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        info = cache.info()
        assert (info["temporary_files"], info["temporary_bytes"]) == (2, 1010)
        cache.evict()  # every write ends with it: the dead writer's file goes, the live one's stays
        assert not killed.exists() and live.exists()
    assert cache.clear().temporary_files == 1 and not live.exists()


def test_cache_commands_tell_what_they_removed_and_left(tmp_path, monkeypatch, capsys):
    from modelval.cli import main

    cache = _filled(tmp_path)
    (cache.root / "db").mkdir()  # "db" is hex, like a prefix folder: not made by modelval, it stays
    (cache.root / "db" / "notes").write_text("mine")
    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(cache.root.parent))  # `cache clear` empties the decode cache too
    assert main(["cache", "info"]) == 0
    shown = capsys.readouterr().out
    assert "interrupted runs (resumable): 1" in shown and "not modelval's (left alone): db/notes" in shown
    assert main(["cache", "clear", "--json"]) == 0
    cleared = json.loads(capsys.readouterr().out)
    assert (cleared["removed"], cleared["interrupted_runs"], cleared["left"]) == (1, 1, ["db/notes"])
    assert main(["cache", "info"]) == 0 and "entries: 0" in capsys.readouterr().out
    assert (cache.root / "db").is_dir()


def test_the_answer_caches_files_are_modelvals_and_a_foreign_one_is_not_read(tmp_path):
    """`answers/` holds the VLM answer cache: counted by info, emptied by clear, a user's file there named and left;
    a file there whose record names another model or prompt is not served."""
    from modelval.records.answer_cache import AnswerCache, AnswerStore

    store = AnswerStore(tmp_path / "cache" / "answers")
    answers = AnswerCache({"spec": "vlm.py:ask"}, "which shape?", root=store.root)
    answers.put("airplane/airplane1-bicycle2.png", "ab" * 32, "A")
    answers.flush()
    (store.root / "notes.txt").write_text("mine")
    info = store.info()
    assert info["entries"] == 1 and info["not_modelvals"] == ["notes.txt"]
    record = json.loads(answers.path.read_text())
    answers.path.write_text(json.dumps({**record, "prompt": "another prompt"}))
    again = AnswerCache({"spec": "vlm.py:ask"}, "which shape?", root=store.root)
    assert again.get("airplane/airplane1-bicycle2.png", "ab" * 32) is None
    cleared = store.clear()
    assert cleared.entries == 1 and cleared.left == ("notes.txt",)
    assert (store.root / "notes.txt").read_text() == "mine" and not answers.path.exists()


def test_cache_info_and_clear_cover_the_decode_cache(tmp_path, monkeypatch, capsys, stimulus_subset):
    """Issue 32: `cache info` showed the output cache only; the decoded stimuli (about 184 MiB for cue-conflict)
    were nowhere. A real decode of 32 stimuli fills it; info shows it, clear removes it and nothing else."""
    from modelval.cli import main
    from modelval.datasets.stimulus_set import StimulusSet

    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(tmp_path / "user-cache"))
    monkeypatch.delenv("MODELVAL_NO_CACHE", raising=False)
    subset = stimulus_subset(2)
    stimuli = StimulusSet.load(subset, allow_modified=True, progress=False)
    assert stimuli.cache_status == "miss" and len(stimuli) == 32
    folder = tmp_path / "user-cache" / "stimuli"
    (folder / "mine.txt").write_text("not modelval's")
    assert main(["cache", "info", "--json"]) == 0
    decode = json.loads(capsys.readouterr().out)["decode_cache"]
    size = sum(p.stat().st_size for p in folder.iterdir() if p.name != "mine.txt")
    assert decode["entries"] == 1 and decode["bytes"] == size > 32 * 3 * 224 * 224
    assert decode["path"] == str(folder) and decode["not_modelvals"] == ["mine.txt"]
    assert main(["cache", "info"]) == 0
    assert f"decode cache: {folder} (on): 1 decoded stimulus set(s), 4.6 MiB; `modelval cache clear` removes" in (
        capsys.readouterr().out
    )
    assert main(["cache", "clear"]) == 0
    assert f"removed 1 decoded stimulus set (4.6 MiB) from {folder}" in capsys.readouterr().out
    assert [p.name for p in folder.iterdir()] == ["mine.txt"]
    again = StimulusSet.load(subset, allow_modified=True, progress=False)
    assert again.cache_status == "miss" and bool((again.images == stimuli.images).all())
