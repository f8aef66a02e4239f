"""``modelval benchmark`` as a reviewer checks it: model-vs-human's own file names, a verified reference in
every command that reads it, the degenerate-kappa rule, intervals, rank intervals and pairwise tests."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from modelval.behaviour.experiments import experiment
from modelval.cli import main
from reference_packages import reference_names

(cohen_kappa_score,) = reference_names("sklearn.metrics", "cohen_kappa_score")

VGG_EDGES = "edge-experiment_vgg_session_1.csv"
VGG_SILHOUETTES = "silhouette-filled-experiment_vgg_session_1.csv"
RESNET = "style-transfer-512-nomask-experiment_resnet50_session-1.csv"
VGG16 = "style-transfer-512-nomask-experiment_vgg16_session-1.csv"
SUBJECT = "style-transfer-512-nomask-experiment_subject-{:02d}_session_1.csv"


def _json(argv, capsys) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _rewrite(source: Path, target: Path, *, bare: bool = False, change=None) -> Path:
    """A copy of a raw-data CSV: image names cut to model-vs-human's bare short names, rows changed."""
    rows = list(csv.reader(source.open()))
    for row in rows[1:]:
        if bare:
            row[7] = row[7].split("_")[-1]  # 0001_edg_dnn_0_oven_00_oven10.png -> oven10.png
        if change is not None:
            change(row)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    return target


@pytest.fixture
def reference_copy(modelval_reference_dir, tmp_path):
    folder = tmp_path / "raw-data"
    folder.mkdir()
    for path in modelval_reference_dir.iterdir():
        shutil.copyfile(path, folder / path.name)
    return folder


