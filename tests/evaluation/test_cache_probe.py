"""The output cache cannot serve one model's outputs to another, nor damaged rows, nor rows of another width.

Issue 31: two factories that differ only in a plain attribute, or a wrapper whose normalization is a plain
tensor, got the first one's stored outputs ("output_cache": "hit", a shape bias of 0.50 printed for a true
0.2857); altered or NaN partial rows became decisions; a partial chunk of another width made every later run
exit 3. The key now covers the module state outside the state dict, and every stored row is used only after
the model, run on the probe stimuli, answers as it did when they were written.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelval.cli import main
from modelval.datasets.stimulus_set import StimulusSet
from modelval.evaluation import evaluate, output_key
from modelval.evaluation.stored import probe_indices, same_outputs
from modelval.preprocessing import PreprocessConfig
from modelval.records.output_cache import OutputCache

CONFIG = PreprocessConfig(mean=(0.5,) * 3, std=(0.5,) * 3, interpolation="bicubic")

FACTORIES = """
import torch

class Wrapper(torch.nn.Module):
    def __init__(self, mean=(0.5, 0.5, 0.5), temperature=1.0, use_head=True):
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(48, 1000))
        self.mean = torch.tensor(mean).view(1, 3, 1, 1)   # a plain tensor, as so many wrappers keep it
        self.temperature = temperature                    # a plain attribute
        self.use_head = use_head                          # a class switch

    def forward(self, x):
        logits = self.body(x - self.mean) / self.temperature
        return logits if self.use_head else -logits

def plain():
    return Wrapper()

def switched():
    return Wrapper(use_head=False)

def shifted():
    return Wrapper(mean=(0.9, 0.1, 0.5))
"""


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(48, 1000))
        self.register_buffer("shift", torch.zeros(1000))
        self.register_buffer("gain", torch.ones(1), persistent=False)
        self.mean = torch.full((1, 3, 1, 1), 0.5)
        self.temperature = 1.0
        self._private_scale = 1.0  # private: not in the key, only the probe sees it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.body(x - self.mean) * self.gain / self.temperature * self._private_scale
        return logits + self.shift


@pytest.fixture(scope="module")
def few(modelval_stimulus_set) -> StimulusSet:
    stimuli = modelval_stimulus_set
    return dataclasses.replace(stimuli, stimuli=stimuli.stimuli[:24], images=stimuli.images[:24])


def _run(argv: list[str], capsys) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_two_factories_differing_only_outside_the_state_dict_get_their_own_outputs(
    tmp_path, stimulus_subset, monkeypatch, capsys
):
    """The issue's case, through the command line: each factory gets a miss and its own true numbers."""
    (tmp_path / "factories.py").write_text(FACTORIES)
    data = stimulus_subset(2)
    common = ["--data-root", str(data), "--allow-modified-stimuli", "--bootstrap", "0", "--no-sanity-gate",
              "--json", "--device", "cpu", "--mean", "0,0,0", "--std", "1,1,1"]  # fmt: skip
    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MODELVAL_NO_CACHE", raising=False)
    truth = {}
    for name in ("plain", "switched", "shifted"):
        spec = f"{tmp_path / 'factories.py'}:{name}"
        truth[name] = _run(["shape-bias", "--model", spec, *common, "--no-cache"], capsys)
    cached = {}
    for name in ("plain", "switched", "shifted"):
        cached[name] = _run(["shape-bias", "--model", f"{tmp_path / 'factories.py'}:{name}", *common], capsys)
        assert cached[name]["output_cache"] == "miss", name
    fields = ("shape_bias", "shape_hits", "texture_hits", "other")
    for name in truth:
        assert [cached[name][f] for f in fields] == [truth[name][f] for f in fields], name
    assert len({truth[name]["shape_bias"] for name in truth}) > 1  # the three really differ
    again = _run(["shape-bias", "--model", f"{tmp_path / 'factories.py'}:switched", *common], capsys)
    assert again["output_cache"] == "hit" and again["shape_bias"] == truth["switched"]["shape_bias"]


