"""``decode cache: hit`` on what feels like a first run says which earlier run stored the entry (issue 32, point 7).

The cause, reproduced: the stimuli are loaded (and decoded into the cache) before the weights, so a run that
fails afterwards (weights not available offline, a factory that raises) leaves the decoded stimuli behind, and
the next run, the first to evaluate anything, reads them: a real hit that the bare word did not explain.
"""

from __future__ import annotations

import pytest

import modelval
from modelval.api.loading import load_stimuli
from modelval.api.pipeline import decode_cache_entry
from modelval.cli.shape_bias import describe_decode_cache
from modelval.errors import UserCodeError


def test_a_failed_run_fills_the_decode_cache_and_the_next_run_says_so(tmp_path, monkeypatch, stimulus_subset):
    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(tmp_path / "user-cache"))
    monkeypatch.delenv("MODELVAL_NO_CACHE", raising=False)
    subset = stimulus_subset(1)
    nets = tmp_path / "nets.py"
    nets.write_text('def build():\n    raise RuntimeError("the factory fell over")\n')
    with pytest.raises(UserCodeError):  # fails after the stimuli were loaded and decoded
        modelval.shape_bias(f"{nets}:build", data_root=subset, allow_modified_stimuli=True, bootstrap=0)
    stored = list((tmp_path / "user-cache" / "stimuli").glob("*.npy"))
    assert len(stored) == 1  # the failed run stored the decoded stimuli
    options = modelval.EvaluationOptions(data_root=subset, allow_modified_stimuli=True, progress=False)
    stimuli = load_stimuli(options)
    assert stimuli.cache_status == "hit"
    entry = decode_cache_entry(stimuli)
    assert entry is not None and entry["path"] == str(stored[0]) and entry["stored"][:4].isdigit()
    text = describe_decode_cache(stimuli.cache_status, entry)
    assert text.startswith(f"hit (decoded and stored {entry['stored']} by an earlier run") and str(stored[0]) in text
    assert describe_decode_cache("miss", entry).startswith("miss (the PNGs decoded now, stored in ")


def test_no_entry_when_the_cache_is_off(stimulus_subset):
    # the suite runs with MODELVAL_NO_CACHE=1 (conftest.py): nothing was read or written
    options = modelval.EvaluationOptions(data_root=stimulus_subset(1), allow_modified_stimuli=True, progress=False)
    stimuli = load_stimuli(options)
    assert stimuli.cache_status == "off" and decode_cache_entry(stimuli) is None
    assert describe_decode_cache("off", None) == "off"
