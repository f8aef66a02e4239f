"""The decode cache: a hit, a miss and an invalidated or corrupt entry all give the same uint8 pixels."""

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from modelval.behaviour.categories import CATEGORIES
from modelval.datasets.cache import StimulusCacheWarning, cache_key, load_or_decode
from modelval.datasets.stimuli import decode_stimuli, discover_stimuli
from modelval.datasets.stimulus_set import StimulusSet
from modelval.evaluation import category_probabilities


@pytest.fixture(autouse=True)
def _cache_allowed(monkeypatch):
    # conftest disables the cache for the whole suite; these tests use a tmp cache_dir instead.
    monkeypatch.delenv("MODELVAL_NO_CACHE", raising=False)


@pytest.fixture
def small_root(modelval_data_root: Path, tmp_path: Path) -> Path:
    """Two stimuli per category (32 files), copied so tests may touch them."""
    root = tmp_path / "stimuli"
    for category in CATEGORIES:
        (root / category).mkdir(parents=True)
        for path in sorted((modelval_data_root / category).iterdir())[:2]:
            shutil.copy2(path, root / category / path.name)
    return root


def load(root: Path, cache_dir: Path, **kwargs) -> StimulusSet:
    return StimulusSet.load(root, progress=False, expected_count=None, cache_dir=cache_dir, **kwargs)


def decoded(root: Path) -> torch.Tensor:
    return decode_stimuli(root, discover_stimuli(root, expected_count=None), progress=False)


def test_miss_then_hit_gives_identical_pixels(small_root, tmp_path):
    cache_dir = tmp_path / "cache"
    first = load(small_root, cache_dir)
    second = load(small_root, cache_dir)
    assert (first.cache_status, second.cache_status) == ("miss", "hit")
    assert torch.equal(first.images, decoded(small_root))
    assert torch.equal(second.images, first.images) and second.images.dtype == torch.uint8
    assert len(list(cache_dir.glob("*.npy"))) == 1 and not list(cache_dir.glob("*.tmp"))


def test_opt_out_by_flag_and_environment(small_root, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    assert load(small_root, cache_dir, cache=False).cache_status == "off"
    monkeypatch.setenv("MODELVAL_NO_CACHE", "1")
    assert load(small_root, cache_dir).cache_status == "off"
    assert not cache_dir.exists()


def test_manifest_change_invalidates(small_root, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    before = load(small_root, cache_dir)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"files": {"x/y.png": "0" * 64}}))
    monkeypatch.setattr("modelval.datasets.cache.manifest_path", lambda: manifest)
    after = load(small_root, cache_dir)
    assert after.cache_status == "miss"
    assert torch.equal(after.images, before.images)


def test_changed_file_invalidates_and_gives_the_new_pixels(small_root, tmp_path):
    cache_dir = tmp_path / "cache"
    stimuli = discover_stimuli(small_root, expected_count=None)
    old_key = cache_key(small_root, stimuli)
    load(small_root, cache_dir)
    # Overwrite one stimulus with another image's bytes: size and mtime change, so must the key.
    target, source = small_root / stimuli[0].relpath, small_root / stimuli[5].relpath
    shutil.copyfile(source, target)
    os.utime(target, ns=(1, 1))
    assert cache_key(small_root, stimuli) != old_key
    after = load(small_root, cache_dir)
    assert after.cache_status == "miss"
    assert torch.equal(after.images, decoded(small_root))
    assert torch.equal(after.images[0], after.images[5])


@pytest.mark.parametrize("damage", ["truncate", "flip_pixel", "garbage", "bad_sidecar", "list_sidecar"])
def test_corrupt_entry_is_rebuilt_with_a_warning(small_root, tmp_path, damage):
    cache_dir = tmp_path / "cache"
    good = load(small_root, cache_dir).images.clone()
    data = next(cache_dir.glob("*.npy"))
    raw = bytearray(data.read_bytes())
    if damage == "truncate":
        data.write_bytes(raw[: len(raw) // 2])
    elif damage == "flip_pixel":  # a valid .npy with one wrong pixel: only the checksum can tell
        raw[-1000] ^= 0xFF
        data.write_bytes(raw)
    elif damage == "garbage":
        data.write_bytes(b"not a numpy file")
    elif damage == "list_sidecar":  # valid JSON of the wrong type: crashed every later run until deleted
        data.with_suffix(".json").write_text("[]")
    else:
        data.with_suffix(".json").write_text("{")
    with pytest.warns(StimulusCacheWarning, match="unreadable"):
        rebuilt = load(small_root, cache_dir)
    assert rebuilt.cache_status == "rebuilt"
    assert torch.equal(rebuilt.images, good)
    assert load(small_root, cache_dir).cache_status == "hit"


def test_unwritable_cache_still_returns_pixels(small_root, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    with pytest.warns(StimulusCacheWarning, match="could not write"):
        result = load(small_root, blocker / "cache")
    assert torch.equal(result.images, decoded(small_root))


@pytest.mark.slow
def test_cache_hit_gives_the_same_decisions(small_root, tmp_path, bundled_model):
    cache_dir = tmp_path / "cache"
    config = bundled_model.entry.preprocess.for_stimuli(None)
    runs = [load(small_root, cache_dir, cache=use) for use in (False, True, True)]
    assert [r.cache_status for r in runs] == ["off", "miss", "hit"]
    probs = [category_probabilities(bundled_model.model, r.images, config, device="cpu", progress=False) for r in runs]
    assert all(np.array_equal(probs[0], p) for p in probs[1:])


@pytest.mark.slow
def test_full_set_cache_stays_under_300_mb(modelval_stimulus_set, tmp_path):
    _, status = load_or_decode(
        modelval_stimulus_set.root,
        modelval_stimulus_set.stimuli,
        lambda: modelval_stimulus_set.images,
        cache_dir=tmp_path,
    )
    assert status == "miss"
    size = next(tmp_path.glob("*.npy")).stat().st_size
    assert size < 300e6, size
    hit, status = load_or_decode(
        modelval_stimulus_set.root, modelval_stimulus_set.stimuli, lambda: None, cache_dir=tmp_path
    )
    assert status == "hit" and torch.equal(hit, modelval_stimulus_set.images)


def test_a_killed_cache_write_leaves_no_temporary_file_behind(small_root, tmp_path):
    """SIGKILL in np.save leaves ``.<key>.npy.<random>.tmp`` (184 MB for the full set); the next write removes it."""
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    key = cache_key(small_root, discover_stimuli(small_root, expected_count=None))
    killed = cache_dir / f".{key}.npy.k1ll3d.tmp"
    killed.write_bytes(b"half an array")
    other = cache_dir / ".0123abcd.npy.old.tmp"  # another entry's, from a kill two days ago
    other.write_bytes(b"x")
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(other, (two_days_ago, two_days_ago))
    assert load(small_root, cache_dir).cache_status == "miss"
    entry = [f"{key}.json", f"{key}.npy", f"{key}.npy.lock"]
    assert sorted(p.name for p in cache_dir.iterdir()) == sorted([*entry, "CACHEDIR.TAG"])