def test_state_no_digest_sees_is_caught_by_the_probe(few, tmp_path):
    """A private attribute is outside the key on purpose; the probe's answers differ, so the entry is replaced."""
    cache = OutputCache(tmp_path)
    first = evaluate(Net(), CONFIG, few, progress=False, n_bootstrap=0, output_cache=cache, device="cpu")
    other = Net()
    other._private_scale = -1.0
    assert output_key(other, CONFIG, few, device="cpu")[0] == output_key(Net(), CONFIG, few, device="cpu")[0]
    served = evaluate(other, CONFIG, few, progress=False, n_bootstrap=0, output_cache=cache, device="cpu")
    truth = evaluate(other, CONFIG, few, progress=False, n_bootstrap=0, device="cpu")
    assert served.output_cache.startswith("miss (a stored entry under this key answered otherwise")
    assert np.array_equal(served.outputs, truth.outputs) and not np.array_equal(served.outputs, first.outputs)
    assert evaluate(other, CONFIG, few, progress=False, n_bootstrap=0, output_cache=cache).output_cache == "hit"


#: What can change a model's outputs, each drawn at random by the property test below.
def _change(net: Net, what: str, amount: float) -> tuple[Net, PreprocessConfig, slice]:
    config, rows = CONFIG, slice(0, 24)
    with torch.no_grad():
        if what == "weight":
            net.body[2].weight[int(amount * 1000) % 1000, 0] += amount
        elif what == "buffer":
            net.shift[int(amount * 1000) % 1000] += amount
        elif what == "non-persistent buffer":
            net.gain.fill_(1 + amount)
        elif what == "plain tensor":
            net.mean[0, int(amount * 3) % 3] += amount
        elif what == "plain attribute":
            net.temperature = 1 + amount
        elif what == "private attribute":
            net._private_scale = 1 + amount
        elif what == "preprocessing":
            config = dataclasses.replace(CONFIG, mean=(0.5 - amount / 4, 0.5, 0.5))
        elif what == "stimuli":
            rows = slice(0, 12 + int(amount * 11))
    return net, config, rows


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    what=st.sampled_from([
        "weight", "buffer", "non-persistent buffer", "plain tensor", "plain attribute", "private attribute",
        "preprocessing", "stimuli",
    ]),
    amount=st.floats(min_value=0.05, max_value=0.95),
)
def test_no_change_that_moves_the_outputs_is_ever_served_stored_outputs(what, amount, few, tmp_path_factory):
    """Property: after the unchanged model filled the cache, a model changed in any field either misses, or its
    hit equals a fresh run of the changed model (within the probe's tolerance)."""
    cache = OutputCache(tmp_path_factory.mktemp("cache"))
    evaluate(Net(), CONFIG, few, progress=False, n_bootstrap=0, output_cache=cache, device="cpu")
    net, config, rows = _change(Net(), what, amount)
    stimuli = dataclasses.replace(few, stimuli=few.stimuli[rows], images=few.images[rows])
    served = evaluate(net, config, stimuli, progress=False, n_bootstrap=0, output_cache=cache, device="cpu")
    truth = evaluate(net, config, stimuli, progress=False, n_bootstrap=0, device="cpu")
    assert served.output_cache.startswith("miss"), (what, served.output_cache)
    assert np.array_equal(served.outputs, truth.outputs)
    again = evaluate(net, config, stimuli, progress=False, n_bootstrap=0, output_cache=cache, device="cpu")
    assert again.output_cache == "hit" and same_outputs(again.outputs, truth.outputs)


# --- stored rows are verified before use ------------------------------------------------------------------


def _interrupted(few: StimulusSet, cache: OutputCache) -> str:
    """Fill the cache with a whole run, then turn its entry back into an interrupted run's partial rows."""
    net = Net()
    evaluate(net, CONFIG, few, progress=False, n_bootstrap=0, output_cache=cache, device="cpu", batch_size=8)
    key = output_key(net, CONFIG, few, device="cpu")[0]
    assert key is not None
    stored = cache.load(key)
    assert stored is not None
    cache.discard(key)
    cache.start_rows(key, stored.probe)
    for start in (0, 8):
        cache.save_rows(key, start, stored.outputs[start : start + 8])
    return key


