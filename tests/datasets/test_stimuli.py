"""Stimulus discovery, validation, checksums, decoding and download, on the real 1280 stimuli."""

import io
import shutil
import tarfile

import pytest
import torch

from modelval.datasets import (
    EXPECTED_CONFLICTS,
    EXPECTED_IMAGES,
    decode_stimuli,
    discover_stimuli,
    download_stimuli,
    load_image,
    load_manifest,
    parse_stimulus_name,
    resolve_data_root,
    summarize,
    verify_stimuli,
)
from modelval.download import sha256_of
from modelval.errors import ChecksumError, DataError


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("airplane1-bicycle2.png", ("airplane", "bicycle")),
        ("0001_s5n_dnn_0_airplane_00_airplane1-bicycle2.png", ("airplane", "bicycle")),
        ("knife10-elephant1.png", ("knife", "elephant")),
        ("cat/cat3-cat3.png", ("cat", "cat")),
    ],
)
def test_parse_both_published_name_styles(name, expected):
    assert parse_stimulus_name(name) == expected


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("airplane.png", "cannot parse"),
        ("zebra1-cat2.png", "unknown shape category 'zebra'"),
        ("cat1-dog.jpg", "parse"),
    ],
)
def test_unparseable_names_are_clear_errors(name, message):
    with pytest.raises(DataError, match=message):
        parse_stimulus_name(name)


def test_real_stimuli_counts(modelval_data_root):
    stimuli = discover_stimuli(modelval_data_root)
    assert summarize(stimuli) == {"images": EXPECTED_IMAGES, "conflicts": EXPECTED_CONFLICTS, "no_conflict": 80}
    assert {s.shape for s in stimuli} == {s.texture for s in stimuli}
    assert len(stimuli) == len({s.relpath for s in stimuli})
    assert stimuli == sorted(stimuli)


def test_real_stimuli_match_committed_manifest(modelval_data_root):
    manifest = load_manifest()
    assert len(manifest) == EXPECTED_IMAGES
    verify_stimuli(modelval_data_root, manifest)


def _small_tree(modelval_data_root, tmp_path, count=3):
    """A copy of ``count`` real stimuli per first two categories, with its own manifest."""
    root = tmp_path / "cue-conflict"
    manifest = {}
    for stimulus in discover_stimuli(modelval_data_root)[: count * 2 : 2]:
        target = root / stimulus.relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(modelval_data_root / stimulus.relpath, target)
        manifest[stimulus.relpath] = sha256_of(target)
    return root, manifest


def test_missing_folder_says_how_to_get_the_data(tmp_path):
    with pytest.raises(DataError, match=r"not found.*MODELVAL_DATA_HOME=DIR.*data_home = .*modelval data download"):
        discover_stimuli(tmp_path / "nowhere")


def test_unknown_category_folder_is_named(modelval_data_root, tmp_path):
    root, _ = _small_tree(modelval_data_root, tmp_path)
    (root / "zebra").mkdir()
    with pytest.raises(DataError, match=r"zebra.*unknown category folder"):
        discover_stimuli(root, expected_count=None)


def test_file_in_the_wrong_folder_is_named(modelval_data_root, tmp_path):
    root, _ = _small_tree(modelval_data_root, tmp_path)
    (root / "bear").mkdir()
    shutil.copy(next((root / "airplane").iterdir()), root / "bear")
    with pytest.raises(DataError, match=r"bear/airplane.*disagrees with its folder"):
        discover_stimuli(root, expected_count=None)


def test_wrong_count_is_an_error(modelval_data_root, tmp_path):
    root, _ = _small_tree(modelval_data_root, tmp_path)
    with pytest.raises(DataError, match=r"found 3 stimuli, expected 1280"):
        discover_stimuli(root)


def test_checksum_mismatch_names_the_file(modelval_data_root, tmp_path):
    root, manifest = _small_tree(modelval_data_root, tmp_path)
    victim = sorted(manifest)[1]
    data = bytearray((root / victim).read_bytes())
    data[100] ^= 0xFF
    (root / victim).write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match=victim):
        verify_stimuli(root, manifest)


