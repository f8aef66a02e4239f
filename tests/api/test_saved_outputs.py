"""Saved outputs re-scored without the model equal a fresh run exactly; damaged folders are refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

import modelval
from modelval.api.saved_outputs import load_saved_outputs, rescore, save_outputs
from modelval.cli import main
from modelval.errors import DataError


@pytest.fixture(scope="module")
def subset(tmp_path_factory, modelval_data_root):
    """4 stimuli per category (64), as symlinks."""
    folder = tmp_path_factory.mktemp("subset")
    for category in sorted(p for p in modelval_data_root.iterdir() if p.is_dir()):
        (folder / category.name).mkdir()
        for image in sorted(category.glob("*.png"))[:4]:
            (folder / category.name / image.name).symlink_to(image)
    return folder


def _fresh(subset, **settings):
    return modelval.shape_bias(
        "efficientnet_lite0", data_root=subset, allow_modified_stimuli=True, device="cpu", seed=3, **settings
    )


@pytest.fixture(scope="module")
def saved(subset, tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved")
    save_outputs(_fresh(subset).run, folder)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("aggregation", ["mean", "sum", "max"])
def test_rescore_equals_a_fresh_run_exactly(saved, subset, aggregation):
    fresh = _fresh(subset, aggregation=aggregation)
    again = rescore(saved, aggregation=aggregation, seed=3)
    assert [d.response for d in again.decisions] == [d.response for d in fresh.decisions]
    assert again.result.to_dict() == fresh.result.to_dict()  # the value, the counts and the interval


@pytest.mark.slow
def test_a_category_subset_decides_among_those_categories_only(saved):
    chosen = ["cat", "dog", "bear", "elephant", "bird"]
    report = rescore(saved, categories=chosen, bootstrap=0)
    assert {d.response for d in report.decisions} <= set(chosen)
    assert all(d.shape in chosen and d.texture in chosen for d in report.decisions)
    assert report.result.conflict_images == sum(d.shape != d.texture for d in report.decisions)
    with pytest.raises(DataError, match="unknown 'kat'"):
        rescore(saved, categories=["kat"])


@pytest.mark.slow
def test_the_cli_rescores_with_ranks(saved, capsys):
    assert main(["shape-bias", "--outputs", str(saved), "--json", "--bootstrap", "0"]) == 0  # the ranks always
    payload = json.loads(capsys.readouterr().out)
    ranks = payload["rank_sensitivity"]
    assert 0 < ranks["shape_mrr"] <= 1 and 0 < ranks["texture_mrr"] <= 1 and ranks["conflict_images"] == 59  # of 64
    assert payload["provenance"]["saved_run"]["model"]["spec"] == "efficientnet_lite0"
    assert main(["shape-bias", "--outputs", str(saved), "--bootstrap", "0"]) == 0
    text = capsys.readouterr().out
    assert "(no interval)" in text and "nan" not in text, text  # was: "[nan, nan]" beside the number
    assert f"shape MRR {ranks['shape_mrr']:.4f}, texture MRR {ranks['texture_mrr']:.4f}" in text


@pytest.mark.slow
def test_changed_or_incomplete_folders_are_refused(saved, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(saved, copy)
    outputs = np.load(copy / "outputs.npy")
    outputs[0, 0] += 1
    np.save(copy / "outputs.npy", outputs)
    with pytest.raises(DataError, match="SHA-256 differs"):
        load_saved_outputs(copy)
    (copy / "run.json").unlink()
    with pytest.raises(DataError, match=r"run\.json is missing"):
        load_saved_outputs(copy)
    with pytest.raises(DataError, match="not a folder of saved outputs"):
        load_saved_outputs(tmp_path / "absent")


def _copy(saved, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(saved, copy)
    return copy


def _rewrite_outputs(copy, outputs):
    """Change outputs.npy and make run.json's digest agree, as a careless tool (or a person) would."""
    from modelval.records.provenance import file_digest

    np.save(copy / "outputs.npy", outputs)
    record = json.loads((copy / "run.json").read_text())
    record["outputs_sha256"] = file_digest(copy / "outputs.npy")
    (copy / "run.json").write_text(json.dumps(record))


def test_nan_or_integer_outputs_are_refused_not_scored(saved, tmp_path):
    """The defect: `rescore` scored NaN rows (argmax 'airplane', a decision the model never made)."""
    copy = _copy(saved, tmp_path)
    outputs = np.load(copy / "outputs.npy")
    outputs[[2, 5]] = np.nan
    _rewrite_outputs(copy, outputs)
    with pytest.raises(DataError, match=r"NaN or infinite outputs for 2 stimuli \(airplane"):
        rescore(copy, bootstrap=0)
    _rewrite_outputs(copy, np.ones(outputs.shape, dtype=np.int64))
    with pytest.raises(DataError, match="outputs of type int64; a model's raw outputs are floats"):
        rescore(copy, bootstrap=0)


