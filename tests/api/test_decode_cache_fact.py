"""The decode cache and a run that fails (issue 32, point 7; issue 39).

Issue 32 found ``decode cache: hit`` on what felt like a first run: the stimuli were decoded (into the cache) before
the weights loaded, so a run that failed afterwards left them behind, and the bare word did not say so. Since issue
39 the pipeline decodes on first use, after the model loaded: a failed run decodes and stores nothing, and a hit
names the earlier run's entry and when it was stored.
"""

from __future__ import annotations

import pytest

import modelval
from modelval.api.loading import load_stimuli
from modelval.api.pipeline import decode_cache_entry
from modelval.cli.shape_bias import describe_decode_cache
from modelval.datasets import stimulus_set
from modelval.errors import UserCodeError


def test_a_failed_run_decodes_nothing_and_a_hit_says_which_run_stored_it(tmp_path, monkeypatch, stimulus_subset):
    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(tmp_path / "user-cache"))
    monkeypatch.delenv("MODELVAL_NO_CACHE", raising=False)
    decoded: list[int] = []
    real_decode = stimulus_set.decode_stimuli

    def counted(root, stimuli, **kwargs):
        decoded.append(len(stimuli))
        return real_decode(root, stimuli, **kwargs)

    monkeypatch.setattr(stimulus_set, "decode_stimuli", counted)
    subset = stimulus_subset(1)
    nets = tmp_path / "nets.py"
    nets.write_text('def build():\n    raise RuntimeError("the factory fell over")\n')
    with pytest.raises(UserCodeError, match="the factory fell over"):
        modelval.shape_bias(f"{nets}:build", data_root=subset, allow_modified_stimuli=True, bootstrap=0)
    assert decoded == [] and not list((tmp_path / "user-cache").rglob("*.npy"))  # nothing decoded, nothing stored
    options = modelval.EvaluationOptions(data_root=subset, allow_modified_stimuli=True, progress=False)
    first = load_stimuli(options)
    assert first.cache_status == "not decoded" and decode_cache_entry(first) is None
    assert first.images.shape[0] == 16 and first.cache_status == "miss" and decoded == [16]
    stored = list((tmp_path / "user-cache" / "stimuli").glob("*.npy"))
    assert len(stored) == 1
    assert describe_decode_cache("miss", decode_cache_entry(first)).startswith("miss (the PNGs decoded now, stored in ")
    second = load_stimuli(options)
    assert bool((second.images == first.images).all()) and second.cache_status == "hit" and decoded == [16]
    entry = decode_cache_entry(second)
    assert entry is not None and entry["path"] == str(stored[0]) and entry["stored"][:4].isdigit()
    text = describe_decode_cache(second.cache_status, entry)
    assert text.startswith(f"hit (decoded and stored {entry['stored']} by an earlier run") and str(stored[0]) in text


def test_no_entry_when_the_cache_is_off(stimulus_subset):
    # the suite runs with MODELVAL_NO_CACHE=1 (conftest.py): nothing was read or written
    options = modelval.EvaluationOptions(data_root=stimulus_subset(1), allow_modified_stimuli=True, progress=False)
    stimuli = load_stimuli(options)
    stimuli.images  # noqa: B018 (decoded on first use)
    assert stimuli.cache_status == "off" and decode_cache_entry(stimuli) is None
    assert describe_decode_cache("off", None) == "off"