def test_missing_and_extra_files_against_manifest(modelval_data_root, tmp_path):
    root, manifest = _small_tree(modelval_data_root, tmp_path)
    with pytest.raises(DataError, match="1 missing"):
        verify_stimuli(root, {**manifest, "cat/cat1-dog2.png": "0" * 64})


def test_truncated_and_non_image_files_name_the_file(modelval_data_root, tmp_path):
    source = next(modelval_data_root.glob("airplane/*.png"))
    truncated = tmp_path / "truncated.png"
    truncated.write_bytes(source.read_bytes()[:2000])
    with pytest.raises(DataError, match=r"truncated\.png.*truncated or not an image"):
        load_image(truncated)
    text = tmp_path / "notes.png"
    text.write_text("not a png")
    with pytest.raises(DataError, match=r"notes\.png"):
        load_image(text)
    with pytest.raises(DataError, match="not found"):
        load_image(tmp_path / "absent.png")


def test_decoding_is_independent_of_workers(modelval_data_root):
    stimuli = discover_stimuli(modelval_data_root)[::40]
    single = decode_stimuli(modelval_data_root, stimuli, workers=0, progress=False)
    parallel = decode_stimuli(modelval_data_root, stimuli, workers=2, progress=False)
    assert single.dtype == torch.uint8 and single.shape == (len(stimuli), 3, 224, 224)
    assert torch.equal(single, parallel)


def test_data_root_resolution_order(tmp_path, monkeypatch):
    monkeypatch.setenv("MODELVAL_DATA_HOME", str(tmp_path / "home"))
    assert resolve_data_root(tmp_path / "cli") == tmp_path / "cli"
    assert resolve_data_root(None) == tmp_path / "home" / "cue-conflict"
    for name in ("MODELVAL_DATA_HOME", "MODELVAL_CACHE_DIR"):  # the test session's (conftest.py)
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert resolve_data_root(None) == tmp_path / "cache" / "modelval" / "cue-conflict"


def _tar_gz(root, arcname="cue-conflict") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        tar.add(root, arcname=arcname)
    return buffer.getvalue()


@pytest.mark.slow
def test_download_real_archive_from_local_server(modelval_data_root, local_server, tmp_path):
    """The model-vs-human archive layout, built from the real stimuli, verified against the manifest."""
    url = local_server.add("/v0.1/cue-conflict.tar.gz", _tar_gz(modelval_data_root))
    destination = tmp_path / "cache" / "cue-conflict"
    assert download_stimuli(destination, url=url, progress=False) == destination
    verify_stimuli(destination)
    assert len(discover_stimuli(destination)) == EXPECTED_IMAGES
    assert sorted(p.name for p in destination.parent.iterdir()) == ["cue-conflict"]  # no staging left


def test_download_file_by_file_texture_vs_shape_layout(modelval_data_root, local_server, tmp_path):
    root, manifest = _small_tree(modelval_data_root, tmp_path)
    for relpath in manifest:
        local_server.add(f"/stimuli/{relpath}", (root / relpath).read_bytes())
    destination = tmp_path / "out" / "cue-conflict"
    download_stimuli(
        destination, source="texture-vs-shape", url=local_server.url + "/stimuli", manifest=manifest, progress=False
    )
    verify_stimuli(destination, manifest)


def test_corrupt_archive_member_leaves_nothing_behind(modelval_data_root, local_server, tmp_path):
    root, manifest = _small_tree(modelval_data_root, tmp_path)
    victim = root / sorted(manifest)[0]
    victim.write_bytes(victim.read_bytes()[:-10])
    url = local_server.add("/cue-conflict.tar.gz", _tar_gz(root))
    out = tmp_path / "out"
    with pytest.raises(ChecksumError, match="does not match the manifest"):
        download_stimuli(out / "cue-conflict", url=url, manifest=manifest, progress=False)
    assert list(out.iterdir()) == []


def test_not_an_archive_is_a_clear_error(local_server, tmp_path):
    url = local_server.add("/cue-conflict.tar.gz", b"<html>rate limited</html>")
    with pytest.raises(DataError, match="not a readable tar archive"):
        download_stimuli(tmp_path / "cue-conflict", url=url, manifest={}, progress=False)
    assert list(tmp_path.iterdir()) == []