def test_an_edited_stimulus_listing_is_refused(saved, tmp_path):
    """The defect: stimuli.json was covered by no digest; shape and texture swapped gave 0.7838 for a true 0.2162."""
    copy = _copy(saved, tmp_path)
    listing = json.loads((copy / "stimuli.json").read_text())
    swapped = {**listing, "stimuli": [[r[0], r[2], r[1], r[3]] for r in listing["stimuli"]]}
    (copy / "stimuli.json").write_text(json.dumps(swapped))
    with pytest.raises(DataError, match=r"stimuli\.json: its SHA-256 differs from run\.json's"):
        rescore(copy, bootstrap=0)
    # an old folder (format 1: no digest of the listing) is still checked, row by row, against the names
    record = json.loads((copy / "run.json").read_text())
    record["format_version"] = 1
    del record["stimuli_sha256"]
    (copy / "run.json").write_text(json.dumps(record))
    with pytest.raises(DataError, match=r"row 1 lists airplane/\S+ with shape 'bicycle' .* states 'airplane'"):
        rescore(copy, bootstrap=0)
    other = [list(r) for r in listing["stimuli"]]
    other[0][3] = "0" * 64  # another image's digest: the outputs are not of the published file
    (copy / "stimuli.json").write_text(json.dumps({**listing, "stimuli": other}))
    with pytest.raises(DataError, match=r"row 1 \(airplane/.*\): its SHA-256 is not the published file's"):
        rescore(copy, bootstrap=0)
    (copy / "stimuli.json").write_text(json.dumps(listing))
    assert rescore(copy, bootstrap=0).shape_bias == rescore(saved, bootstrap=0).shape_bias


@pytest.mark.parametrize("label_map", [["not", "a", "map"], {"airplane": 3}, {"airplane": [1.5]}, {"plane": [1]}])
def test_a_saved_label_map_of_the_wrong_type_is_one_line(label_map, saved, tmp_path, capsys):
    """The defect: a label map of the wrong type in run.json was exit 3, "unexpected error"."""
    copy = _copy(saved, tmp_path)
    record = json.loads((copy / "run.json").read_text())
    record["label_map"] = label_map
    (copy / "run.json").write_text(json.dumps(record))
    assert main(["shape-bias", "--outputs", str(copy), "--bootstrap", "0"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "label" in line and "run.json" in line


@pytest.mark.parametrize("rotated", ["stimuli.json", "outputs.npy"])
def test_rows_rotated_against_their_stimuli_are_refused(saved, tmp_path, rotated):
    """The defect (issue 42 point 2): rows rotated by one, each listing row self-consistent and the digests of
    run.json recomputed, rescored to another number; each row is now bound to its stimulus."""
    from modelval.records.provenance import file_digest

    copy = _copy(saved, tmp_path)
    if rotated == "stimuli.json":
        listing = json.loads((copy / "stimuli.json").read_text())
        rotated = listing["stimuli"][1:] + listing["stimuli"][:1]
        (copy / "stimuli.json").write_text(json.dumps({**listing, "stimuli": rotated}))
    else:
        np.save(copy / "outputs.npy", np.roll(np.load(copy / "outputs.npy"), 1, axis=0))
    record = json.loads((copy / "run.json").read_text())
    record.update(stimuli_sha256=file_digest(copy / "stimuli.json"), outputs_sha256=file_digest(copy / "outputs.npy"))
    (copy / "run.json").write_text(json.dumps(record))
    with pytest.raises(DataError, match=r"row 1 \(\S+\): outputs\.npy's row 1 is not the one saved for it") as error:
        rescore(copy, bootstrap=0)
    assert "\n" not in str(error.value)


def test_an_older_folder_says_its_rows_are_not_bound(saved, tmp_path):
    copy = _copy(saved, tmp_path)
    from modelval.records.provenance import file_digest

    listing = json.loads((copy / "stimuli.json").read_text())
    (copy / "stimuli.json").write_text(json.dumps({**listing, "stimuli": [row[:4] for row in listing["stimuli"]],
                                                   "columns": listing["columns"][:4]}))  # fmt: skip
    record = json.loads((copy / "run.json").read_text())
    record.update(format_version=2, stimuli_sha256=file_digest(copy / "stimuli.json"))
    (copy / "run.json").write_text(json.dumps(record))
    report = rescore(copy, bootstrap=0)
    assert report.shape_bias == rescore(saved, bootstrap=0).shape_bias
    assert "not bound" in report.provenance["not_covered"]
