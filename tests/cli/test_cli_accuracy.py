"""`modelval accuracy` on the three experiments, checked against the published decision files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelval.cli import main

SHARED = Path(__file__).resolve().parents[3] / "shared"


def run_json(capsys, *args: str) -> dict:
    assert main(["accuracy", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))


@pytest.mark.parametrize(
    ("file", "dataset", "correct"),
    [
        ("edge-experiment_vgg_session_1.csv", "edges", 39),
        ("silhouette-filled-experiment_vgg_session_1.csv", "filled-silhouettes", 77),
        ("style-transfer-512-nomask-experiment_vgg16_session-1.csv", "cue-conflict", 152),
    ],
)
def test_published_vgg16_accuracy(modelval_reference_dir, capsys, file, dataset, correct):
    """The dataset is read from the image names; the counts are the published VGG-16 decisions."""
    report = run_json(capsys, "--decisions", str(modelval_reference_dir / file))
    images = 1280 if dataset == "cue-conflict" else 160
    assert (report["dataset"], report["correct"], report["images"]) == (dataset, correct, images)
    assert report["accuracy"] == pytest.approx(correct / images)
    assert sum(c["correct"] for c in report["per_category"].values()) == correct


def test_observers_accuracy_counts_na_as_wrong(modelval_reference_dir, capsys):
    file = modelval_reference_dir / "edge-experiment_subject-09_session_1.csv"
    rows = file.read_text().splitlines()[1:]
    fields = [row.split(",") for row in rows]
    expected = sum(f[4] == f[5] for f in fields)  # object_response == category; "na" never equals
    report = run_json(capsys, "--decisions", str(file))
    assert report["correct"] == expected and report["images"] == 160


@pytest.fixture(scope="module")
def shape_only_roots(modelval_data_root: Path) -> dict[str, Path]:
    roots = {name: modelval_data_root.parent / name for name in ("edges", "filled-silhouettes")}
    for name, root in roots.items():
        if not root.is_dir():
            roots[name] = SHARED / name
    return roots


@pytest.mark.parametrize(("dataset", "correct"), [("edges", 57), ("filled-silhouettes", 83)])
@pytest.mark.slow
def test_bundled_model_end_to_end(
    bundled_model, shape_only_roots, tmp_path, capsys, modelval_reference_dir, dataset, correct
):
    """efficientnet_lite0 on 160 real images: accuracy, decisions written back, error consistency."""
    out = tmp_path / "decisions.csv"
    common = ["--dataset", dataset, "--data-root", str(shape_only_roots[dataset])]
    report = run_json(capsys, "--model", "efficientnet_lite0", *common, "--decisions-out", str(out))
    assert (report["correct"], report["images"]) == (correct, 160)
    # The file reads back with the dataset recognised from the published-style names.
    again = run_json(capsys, "--decisions", str(out))
    assert (again["dataset"], again["correct"]) == (dataset, correct)
    assert main(["humans", "--decisions", str(out), "--reference-dir", str(modelval_reference_dir), "--json"]) == 0
    humans = json.loads(capsys.readouterr().out)
    assert humans["dataset"] == dataset and humans["accuracy"] == pytest.approx(correct / 160)
    assert 0 < humans["error_consistency"] < humans["human_error_consistency"]


def test_decisions_out_needs_a_model(modelval_reference_dir, tmp_path, capsys):
    code = main(["accuracy", "--decisions", str(modelval_reference_dir / "edge-experiment_vgg_session_1.csv"),
                 "--decisions-out", str(tmp_path / "x.csv")])  # fmt: skip
    assert code == 2 and "needs --model" in capsys.readouterr().err


def test_a_decision_file_cut_at_a_row_boundary_gets_a_coverage_warning(modelval_reference_dir, tmp_path, capsys):
    lines = (modelval_reference_dir / "edge-experiment_vgg_session_1.csv").read_text().splitlines()
    cut = tmp_path / "edge-experiment_vgg_session_1.csv"
    cut.write_text("\n".join(lines[:101]) + "\n")  # header + 100 of the 160 rows: still a valid CSV
    assert main(["accuracy", "--decisions", str(cut), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["images"] == 100
    assert captured.err == (
        f"modelval: warning: {cut} covers 100 of the 160 edges images; the accuracy is not comparable with "
        "published values\n"
    )
    assert main(["accuracy", "--decisions", str(modelval_reference_dir / "edge-experiment_vgg_session_1.csv")]) == 0
    assert capsys.readouterr().err == ""  # the whole published file: no warning
