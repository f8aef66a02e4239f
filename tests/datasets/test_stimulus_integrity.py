"""No silent wrong result from the stimuli on disk: the decode cache is keyed by content, and an
evaluation of the official set verifies every name and SHA-256 against the committed manifest."""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from pathlib import Path

import pytest
import torch

from modelval.cli import main
from modelval.datasets.stimuli import decode_stimuli, discover_stimuli
from modelval.datasets.stimulus_set import StimulusSet
from modelval.errors import DataError


def png_padded_to(source: Path, size: int, target: Path) -> None:
    """``source`` re-written with a tEXt chunk so the file has exactly ``size`` bytes (same pixels)."""
    data = source.read_bytes()
    end = data.rindex(b"IEND") - 4  # the IEND chunk starts with its 4-byte length
    padding = size - len(data) - 12 - len(b"pad\0")
    assert padding >= 0, "the source must be smaller than the target size"
    body = b"tEXt" + b"pad\0" + b"x" * padding
    chunk = struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body))
    target.write_bytes(data[:end] + chunk + data[end:])


def small_tree(modelval_data_root: Path, tmp_path: Path) -> Path:
    root = tmp_path / "cue-conflict"
    for stimulus in discover_stimuli(modelval_data_root)[:6]:
        (root / stimulus.relpath).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(modelval_data_root / stimulus.relpath, root / stimulus.relpath)
    return root


def test_same_size_same_mtime_replacement_misses_the_cache(modelval_data_root, tmp_path, monkeypatch):
    monkeypatch.delenv("MODELVAL_NO_CACHE")  # the suite turns the cache off; this test owns one
    root = small_tree(modelval_data_root, tmp_path)
    cache = tmp_path / "cache"
    first = StimulusSet.load(root, progress=False, expected_count=None, cache_dir=cache)
    assert first.cache_status == "miss"
    files = sorted(root.rglob("*.png"), key=lambda p: p.stat().st_size)
    small, large = files[0], files[-1]
    stat = large.stat()
    replacement = tmp_path / "replacement.png"
    png_padded_to(small, stat.st_size, replacement)
    os.replace(replacement, large)
    os.utime(large, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # `touch -r`: the old key could not tell
    assert large.stat().st_size == stat.st_size and large.stat().st_mtime_ns == stat.st_mtime_ns

    second = StimulusSet.load(root, progress=False, expected_count=None, cache_dir=cache)
    assert second.cache_status == "miss"
    fresh = decode_stimuli(root, second.stimuli, progress=False)
    assert torch.equal(second.images, fresh) and not torch.equal(second.images, first.images)


def _linked_copy(modelval_data_root: Path, tmp_path: Path) -> Path:
    """The official set as symbolic links (fast), which a test then modifies."""
    root = tmp_path / "linked"
    for stimulus in discover_stimuli(modelval_data_root):
        (root / stimulus.relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / stimulus.relpath).symlink_to(modelval_data_root / stimulus.relpath)
    return root


@pytest.mark.slow
def test_renamed_stimulus_is_refused_with_its_names(modelval_data_root, tmp_path):
    root = _linked_copy(modelval_data_root, tmp_path)
    source = root / "oven" / "oven2-bicycle1.png"
    assert source.is_symlink() and not (root / "oven" / "oven2-clock9.png").exists()
    source.rename(root / "oven" / "oven2-clock9.png")  # still 1280 valid names
    with pytest.raises(DataError, match=r"oven/oven2-clock9.png is not in the manifest.*oven2-bicycle1.png is missing"):
        StimulusSet.load(root, progress=False, cache=False)
    allowed = StimulusSet.load(root, progress=False, cache=False, allow_modified=True)
    assert allowed.verification.startswith("modified: 2 files differ from the manifest")


@pytest.mark.slow
def test_replaced_stimulus_is_refused(modelval_data_root, tmp_path):
    root = _linked_copy(modelval_data_root, tmp_path)
    target = root / "bear" / sorted(os.listdir(root / "bear"))[0]
    other = modelval_data_root / "cat" / sorted(os.listdir(modelval_data_root / "cat"))[0]
    target.unlink()
    shutil.copy(other, target)
    with pytest.raises(DataError, match="differs from the manifest"):
        StimulusSet.load(root, progress=False, cache=False)
    allowed = StimulusSet.load(root, progress=False, cache=False, allow_modified=True)
    assert allowed.verification.startswith("modified: 1 file differs from the manifest")


def test_the_official_set_is_verified(modelval_stimulus_set):
    assert modelval_stimulus_set.verification == "verified"


def test_cli_refuses_a_modified_set_in_one_line(modelval_data_root, tmp_path, capsys):
    root = _linked_copy(modelval_data_root, tmp_path)
    (root / "oven" / "oven2-bicycle1.png").rename(root / "oven" / "oven2-clock9.png")
    code = main(["shape-bias", "--model", "efficientnet_lite0", "--data-root", str(root), "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "oven2-clock9.png" in err and "--allow-modified-stimuli" in err


def test_a_folder_in_place_of_an_image_is_one_line(modelval_data_root, tmp_path, capsys):
    root = small_tree(modelval_data_root, tmp_path)
    image = sorted(root.rglob("*.png"))[0]
    image.unlink()
    image.mkdir()
    with pytest.raises(DataError, match="a folder stands where an image file should be"):
        StimulusSet.load(root, progress=False, expected_count=None, cache=False)