def test_model_vs_human_edge_and_silhouette_files_benchmark_as_published(modelval_reference_dir, tmp_path, capsys):
    """model-vs-human names a model's files ``edge_<model>_session_1.csv`` with bare image names."""
    edge = _rewrite(modelval_reference_dir / VGG_EDGES, tmp_path / "edge_vgg_session_1.csv", bare=True)
    silhouette = _rewrite(
        modelval_reference_dir / VGG_SILHOUETTES, tmp_path / "silhouette_vgg_session_1.csv", bare=True
    )
    assert "oven10.png" in edge.read_text() and "_edg_" not in edge.read_text()
    common = ["benchmark", "--json", "--bootstrap", "0", "--permutations", "0"]
    theirs = _json([*common, "--decisions", f"vgg={edge}", "--decisions", f"vgg={silhouette}"], capsys)
    ours = _json(
        [*common, "--decisions", f"vgg={modelval_reference_dir / VGG_EDGES}", "--decisions",
         f"vgg={modelval_reference_dir / VGG_SILHOUETTES}"], capsys,
    )  # fmt: skip
    assert theirs["datasets"] == ["edges", "filled-silhouettes"]
    assert theirs["observers"][0]["aggregate"] == ours["observers"][0]["aggregate"]
    assert theirs["observers"][0]["datasets"]["edges"]["error_consistency"] == pytest.approx(0.0710, abs=5e-5)

    # a renamed file: the names cannot tell; the per-file form can
    renamed = shutil.copyfile(edge, tmp_path / "vgg-on-something.csv")
    assert main(["benchmark", "--decisions", f"vgg={renamed}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--decisions LABEL:DATASET=FILE" in err and "--dataset NAME" not in err
    named = _json([*common, "--decisions", f"vgg:edge={renamed}"], capsys)
    edges = ours["observers"][0]["datasets"]["edges"]
    assert named["observers"][0]["aggregate"]["error_consistency"] == edges["error_consistency"]
    # ``--dataset`` is not silently read as ``--datasets``
    assert main(["benchmark", "--dataset", "edges", "--decisions", f"vgg={renamed}"]) == 2
    assert "unrecognized arguments: --dataset" in capsys.readouterr().err
    # a declared dataset that contradicts the image names is refused, naming the form that declared it
    assert main(["benchmark", "--decisions", f"vgg:cue-conflict={modelval_reference_dir / VGG_EDGES}"]) == 2
    assert "vgg:cue-conflict but the image names are from the edges experiment" in capsys.readouterr().err


def test_human_figures_takes_the_per_file_dataset_and_names_only_what_it_has(modelval_reference_dir, tmp_path, capsys):
    """``humans`` with several observers (their figures) reads ``LABEL:DATASET=FILE`` as benchmark does; its error
    names that form, not a ``--dataset`` that one experiment per observer cannot use."""
    edge = _rewrite(modelval_reference_dir / VGG_EDGES, tmp_path / "vgg-renamed.csv", bare=True)
    common = ["humans", "--bootstrap", "0", "--decisions", f"resnet={modelval_reference_dir / RESNET}"]
    assert main([*common, "--decisions", f"vgg={edge}", "--report-dir", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--decisions LABEL:DATASET=FILE" in err and "--dataset NAME" not in err
    assert main([*common, "--dataset", "edges", "--decisions", f"vgg={edge}", "--report-dir", str(tmp_path)]) == 2
    assert "several observers each name their experiment: --decisions LABEL:DATASET=FILE" in capsys.readouterr().err
    assert main([*common, "--decisions", f"vgg:edge={edge}", "--report-dir", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    figures = json.loads((tmp_path / "b" / "figures.json").read_text())
    assert list(figures["observers"]["vgg"]) == ["edges"]
    assert figures["observers"]["vgg"]["edges"]["error_consistency"] == pytest.approx(0.0710, abs=5e-5)
    wrong = ["--decisions", f"vgg:filled-silhouettes={modelval_reference_dir / VGG_EDGES}"]
    assert main([*common, *wrong, "--report-dir", str(tmp_path / "c")]) == 2
    assert "vgg:filled-silhouettes but the image names are from the edges experiment" in capsys.readouterr().err


def test_compare_names_no_dataset_nobody_gave(modelval_reference_dir, capsys):
    assert main(["compare", str(modelval_reference_dir / VGG_EDGES), str(modelval_reference_dir / RESNET)]) == 2
    err = capsys.readouterr().err
    assert "A is from the edges experiment but the image names are from the cue-conflict experiment" in err
    assert "--dataset" not in err


def _tamper(folder: Path) -> None:
    """One observer's cue-conflict answers all set to 'knife' (the review's tampered folder)."""

    def knife(row):
        row[4] = "knife"

    path = folder / SUBJECT.format(1)
    _rewrite(path, path, change=knife)


@pytest.mark.parametrize("command", ["benchmark", "humans", "humans"])
def test_a_tampered_reference_is_refused_by_every_command(command, reference_copy, tmp_path, capsys):
    _tamper(reference_copy)
    decisions = reference_copy / RESNET
    argv = {
        "benchmark": ["benchmark", "--decisions", str(decisions), "--bootstrap", "0", "--permutations", "0"],
        "humans": ["humans", "--decisions", str(decisions), "--bootstrap", "0"],
        "human-figures": ["humans", "--decisions", str(decisions), "--bootstrap", "0", "--report-dir",
                          str(tmp_path / "figures")],
    }[command] + ["--reference-dir", str(reference_copy)]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "does not hold the published human observers of cue-conflict" in err and "--allow-modified-reference" in err


def test_benchmark_records_the_reference_it_used(reference_copy, modelval_reference_dir, capsys):
    argv = ["benchmark", "--decisions", str(reference_copy / RESNET), "--json", "--bootstrap", "0"]
    argv += ["--permutations", "0", "--reference-dir", str(reference_copy)]
    published = _json(argv, capsys)
    assert published["reference_data"] == {"cue-conflict": "verified"}
    _tamper(reference_copy)
    modified = _json([*argv, "--allow-modified-reference"], capsys)
    assert modified["reference_data"]["cue-conflict"].startswith("modified: 1 observer file differs")
    before = published["observers"][0]["aggregate"]["error_consistency"]
    after = modified["observers"][0]["aggregate"]["error_consistency"]
    assert before == pytest.approx(0.0674, abs=5e-5) and abs(after - before) > 0.005


@pytest.mark.parametrize(("dataset", "model"), [("cue-conflict", RESNET), ("edges", VGG_EDGES),
                                                  ("filled-silhouettes", VGG_SILHOUETTES)])  # fmt: skip
def test_humans_accepts_model_vs_humans_own_raw_data(dataset, model, model_vs_human_raw_data, modelval_reference_dir,
                                                     tmp_path, capsys):  # fmt: skip
    argv = ["humans", "--decisions", str(modelval_reference_dir / model), "--bootstrap", "0", "--json"]
    theirs = _json([*argv, "--reference-dir", str(model_vs_human_raw_data)], capsys)
    ours = _json([*argv, "--reference-dir", str(modelval_reference_dir)], capsys)
    assert theirs["reference_data"] == "verified" and theirs["dataset"] == dataset
    assert theirs["error_consistency"] == ours["error_consistency"]
    # and a changed copy of model-vs-human's folder is refused like texture-vs-shape's
    upstream = experiment(dataset).upstream
    copy = tmp_path / "mvh"
    shutil.copytree(model_vs_human_raw_data / upstream, copy / upstream)
    first = copy / upstream / f"{upstream}_subject-01_session_1.csv"
    _rewrite(first, first, change=lambda row: row.__setitem__(4, "knife"))
    assert main([*argv, "--reference-dir", str(copy)]) == 2
    assert f"{upstream}_subject-01_session_1.csv differs from the manifest" in capsys.readouterr().err


def test_the_humans_ood_accuracy_is_over_the_kept_conditions(model_vs_human_raw_data, modelval_reference_dir,
                                                             monkeypatch, capsys):  # fmt: skip
    file = model_vs_human_raw_data / "low-pass" / "low-pass_subject-01_session_1.csv"
    payload = _json(
        ["benchmark", "--decisions", str(file), "--json", "--bootstrap", "0", "--permutations", "0"], capsys
    )
    kept = set(experiment("low-pass").benchmark_conditions)
    correct = total = 0
    for path in sorted((model_vs_human_raw_data / "low-pass").glob("*.csv")):
        for row in csv.DictReader(path.open()):
            if str(int(float(row["condition"]))) in kept:
                correct += row["object_response"] == row["category"]
                total += 1
    assert payload["humans"]["datasets"]["low-pass"]["ood_accuracy"] == pytest.approx(correct / total, abs=1e-15)
    assert "in the kept conditions" in payload["humans"]["meaning"]
    assert "in the kept conditions" in payload["definitions"]["ood_accuracy"]


def test_degenerate_kappa_cells_are_counted_and_dropped_on_request(model_vs_human_raw_data, tmp_path, monkeypatch,
                                                                   capsys):  # fmt: skip
    """A contrast observer always right at 50% contrast: its kappa there is 0 against every human."""
    source = model_vs_human_raw_data / "contrast" / "contrast_subject-02_session_1.csv"

    def perfect_at_c50(row):
        row[0] = "perfect-at-50"
        if row[6] == "c50":
            row[4] = row[5]

    file = _rewrite(source, tmp_path / "contrast_perfect_session_1.csv", change=perfect_at_c50)
    argv = ["benchmark", "--decisions", str(file), "--json", "--bootstrap", "0", "--permutations", "0"]
    one = _json(argv, capsys)
    nan = _json([*argv, "--degenerate-kappa", "nan"], capsys)
    assert one["degenerate_kappa"]["rule"] == "one" and nan["degenerate_kappa"]["rule"] == "nan"
    assert one["degenerate_kappa"]["datasets"]["contrast"] == {"observers": 4, "human_pairs": 0}
    assert nan["degenerate_kappa"]["cells"] == 4
    # by hand: kappa per kept condition with each of the 4 humans, sklearn; c50 is 0 (one rule) or left out (nan)
    per_condition = {}
    mine = {"_".join(r["imagename"].split("_")[-2:]): r for r in csv.DictReader(file.open())}
    humans = [list(csv.DictReader(p.open())) for p in sorted((model_vs_human_raw_data / "contrast").glob("*.csv"))]
    for condition in experiment("contrast").benchmark_conditions:
        kappas = []
        for rows in humans:
            rows = [r for r in rows if r["condition"] == condition]
            a = [mine["_".join(r["imagename"].split("_")[-2:])]["object_response"] == r["category"] for r in rows]
            b = [r["object_response"] == r["category"] for r in rows]
            kappas.append(0.0 if all(a) else float(cohen_kappa_score(a, b)))
        per_condition[condition] = np.mean(kappas)
    observer = {e["observer"]: e for e in one["observers"]}["perfect-at-50"]["datasets"]["contrast"]
    assert observer["error_consistency"] == pytest.approx(np.mean(list(per_condition.values())), abs=1e-12)
    dropped = {e["observer"]: e for e in nan["observers"]}["perfect-at-50"]["datasets"]["contrast"]
    rest = [v for c, v in per_condition.items() if c != "c50"]
    assert dropped["error_consistency"] == pytest.approx(np.mean(rest), abs=1e-12)
    row = next(r for r in dropped["per_condition"] if r["condition"] == "c50")
    assert row["error_consistency"] is None  # NaN (null in strict JSON): left out, and the row says so


def test_intervals_rank_intervals_and_distinguishable_pairs(modelval_reference_dir, tmp_path, capsys):
    argv = ["benchmark", "--json", "--bootstrap", "300", "--permutations", "500", "--seed", "3"]
    for label, file in (("ResNet-50", RESNET), ("VGG-16", VGG16), ("subject-01", SUBJECT.format(1))):
        argv += ["--decisions", f"{label}={modelval_reference_dir / file}"]
    payload = _json(argv, capsys)
    again = _json(argv, capsys)
    assert payload["uncertainty"] == again["uncertainty"]  # seeded
    band = payload["uncertainty"]
    assert "trials resampled with replacement within each condition" in band["intervals_method"]
    assert "human observers resampled" in band["intervals_method"]
    for entry in payload["observers"]:
        for metric, value in entry["aggregate"].items():
            low, high = entry["intervals"]["aggregate"][metric]
            assert low <= value <= high, (entry["observer"], metric)
        for metric, rank in entry["ranks"].items():
            low, high = entry["rank_intervals"][metric]
            assert 1 <= low <= rank <= high <= 3
    low, high = payload["humans"]["intervals"]["aggregate"]["error_consistency"]
    assert low < payload["humans"]["aggregate"]["error_consistency"] < high
    pairs = {(p["a"], p["b"], p["measure"]): p for p in band["pairs"]}
    assert len(pairs) == 3 * 4
    resnet_vgg = pairs["ResNet-50", "VGG-16", "error_consistency"]
    assert resnet_vgg["difference"] == pytest.approx(0.06743 - 0.04049, abs=1e-4)
    assert resnet_vgg["p_at_floor"] and resnet_vgg["distinguishable"]
    assert main(argv[:1] + argv[2:]) == 0
    table = capsys.readouterr().out
    assert "ranks with their 95% intervals" in table and "p < 2/(500+1)" in table


def test_compare_prints_the_floor_and_the_exact_p(modelval_reference_dir, capsys):
    a, b = (str(modelval_reference_dir / name) for name in (VGG16, RESNET))
    payload = _json(["compare", a, b, "--json", "--bootstrap", "0", "--permutations", "2000"], capsys)
    test = payload["test"]
    assert test["at_floor"] and test["p"] == pytest.approx(2 / 2001) and test["floor"] == pytest.approx(2 / 2001)
    assert test["exact_p"] == pytest.approx(1.0896e-26, rel=1e-3)  # all 2^396 sign flips, counted by type
    assert main(["compare", a, b, "--bootstrap", "0", "--permutations", "2000"]) == 0
    assert "p < 2/(2000+1) = 1.0e-03; exact p = 1.1e-26 (all 2^396 sign flips)" in capsys.readouterr().out
