"""The published human raw data is checked against its manifest before anyone is compared with it."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from modelval.cli import main
from modelval.datasets.reference import human_manifest, load_reference_panel, verify_reference_dir
from modelval.errors import DataError

RESNET = "style-transfer-512-nomask-experiment_resnet50_session-1.csv"
SUBJECT = "style-transfer-512-nomask-experiment_subject-{:02d}_session_1.csv"


@pytest.fixture
def reference_copy(modelval_reference_dir, tmp_path):
    folder = tmp_path / "raw-data"
    folder.mkdir()
    for path in modelval_reference_dir.iterdir():
        shutil.copyfile(path, folder / path.name)  # writable copies of the read-only published files
    return folder


def _alter_every_answer(path, response="knife"):
    rows = list(csv.reader(path.open()))
    for row in rows[1:]:
        row[4] = response
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)


@pytest.mark.parametrize("dataset", ["cue-conflict", "edges", "filled-silhouettes"])
def test_the_published_files_verify(modelval_reference_dir, dataset):
    assert len(human_manifest(dataset)) == 10
    assert verify_reference_dir(modelval_reference_dir, dataset) == "verified"


def test_an_altered_or_deleted_human_file_is_refused_unless_allowed(reference_copy, capsys):
    observer = ["humans", "--decisions", str(reference_copy / RESNET), "--bootstrap", "0", "--json"]
    assert main([*observer, "--reference-dir", str(reference_copy)]) == 0
    published = json.loads(capsys.readouterr().out)
    assert published["reference_data"] == "verified"
    assert published["human_error_consistency"] == pytest.approx(0.331, abs=5e-4)

    _alter_every_answer(reference_copy / SUBJECT.format(1))
    assert main([*observer, "--reference-dir", str(reference_copy)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not hold the published human observers of cue-conflict" in err
    assert f"{SUBJECT.format(1)} differs from the manifest" in err and "--allow-modified-reference" in err
    assert main([*observer, "--reference-dir", str(reference_copy), "--allow-modified-reference"]) == 0
    modified = json.loads(capsys.readouterr().out)
    assert modified["reference_data"].startswith("modified: 1 observer file differs from the manifest")
    assert modified["human_error_consistency"] != pytest.approx(published["human_error_consistency"], abs=0.01)

    (reference_copy / SUBJECT.format(2)).unlink()  # nine observers left: never silently
    with pytest.raises(DataError, match=rf"{SUBJECT.format(2)} is missing"):
        verify_reference_dir(reference_copy, "cue-conflict")
    panel, found = load_reference_panel(reference_copy, "cue-conflict", allow_modified=True)
    assert len(panel.observers) == 9 and found.startswith("modified: 2 observer files differ")


def test_an_extra_observer_file_is_a_difference(reference_copy):
    shutil.copyfile(reference_copy / SUBJECT.format(3), reference_copy / SUBJECT.format(11))
    with pytest.raises(DataError, match=rf"{SUBJECT.format(11)} is not in the manifest"):
        verify_reference_dir(reference_copy, "cue-conflict")
    assert verify_reference_dir(reference_copy, "edges") == "verified"  # each experiment is checked alone


def test_human_figures_check_the_reference_too(reference_copy, tmp_path, capsys):
    _alter_every_answer(reference_copy / SUBJECT.format(4))
    argv = ["humans", "--decisions", str(reference_copy / RESNET), "--reference-dir", str(reference_copy)]
    argv += ["--report-dir", str(tmp_path / "figures"), "--bootstrap", "0"]
    assert main(argv) == 2
    assert "does not hold the published human observers" in capsys.readouterr().err
    assert not (tmp_path / "figures" / "figures.json").exists()
