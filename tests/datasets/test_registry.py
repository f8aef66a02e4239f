"""The dataset registry: edges and filled silhouettes beside cue-conflict, their manifests and downloads."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from modelval.behaviour.categories import CATEGORIES
from modelval.cli import main
from modelval.datasets import (
    download_raw_data,
    download_stimuli,
    get_dataset,
    list_datasets,
    load_manifest,
    verify_stimuli,
)
from modelval.datasets.registry import parse_category_image_name
from modelval.datasets.stimuli import discover_stimuli, resolve_data_root
from modelval.errors import ChecksumError, DataError

SHARED = Path(__file__).resolve().parents[3] / "shared"


@pytest.fixture(scope="module", params=["edges", "filled-silhouettes"])
def shape_only_root(request, modelval_data_root: Path) -> tuple[str, Path]:
    """The real 160-image sets beside the cue-conflict folder (../shared/<folder>)."""
    root = modelval_data_root.parent / get_dataset(request.param).folder
    if not root.is_dir():
        root = SHARED / get_dataset(request.param).folder
    if not root.is_dir():
        pytest.skip(f"{request.param} stimuli not found beside {modelval_data_root}")
    return request.param, root


def test_entries_carry_their_config():
    names = [e.name for e in list_datasets()]
    assert names[:3] == ["cue-conflict", "edges", "filled-silhouettes"]
    assert len(names) == 17  # model-vs-human's 14 further sets follow (tests/datasets/test_release.py)
    edges = get_dataset("edges")
    assert (edges.images, edges.manifest, edges.file_prefix) == (160, "edges_manifest.json", "edge-experiment")
    assert edges.folder_url.endswith("/stimuli/edges") and edges.archive_url is None
    assert get_dataset("cue-conflict").has_conflicts and not edges.has_conflicts


def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(DataError, match=r"unknown dataset 'stripes'.*cue-conflict, edges, filled-silhouettes"):
        get_dataset("stripes")


def test_category_image_names():
    assert parse_category_image_name("oven10.png") == ("oven", "oven")
    for bad in ("oven.png", "zebra3.png", "oven1-bear2.png"):
        with pytest.raises(DataError, match="cannot parse image name"):
            parse_category_image_name(bad)


def test_real_sets_have_16_categories_of_10(shape_only_root):
    dataset, root = shape_only_root
    stimuli = discover_stimuli(root, dataset=dataset)
    assert len(stimuli) == 160 and all(not s.is_conflict for s in stimuli)
    assert {s.shape for s in stimuli} == set(CATEGORIES)
    assert all(sum(s.shape == c for s in stimuli) == 10 for c in CATEGORIES)
    verify_stimuli(root, dataset=dataset)  # every file against the committed manifest


def test_data_home_locates_every_set(monkeypatch, tmp_path):
    monkeypatch.setenv("MODELVAL_DATA_HOME", str(tmp_path))
    assert resolve_data_root(dataset="edges") == tmp_path / "edges"
    assert resolve_data_root(dataset="cue-conflict") == tmp_path / "cue-conflict"
    assert resolve_data_root(tmp_path / "mine", dataset="cue-conflict") == tmp_path / "mine"  # a data root given wins


def test_download_through_the_mirror_is_verified_and_atomic(shape_only_root, tmp_path, local_server, monkeypatch):
    dataset, root = shape_only_root
    folder = get_dataset(dataset).folder
    for path in sorted(root.rglob("*.png")):
        local_server.add(f"/{folder}/{path.relative_to(root).as_posix()}", path.read_bytes())
    monkeypatch.setenv("MODELVAL_MIRROR", local_server.url)
    destination = download_stimuli(tmp_path / folder, dataset=dataset, progress=False)
    verify_stimuli(destination, dataset=dataset)
    assert len(local_server.requests) == 160

    # One tampered file: nothing is left behind, and the error names the file.
    first = sorted(load_manifest(dataset=dataset))[0]
    local_server.add(f"/{folder}/{first}", b"not a png")
    with pytest.raises(ChecksumError, match=first.split("/")[-1]):
        download_stimuli(tmp_path / "again", dataset=dataset, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder]


def test_raw_data_download_through_the_mirror(modelval_reference_dir, tmp_path, local_server, monkeypatch):
    import json

    from modelval.paths import package_data

    files = json.loads(package_data("raw_data_manifest.json").read_text())["files"]
    for name, spec in files.items():
        local_server.add("/" + spec["path"], (modelval_reference_dir / name).read_bytes())
    monkeypatch.setenv("MODELVAL_MIRROR", local_server.url)
    destination = download_raw_data(tmp_path / "raw-data", progress=False)
    assert sorted(p.name for p in destination.iterdir()) == sorted(files)
    assert len(files) == 34  # 3 experiments x (10 humans + VGG) + ResNet-50 on cue-conflict
    # A second call verifies what is there instead of downloading again.
    before = dict(local_server.requests)
    download_raw_data(destination, progress=False)
    assert local_server.requests == before
    (destination / "edge-experiment_vgg_session_1.csv").write_text("tampered")
    with pytest.raises(ChecksumError):
        download_raw_data(destination, progress=False)


def test_download_data_cli_for_a_dataset(shape_only_root, tmp_path, local_server, monkeypatch, capsys):
    dataset, root = shape_only_root
    folder = get_dataset(dataset).folder
    for path in sorted(root.rglob("*.png")):
        local_server.add(f"/{folder}/{path.relative_to(root).as_posix()}", path.read_bytes())
    monkeypatch.setenv("MODELVAL_MIRROR", local_server.url)
    assert main(["data", "download", "--dataset", dataset, "--data-root", str(tmp_path / folder)]) == 0
    assert f"{dataset} stimuli ready and verified" in capsys.readouterr().out
    assert main(["data", "verify", "--dataset", dataset, "--data-root", str(tmp_path / folder)]) == 0


def test_a_missing_set_says_how_to_get_it(tmp_path):
    with pytest.raises(DataError, match=r"edges folder not found.*data download --dataset edges"):
        discover_stimuli(tmp_path / "nowhere", dataset="edges")


def test_archive_source_only_where_an_archive_exists(tmp_path):
    with pytest.raises(DataError, match="no release archive"):
        download_stimuli(tmp_path / "edges", dataset="edges", source="model-vs-human", progress=False)
    assert not (tmp_path / "edges").exists()
    shutil.rmtree(tmp_path, ignore_errors=True)