def _partial(cache: OutputCache, key: str) -> list:
    return sorted(p for p in (cache.entry_dir(key) / "partial").glob("0*.npy"))


def test_intact_partial_rows_are_resumed(few, tmp_path):
    cache = OutputCache(tmp_path)
    _interrupted(few, cache)
    resumed = evaluate(Net(), CONFIG, few, progress=False, n_bootstrap=0, output_cache=cache, device="cpu")
    assert resumed.output_cache == "resumed: 16 of 24 rows reused"


@pytest.mark.parametrize("damage", ["nan", "altered", "other width", "not a chunk"])
def test_damaged_partial_rows_are_discarded_and_rebuilt_never_scored(damage, few, tmp_path):
    cache = OutputCache(tmp_path)
    key = _interrupted(few, cache)
    chunk = _partial(cache, key)[1]
    rows = np.load(chunk)
    if damage == "nan":
        rows[3, :] = np.nan
        np.save(chunk, rows)
    elif damage == "altered":
        rows[3, :] = rows[3, ::-1]  # another answer, finite, the same shape
        np.save(chunk, rows)
    elif damage == "other width":
        chunk.unlink()
        np.save(chunk, np.zeros((8, 10), dtype=np.float32))
    else:
        np.save(chunk.with_name("stray.npy"), rows)
    truth = evaluate(Net(), CONFIG, few, progress=False, n_bootstrap=0, device="cpu")
    rebuilt = evaluate(Net(), CONFIG, few, progress=False, n_bootstrap=0, output_cache=cache, device="cpu")
    assert rebuilt.output_cache == "miss"
    assert np.array_equal(rebuilt.outputs, truth.outputs)
    again = evaluate(Net(), CONFIG, few, progress=False, n_bootstrap=0, output_cache=cache, device="cpu")
    assert again.output_cache == "hit"  # nothing blocks the runs after it


def test_partial_rows_of_another_model_under_the_same_key_are_discarded(few, tmp_path):
    cache = OutputCache(tmp_path)
    key = _interrupted(few, cache)
    other = Net()
    other._private_scale = 3.0  # the same key, other answers
    assert output_key(other, CONFIG, few, device="cpu")[0] == key
    rebuilt = evaluate(other, CONFIG, few, progress=False, n_bootstrap=0, output_cache=cache, device="cpu")
    truth = evaluate(other, CONFIG, few, progress=False, n_bootstrap=0, device="cpu")
    assert rebuilt.output_cache.startswith("miss (an interrupted run's rows under this key answered otherwise")
    assert np.array_equal(rebuilt.outputs, truth.outputs)


@pytest.mark.parametrize("damage", ["nan", "probe", "rows", "meta shape"])
def test_a_stored_entry_that_fails_a_check_is_a_miss(damage, few, tmp_path):
    """Complete entries: NaN rows with a matching digest, a damaged probe, another row count, a lying record."""
    from modelval.records.store import array_digest as _array_digest

    cache = OutputCache(tmp_path)
    net = Net()
    evaluate(net, CONFIG, few, progress=False, n_bootstrap=0, output_cache=cache, device="cpu")
    key = output_key(net, CONFIG, few, device="cpu")[0]
    folder = cache.entry_dir(str(key))
    meta = json.loads((folder / "meta.json").read_text())
    outputs = np.load(folder / "outputs.npy")
    if damage == "nan":
        outputs[5] = np.nan
        np.save(folder / "outputs.npy", outputs)
        meta["sha256"] = _array_digest(outputs)  # consistent, and still refused: a NaN is no stored answer
    elif damage == "probe":
        np.save(folder / "probe.npy", np.zeros((len(probe_indices(24)), 1000), dtype=np.float32))
    elif damage == "rows":
        np.save(folder / "outputs.npy", outputs[:20])
        meta["sha256"], meta["shape"] = _array_digest(outputs[:20]), [20, 1000]
    else:
        meta["shape"] = [24, 999]
    (folder / "meta.json").write_text(json.dumps(meta))
    assert cache.load(str(key), rows=24) is None and not folder.exists()
    result = evaluate(net, CONFIG, few, progress=False, n_bootstrap=0, output_cache=cache, device="cpu")
    assert result.output_cache == "miss"
