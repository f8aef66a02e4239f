"""A model on one of model-vs-human's further sets, end to end: fetch, evaluate, write decisions, read them back.

The sketch archive is built in the release layout from real cue-conflict images (50 per category, each under
a sketch image's release name and category; the real sketches are not redistributed), served from
127.0.0.1, fetched with ``download-data`` and evaluated with the bundled EfficientNet-Lite0. Its decision
file must read back in ``humans`` and ``benchmark``, and ``benchmark --model`` must give the same numbers.
"""

from __future__ import annotations

import csv
import json

import pytest

from modelval.behaviour.categories import CATEGORIES
from modelval.cli import main
from release_archives import build_release_archive, release_names


@pytest.fixture
def sketch_from_real_images(tmp_path, monkeypatch, local_server, model_vs_human_raw_data, modelval_data_root):
    names = release_names(model_vs_human_raw_data, "sketch")
    pool = {c: sorted((modelval_data_root / c).glob("*.png")) for c in CATEGORIES}
    used = {c: 0 for c in CATEGORIES}

    def image(index: int, category: str) -> bytes:
        path = pool[category][used[category]]
        used[category] += 1
        return path.read_bytes()

    archive = build_release_archive(tmp_path / "sketch.tar.gz", "sketch", names, image)
    local_server.add("/sketch.tar.gz", archive.read_bytes())
    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MODELVAL_MIRROR", local_server.url)
    home = tmp_path / "home"  # a data home: the published cue-conflict stimuli, model-vs-human's human data
    (home / "reference" / "model-vs-human").mkdir(parents=True)
    (home / "cue-conflict").symlink_to(modelval_data_root)
    (home / "reference" / "model-vs-human" / "raw-data").symlink_to(model_vs_human_raw_data)
    monkeypatch.setenv("MODELVAL_DATA_HOME", str(home))
    monkeypatch.delenv("MODELVAL_OFFLINE", raising=False)
    return names


def _json(argv, capsys) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow  # three evaluations of the bundled model (800, 800 and 1280 images), two forwards (session_caches)
def test_lite0_on_a_release_archive_reads_back_in_humans_and_benchmark(
    bundled_model, sketch_from_real_images, tmp_path, capsys, session_caches
):
    assert main(["data", "download", "--dataset", "sketch"]) == 0
    capsys.readouterr()
    out = tmp_path / "sketch_efficientnet-lite0_session_1.csv"
    accuracy = _json(
        [
            "accuracy",
            "--model",
            "efficientnet_lite0",
            "--dataset",
            "sketch",
            "--decisions-out",
            str(out),
            "--json",
        ],
        capsys,
    )
    assert accuracy["images"] == 800 and accuracy["dataset"] == "sketch"
    assert [row["condition"] for row in accuracy["conditions"]] == ["0"]
    assert 0.1 < accuracy["accuracy"] < 0.9  # real images of the right shape category: neither chance nor perfect
    with out.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    released = {name for name, _ in sketch_from_real_images}
    assert len(rows) == 800 and {row["imagename"] for row in rows} == released
    assert {row["subj"] for row in rows} == {"efficientnet_lite0"} and {row["condition"] for row in rows} == {"0"}

    humans = _json(["humans", "--decisions", str(out), "--json", "--bootstrap", "100"], capsys)
    assert humans["dataset"] == "sketch" and humans["images"] == 800 and len(humans["observers"]) == 7
    assert humans["accuracy"] == pytest.approx(accuracy["accuracy"])
    (condition,) = humans["conditions"]
    assert condition["n_trials"] == 800 and condition["error_consistency"] == pytest.approx(humans["error_consistency"])

    table = _json(["benchmark", "--decisions", f"lite0={out}", "--json"], capsys)
    (from_file,) = table["observers"]
    assert from_file["datasets"]["sketch"]["ood_accuracy"] == pytest.approx(accuracy["accuracy"])

    evaluated = _json(
        [
            "benchmark",
            "--model",
            "efficientnet_lite0",
            "--datasets",
            "sketch,cue-conflict",
            "--json",
        ],
        capsys,
    )
    (model,) = evaluated["observers"]
    assert evaluated["sanity"]["efficientnet_lite0"]["passed"]
    assert evaluated["datasets"] == ["cue-conflict", "sketch"]
    for metric in ("ood_accuracy", "accuracy_difference", "observed_consistency", "error_consistency"):
        assert model["datasets"]["sketch"][metric] == pytest.approx(from_file["datasets"]["sketch"][metric])


def test_lite0_on_a_subset_writes_every_condition_and_reads_back(
    bundled_model, tmp_path, capsys, model_vs_human_raw_data, modelval_data_root, monkeypatch
):
    """A few real images per uniform-noise condition in the release layout (a subset, so
    --allow-modified-stimuli): the decisions carry each image's condition, and accuracy reads them back."""
    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(tmp_path / "cache"))
    names = release_names(model_vs_human_raw_data, "uniform-noise")
    per_condition: dict[str, int] = {}
    folder = tmp_path / "uniform-noise" / "dnn" / "session-1"
    folder.mkdir(parents=True)
    for name, category in names:
        condition = name.split("_")[3]
        if per_condition.get(condition, 0) == 3:
            continue
        per_condition[condition] = per_condition.get(condition, 0) + 1
        source = sorted((modelval_data_root / category).glob("*.png"))[per_condition[condition]]
        (folder / name).symlink_to(source)
    out = tmp_path / "uniform-noise_lite0_session_1.csv"
    evaluated = _json(
        [
            "accuracy",
            "--model",
            "efficientnet_lite0",
            "--dataset",
            "uniform-noise",
            "--data-root",
            str(tmp_path / "uniform-noise"),
            "--allow-modified-stimuli",
            "--decisions-out",
            str(out),
            "--json",
        ],
        capsys,
    )
    assert evaluated["images"] == 24
    assert [(r["condition"], r["n_trials"]) for r in evaluated["conditions"]] == [
        (c, 3) for c in ("0.0", "0.03", "0.05", "0.1", "0.2", "0.35", "0.6", "0.9")
    ]
    again = _json(["accuracy", "--decisions", str(out), "--json"], capsys)
    assert again["dataset"] == "uniform-noise"  # read back from the release names
    assert again["conditions"] == evaluated["conditions"] and again["accuracy"] == evaluated["accuracy"]
    with out.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {row["condition"] for row in rows} == {"0.00", "0.03", "0.05", "0.10", "0.20", "0.35", "0.60", "0.90"}
