"""``modelval humans``, ``compare`` and ``human-figures``: JSON contracts, errors, figures, the bundled model."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from modelval.behaviour.decisions import write_decisions
from modelval.behaviour.humans import compare_with_humans, load_human_panel
from modelval.behaviour.trials import read_trials
from modelval.cli import main

HUMANS_KEYS = {
    "accuracy",
    "human_accuracy",
    "error_consistency",
    "error_consistency_ci95",
    "human_error_consistency",
    "observed_consistency",
    "observers",
    "dataset",
    "images",
}
COMPARE_KEYS = {"difference", "ci95", "ci95_resampling", "test", "mcnemar", "per_category", "per_category_tests"}
FILES = {
    "cue-conflict": "style-transfer-512-nomask-experiment_vgg16_session-1.csv",
    "edges": "edge-experiment_vgg_session_1.csv",
    "filled-silhouettes": "silhouette-filled-experiment_vgg_session_1.csv",
}


def _json(argv, capsys):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("dataset", sorted(FILES))
def test_humans_json_on_published_vgg16(modelval_reference_dir, dataset, capsys):
    payload = _json(
        [
            "humans",
            "--decisions",
            str(modelval_reference_dir / FILES[dataset]),
            "--reference-dir",
            str(modelval_reference_dir),
            "--json",
            "--bootstrap",
            "200",
        ],
        capsys,
    )
    assert payload.keys() >= HUMANS_KEYS
    assert payload["dataset"] == dataset  # read from the image names
    assert payload["images"] == (1280 if dataset == "cue-conflict" else 160)
    assert set(payload["human_accuracy"]) == {"mean", "min", "max"}
    assert len(payload["observers"]) == 10
    low, high = payload["error_consistency_ci95"]
    assert low < payload["error_consistency"] < high < payload["human_error_consistency"]
    assert ("texture_despite_humans" in payload) == (dataset == "cue-conflict")


def test_reference_dir_from_the_data_home(modelval_reference_dir, monkeypatch, capsys):
    monkeypatch.setenv("MODELVAL_DATA_HOME", str(modelval_reference_dir.parents[1]))  # <home>/reference/raw-data
    argv = ["humans", "--decisions", str(modelval_reference_dir / FILES["edges"]), "--json", "--bootstrap", "0"]
    payload = _json(argv, capsys)
    assert payload["reference_dir"] == str(modelval_reference_dir)


def test_missing_reference_data_says_how_to_get_it(modelval_reference_dir, tmp_path, monkeypatch, capsys):
    for name in ("MODELVAL_DATA_HOME", "MODELVAL_CACHE_DIR"):  # CI's, the session's
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert main(["humans", "--decisions", str(modelval_reference_dir / FILES["edges"])]) == 2
    err = capsys.readouterr().err
    assert err.startswith("modelval: error:") and "data download --humans" in err
    assert str(tmp_path / "cache" / "modelval" / "raw-data") in err
    assert "MODELVAL_DATA_HOME=DIR" in err and "--reference-dir" not in err  # the one setting, said once


def test_incomplete_file_is_a_clear_error(modelval_reference_dir, tmp_path, capsys):
    lines = (modelval_reference_dir / FILES["edges"]).read_text().splitlines()
    short = tmp_path / "short.csv"
    short.write_text("\n".join(lines[:-5]) + "\n")
    assert (
        main(
            ["humans", "--decisions", str(short), "--dataset", "edges", "--reference-dir", str(modelval_reference_dir)]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "do not cover the same images" in err and "Traceback" not in err


def test_declared_dataset_must_match_the_names(modelval_reference_dir, capsys):
    argv = [
        "humans",
        "--decisions",
        str(modelval_reference_dir / FILES["edges"]),
        "--dataset",
        "filled-silhouettes",
        "--reference-dir",
        str(modelval_reference_dir),
    ]
    assert main(argv) == 2
    assert "image names are from the edges experiment" in capsys.readouterr().err


@pytest.mark.slow
def test_model_on_edges_end_to_end(bundled_model, modelval_data_root, modelval_reference_dir, capsys):
    """The bundled model evaluated on the 160 edge images, compared with the 10 observers."""
    edges = modelval_data_root.parent / "edges"
    argv = ["humans", "--model", "efficientnet_lite0", "--dataset", "edges", "--data-root", str(edges),
            "--reference-dir", str(modelval_reference_dir), "--json"]  # fmt: skip
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["dataset"], result["images"]) == ("edges", 160)
    assert result["accuracy"] == pytest.approx(57 / 160)
    assert 0 < result["error_consistency"] < result["human_error_consistency"]


def test_humans_table_and_figures(modelval_reference_dir, tmp_path, capsys):
    plot, report = tmp_path / "ec.png", tmp_path / "report"
    argv = [
        "humans",
        "--decisions",
        str(modelval_reference_dir / FILES["cue-conflict"]),
        "--reference-dir",
        str(modelval_reference_dir),
        "--out",
        str(plot),
        "--report-dir",
        str(report),
        "--bootstrap",
        "100",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "error consistency" in out and "humans' mutual kappa" in out and "texture chosen although" in out
    assert "kappa_max" in out and "ceiling" not in out.replace("not a ceiling", "")
    assert not plot.with_suffix(".pdf").exists()  # --out FILE: its suffix picks the one format
    for path in (
        plot,
        report / "shape-bias.png",
        report / "shape-bias.pdf",
        report / "error-consistency-cue-conflict.png",
    ):
        assert path.is_file() and path.stat().st_size > 5000
    assert Image.open(plot).size[0] > 400
    assert json.loads((report / "humans.json").read_text()).keys() >= HUMANS_KEYS


def test_compare_two_published_files(modelval_reference_dir, capsys):
    payload = _json(
        [
            "compare",
            str(modelval_reference_dir / FILES["cue-conflict"]),
            str(modelval_reference_dir / "style-transfer-512-nomask-experiment_resnet50_session-1.csv"),
            "--json",
            "--bootstrap",
            "300",
        ],
        capsys,
    )
    assert payload.keys() >= COMPARE_KEYS
    assert payload["statistic"] == "shape_bias" and payload["images"] == 1200
    assert payload["difference"] == pytest.approx(0.0921 - 0.2207, abs=1e-4)
    discordant = payload["mcnemar"]["discordant"]
    assert discordant["total"] == discordant["a_only"] + discordant["b_only"]
    assert "shape" in discordant["definition"]
    assert payload["mcnemar"]["p"] < 1e-6 and payload["mcnemar"]["statistic"] == "shape_decision_rate"
    assert payload["test"]["statistic"] == "shape_bias_difference" and payload["test"]["method"] == "paired permutation"
    assert payload["test"]["permutations"] == 10_000 and payload["test"]["p"] < 0.001
    assert payload["ci95_resampling"] == "texture"
    assert len(payload["per_category"]) == 16
    assert {"ci95", "p", "p_holm"} <= payload["per_category"]["clock"].keys()


def test_compare_table_and_plot_on_silhouettes(modelval_reference_dir, tmp_path, capsys):
    plot = tmp_path / "cmp.png"
    argv = [
        "compare",
        str(modelval_reference_dir / "silhouette-filled-experiment_subject-01_session_1.csv"),
        str(modelval_reference_dir / FILES["filled-silhouettes"]),
        "--out",
        str(plot),
        "--bootstrap",
        "100",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "McNemar" in out and "accuracy" in out and "correct vs not" in out
    assert "paired permutation test of the accuracy difference" in out and "Holm" in out
    assert plot.is_file() and not plot.with_suffix(".pdf").exists() and f"wrote {plot}" in out


def test_compare_across_experiments_is_an_error(modelval_reference_dir, capsys):
    assert (
        main(
            [
                "compare",
                str(modelval_reference_dir / FILES["edges"]),
                str(modelval_reference_dir / FILES["cue-conflict"]),
            ]
        )
        == 2
    )
    assert "modelval: error:" in capsys.readouterr().err


def test_human_figures_from_published_decisions(modelval_reference_dir, tmp_path):
    argv = [
        "humans",
        "--reference-dir",
        str(modelval_reference_dir),
        "--report-dir",
        str(tmp_path),
        "--bootstrap",
        "100",
    ]
    for name in FILES.values():
        argv += ["--decisions", f"VGG-16={modelval_reference_dir / name}"]
    resnet = modelval_reference_dir / "style-transfer-512-nomask-experiment_resnet50_session-1.csv"
    argv += ["--decisions", f"ResNet-50={resnet}"]
    assert main(argv) == 0
    stems = ["shape-bias", "shape-bias-boxplot", "accuracy-by-dataset", "error-consistency", "human-likeness"]
    stems += [f"error-consistency-matrix-{dataset}" for dataset in FILES]
    for stem in stems:
        for suffix in (".png", ".pdf"):
            assert (tmp_path / f"{stem}{suffix}").stat().st_size > 5000
    payload = json.loads((tmp_path / "figures.json").read_text())
    assert set(payload["observers"]["VGG-16"]) == set(FILES)
    # every label says which published file it is: the cue-conflict VGG-16 is the trained-CNNs run
    assert "style-transfer-512-nomask-experiment-trained-CNNs/" in payload["sources"]["VGG-16"]["cue-conflict"]
    assert "raw-data/edge-experiment/" in payload["sources"]["VGG-16"]["edges"]
    matrix = payload["kappa_matrix"]["cue-conflict"]
    assert matrix["observers"][-2:] == ["VGG-16", "ResNet-50"] and len(matrix["kappa"]) == 12
    assert payload["humans_mode"] == "pooled"


def test_bundled_model_error_consistency_through_the_cli(bundled_evaluations, modelval_reference_dir, tmp_path, capsys):
    """The real EfficientNet-Lite0 decisions (shared session evaluation) -> ``modelval humans``."""
    evaluation = bundled_evaluations("model")
    path = write_decisions(tmp_path / "lite0.csv", evaluation.decisions, subject="efficientnet_lite0")
    payload = _json(
        ["humans", "--decisions", str(path), "--reference-dir", str(modelval_reference_dir), "--json"], capsys
    )
    assert payload["dataset"] == "cue-conflict" and payload["images"] == 1280
    assert payload["excluded_self"] is None
    # a texture-biased ImageNet CNN: low shape accuracy, errors barely consistent with humans'
    assert 0.1 < payload["accuracy"] < 0.35
    assert 0.0 < payload["error_consistency"] < payload["human_error_consistency"]
    low, high = payload["error_consistency_ci95"]
    assert low < payload["error_consistency"] < high
    direct = compare_with_humans(read_trials(path), load_human_panel(modelval_reference_dir, "cue-conflict"))
    assert payload["error_consistency"] == pytest.approx(direct.error_consistency)


def test_humans_json_states_kappa_max_resampling_and_na(modelval_reference_dir, capsys):
    edges = str(modelval_reference_dir / FILES["edges"])
    argv = [
        "humans",
        "--decisions",
        edges,
        "--reference-dir",
        str(modelval_reference_dir),
        "--json",
        "--bootstrap",
        "200",
    ]
    payload = _json([*argv, "--resample-observers", "--na", "exclude"], capsys)
    assert payload["kappa_max"]["mean"] > payload["error_consistency"]
    assert payload["error_consistency_ci95_resampling"] == "stimuli"
    assert "resampled" in payload["error_consistency_ci95_observers"]
    assert payload["na_handling"]["mode"] == "exclude"
    nine = next(o for o in payload["observers"] if o["observer"] == "subject-09")
    assert (nine["no_response"], nine["trials"]) == (30, 130)
    # a source unit on edges is a bad input (one line, exit 2), not a silent stimulus bootstrap
    assert main([*argv, "--resample", "texture"]) == 2
    assert "no shared sources" in capsys.readouterr().err


def test_humans_reports_the_shape_bias_with_a_texture_interval(modelval_reference_dir, capsys):
    vgg = str(modelval_reference_dir / FILES["cue-conflict"])
    payload = _json(["humans", "--decisions", vgg, "--reference-dir", str(modelval_reference_dir), "--json"], capsys)
    shape = payload["shape_bias"]
    assert shape["value"] == pytest.approx(84 / 912) and shape["ci95_resampling"] == "texture"
    assert shape["ci95"][0] < shape["value"] < shape["ci95"][1]
    assert shape["humans_pooled"] == pytest.approx(0.9587, abs=1e-4)


def test_compare_resampling_and_permutation_options(modelval_reference_dir, capsys):
    resnet = "style-transfer-512-nomask-experiment_resnet50_session-1.csv"
    a, b = (str(modelval_reference_dir / name) for name in (FILES["cue-conflict"], resnet))
    widths = {}
    for unit in ("stimuli", "texture", "two-way"):
        payload = _json(["compare", a, b, "--json", "--resample", unit, "--permutations", "500", "--seed", "3"], capsys)
        assert payload["ci95_resampling"] == unit and payload["test"]["permutations"] == 500
        widths[unit] = payload["ci95"][1] - payload["ci95"][0]
    assert widths["stimuli"] < widths["texture"] < widths["two-way"]


def test_na_exclude_on_an_all_na_file_is_one_line(tmp_path, modelval_reference_dir, capsys):
    """The defect: `humans --na exclude` on a file whose answers are all 'na' was exit 3, "unexpected error"."""
    published = (modelval_reference_dir / "style-transfer-512-nomask-experiment_resnet50_session-1.csv").read_text()
    header, *rows = published.splitlines()
    all_na = tmp_path / "all_na.csv"
    all_na.write_text("\n".join([header, *(",".join([*r.split(",")[:4], "na", *r.split(",")[5:]]) for r in rows)]))
    argv = ["humans", "--decisions", str(all_na), "--reference-dir", str(modelval_reference_dir), "--na", "exclude"]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "all 1280 of resnet50's responses are 'na'" in line and "use --na wrong" in line
