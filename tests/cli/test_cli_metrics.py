"""`modelval ece|reliability|temperature|metrics`, run in-process through ``modelval.cli.main``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from modelval.cli import main
from reference_packages import reference_names

balanced_accuracy_score, precision_recall_fscore_support = reference_names(
    "sklearn.metrics", "balanced_accuracy_score", "precision_recall_fscore_support"
)

CONF = [0.0, 0.25, 0.5, 0.5, 0.75, 1.0, 1.0, 0.6, 0.9, 0.3]
CORRECT = [0, 1, 0, 1, 1, 1, 0, 1, 1, 0]


def write_jsonl(path: Path, rows: list[dict | str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def good_rows() -> list[dict]:
    return [{"label": 1, "pred": 1 if c else 0, "conf": x} for x, c in zip(CONF, CORRECT, strict=True)]


@pytest.fixture
def tree(tmp_path) -> Path:
    root = tmp_path / "wandb-preds"
    write_jsonl(root / "preds-flood-lb25-set1-seed42-v001" / "preds.jsonl", good_rows())
    write_jsonl(root / "preds-flood-lb25-set1-seed42-v002" / "preds.jsonl", [*good_rows(), "{bad"])
    write_jsonl(root / "preds-flood-lb25-set2-seed42-v001" / "preds.jsonl", [{"label": 1, "pred": 1}])
    return root


class TestEce:
    def test_json(self, tree, capsys):
        # 4 bins, as the seed artifacts used (the command's default is 15, as everywhere)
        assert main(["calibration", "ece", str(tree), "--json", "--bins", "4"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert [(o["set"], o["version"], o["skipped"]) for o in out] == [
            (1, 2, False),
            (1, 1, True),
            (2, 1, True),
        ]
        used = out[0]
        assert used["ece"] == pytest.approx(0.26) and used["mce"] == pytest.approx(0.375)
        assert (used["n_bins"], used["rows_used"], used["rows_dropped"]) == (4, 10, 1)
        assert (used["event"], used["label_budget"]) == ("flood", 25)
        assert used["path"].endswith("preds-flood-lb25-set1-seed42-v002/preds.jsonl")
        assert "superseded" in out[1]["reason"] and "no 'conf'" in out[2]["reason"]

    def test_torchmetrics_convention_and_bins(self, tree, capsys):
        assert main(["calibration", "ece", str(tree), "--json", "--convention", "torchmetrics", "--bins", "4"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out[0]["ece"] == pytest.approx(0.22, abs=1e-6) and out[0]["convention"] == "torchmetrics"
        assert main(["calibration", "ece", str(tree), "--json", "--bins", "1"]) == 0
        assert json.loads(capsys.readouterr().out)[0]["ece"] == pytest.approx(abs(0.6 - np.mean(CONF)))

    def test_single_file_without_artifact_name(self, tmp_path, capsys):
        path = write_jsonl(tmp_path / "p.jsonl", good_rows())
        assert main(["calibration", "ece", str(path), "--json", "--adaptive", "--bins", "2"]) == 0
        (obj,) = json.loads(capsys.readouterr().out)
        assert "event" not in obj and obj["adaptive"] is True and obj["ece"] is not None

    def test_table_and_csv(self, tree, tmp_path, capsys):
        out_csv = tmp_path / "ece.csv"
        assert main(["calibration", "ece", str(tree), "--csv", str(out_csv), "--bins", "4"]) == 0
        text = capsys.readouterr().out
        assert "0.2600" in text and "skipped" in text and "1 file(s) evaluated, 2 skipped" in text
        rows = list(csv.DictReader(out_csv.open()))
        assert rows[0]["event"] == "flood" and float(rows[0]["ece_set1"]) == pytest.approx(0.26)

    def test_an_explicit_bin_count_is_not_called_the_default(self, tree, capsys):
        """Issue 32: ``--bins 4`` printed ``bins=4 (default)``: the "(default)" was the edge convention's name."""
        assert main(["calibration", "ece", str(tree), "--bins", "4", "--bootstrap", "0"]) == 0
        text = capsys.readouterr().out
        assert "(default)" not in text and "4 bins, (lo, hi] edges" in text
        assert (
            main(["calibration", "ece", str(tree), "--bins", "4", "--bootstrap", "0", "--convention", "torchmetrics"])
            == 0
        )
        assert "4 bins, torchmetrics' [lo, hi) edges" in capsys.readouterr().out

    def test_csv_of_one_plain_file_has_no_nan_mean_row(self, tmp_path, capsys):
        """Issue 32: one file not named preds-<event>-lb<k>-set<j>-... wrote ``mean,,nan``."""
        path = write_jsonl(tmp_path / "p.jsonl", good_rows())
        out_csv = tmp_path / "ece.csv"
        assert main(["calibration", "ece", str(path), "--csv", str(out_csv), "--bootstrap", "0"]) == 0
        assert out_csv.read_text().splitlines() == ["event,label_budget,ece_mean"]
        assert "nan" not in out_csv.read_text()
        assert "header only" in capsys.readouterr().err
        assert not (tmp_path / "ece.seeds.csv").exists()  # no artifact folders: no per-seed summary

    def test_strict_is_an_error_without_traceback(self, tree, capsys):
        assert main(["calibration", "ece", str(tree), "--strict"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("modelval: error: ") and "invalid JSON" in err and "Traceback" not in err

    def test_missing_path(self, tmp_path, capsys):
        assert main(["calibration", "ece", str(tmp_path / "nope")]) == 2
        assert "no such file or directory" in capsys.readouterr().err

    def test_bad_bins(self, tree, capsys):
        assert main(["calibration", "ece", str(tree), "--bins", "0"]) == 2
        assert "the number of bins is 1 to 10000" in capsys.readouterr().err


def test_reliability_png(tmp_path, capsys):
    path = write_jsonl(tmp_path / "p.jsonl", good_rows())
    out = tmp_path / "rel.png"
    assert main(["calibration", "reliability", str(path), "--out", str(out), "--bins", "4"]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert "ECE 0.2600" in capsys.readouterr().out
    no_conf = write_jsonl(tmp_path / "n.jsonl", [{"label": 1, "pred": 1}])
    assert main(["calibration", "reliability", str(no_conf), "--out", str(out)]) == 2
    assert "cannot draw a reliability diagram" in capsys.readouterr().err


def overconfident(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 5)) * 1.5
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    y = np.array([rng.choice(5, p=row) for row in p])
    return z * 3, y


def test_temperature(tmp_path, capsys):
    for name, seed in (("val", 0), ("test", 1)):
        z, y = overconfident(2000, seed)
        np.savez(tmp_path / f"{name}.npz", logits=z, labels=y)
    plot = tmp_path / "ece_t.png"
    args = ["calibration", "temperature", "--val", str(tmp_path / "val.npz"), "--test", str(tmp_path / "test.npz")]
    assert main([*args, "--json", "--out", str(plot)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert 2.5 < out["temperature"] < 3.5
    assert out["after"]["ece"] < out["before"]["ece"] and out["after"]["nll"] < out["before"]["nll"]
    assert out["after"]["accuracy"] == out["before"]["accuracy"]
    from sklearn.metrics import brier_score_loss

    z, y = overconfident(2000, 1)
    probs = np.exp(z - z.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    assert out["before"]["brier"] == pytest.approx(brier_score_loss(y, probs, labels=range(5), scale_by_half=False))
    assert out["after"]["brier"] < out["before"]["brier"]
    assert [p["temperature"] for p in out["sweep"]] == [0.5, 1.0, 1.5, 2.0]
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "fitted T = " in text and "before: NLL" in text and "T = 1.5: NLL" in text
    np.savez(tmp_path / "bad.npz", logits=np.zeros((2, 3)), labels=np.array([0, 1]))
    assert (
        main(["calibration", "temperature", "--val", str(tmp_path / "val.npz"), "--test", str(tmp_path / "bad.npz")])
        == 2
    )
    assert "5 classes but --test has 3" in capsys.readouterr().err


def test_metrics(tmp_path, capsys):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 10)
    p = np.where(rng.uniform(size=40) < 0.6, y, rng.integers(0, 4, 40))
    path = write_jsonl(tmp_path / "p.jsonl", [{"label": int(a), "pred": int(b)} for a, b in zip(y, p, strict=True)])
    (tmp_path / "w.json").write_text(json.dumps({"0": 500, "1": 100, "2": 20, "3": 5}))
    (tmp_path / "c.json").write_text(json.dumps([500, 100, 20, 5]))
    args = [
        "metrics",
        str(path),
        "--class-weights",
        str(tmp_path / "w.json"),
        "--train-counts",
        str(tmp_path / "c.json"),
    ]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    acc_c = np.array([np.mean(p[y == c] == c) for c in range(4)])
    assert out["accuracy"] == pytest.approx(np.mean(y == p))
    assert out["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(y, p))
    assert out["reweighted_accuracy"] == pytest.approx(acc_c @ np.array([500, 100, 20, 5]) / 625)
    assert out["shot_accuracy"] == pytest.approx({"many": acc_c[0], "medium": acc_c[1:3].mean(), "few": acc_c[3]})
    ref = precision_recall_fscore_support(y, p, average="macro", zero_division=0)
    assert out["macro"]["f1"] == pytest.approx(ref[2])
    assert len(out["per_class"]) == 4 and out["per_class"][0]["support"] == 10
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "reweighted accuracy" in text and "many/medium/few" in text
    (tmp_path / "w3.json").write_text("[1, 1, 1]")
    assert main(["metrics", str(path), "--class-weights", str(tmp_path / "w3.json")]) == 2
    assert "class 3 found but there are only 3 classes" in capsys.readouterr().err


def test_temperature_nll_is_the_exact_log_softmax_not_floored_probabilities(tmp_path, capsys):
    """Logits so confident that the true class's softmax underflows to 0: a 1e-300 floor would report
    about 690.8; the log-softmax NLL is the logit gap itself (torch's cross_entropy agrees)."""
    import torch

    z = np.array([[800.0, 0.0], [0.0, 800.0], [5.0, 0.0], [0.0, 5.0]])
    y = np.array([1, 1, 0, 1])
    for name in ("val", "test"):
        np.savez(tmp_path / f"{name}.npz", logits=z, labels=y)
    assert (
        main(
            [
                "calibration",
                "temperature",
                "--val",
                str(tmp_path / "val.npz"),
                "--test",
                str(tmp_path / "test.npz"),
                "--json",
            ]
        )
        == 0
    )
    before = json.loads(capsys.readouterr().out)["before"]["nll"]
    expected = torch.nn.functional.cross_entropy(torch.tensor(z), torch.tensor(y)).item()
    assert before == pytest.approx(expected, rel=1e-12)
    assert before > 200 and abs(before - (690.78 + 2 * 0.0067 + 5.0067) / 4) > 1


def test_adaptive_ties_reported_in_ece_and_reliability_json(tmp_path, capsys):
    """Defect 4: `ece --json` and `reliability --json` say how many bins were really used."""
    rows = [{"label": 1, "pred": 1, "conf": 1.0}] * 60 + [
        {"label": 1, "pred": i % 2, "conf": 0.3 + 0.005 * i} for i in range(40)
    ]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    assert main(["calibration", "ece", str(path), "--json", "--adaptive", "--bins", "10"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert (record["n_bins"], record["effective_bins"]) == (10, 5)
    assert record["min_bin_count"] == 10
    out = tmp_path / "rel.png"
    assert (
        main(["calibration", "reliability", str(path), "--out", str(out), "--adaptive", "--bins", "10", "--json"]) == 0
    )
    rel = json.loads(capsys.readouterr().out)
    assert (rel["effective_bins"], rel["min_bin_count"], len(rel["bins"])) == (5, 10, 5)
    assert rel["ece"] == pytest.approx(record["ece"])
    assert main(["calibration", "reliability", str(path), "--out", str(out), "--adaptive", "--bins", "10"]) == 0
    assert "5 of 10 bins non-empty" in capsys.readouterr().out


def test_temperature_nll_is_exact_log_softmax(tmp_path, capsys):
    """Defect 5: the NLL of a confidently wrong logit row is its full -log p, not -log(1e-300) = 690.8."""
    import torch

    z, y = overconfident(200, 0)
    z[:3] = 0.0
    z[:3, (y[:3] + 1) % 5] = 2000.0  # true-class probability exp(-2000): underflows to 0 in float64
    np.savez(tmp_path / "val.npz", logits=overconfident(500, 1)[0], labels=overconfident(500, 1)[1])
    np.savez(tmp_path / "test.npz", logits=z, labels=y)
    args = [
        "calibration",
        "temperature",
        "--val",
        str(tmp_path / "val.npz"),
        "--test",
        str(tmp_path / "test.npz"),
        "--json",
    ]
    for method in ("temperature", "vector"):
        assert main([*args, "--method", method, "--sweep"]) == 0
        out = json.loads(capsys.readouterr().out)
        zt, yt = torch.as_tensor(z, dtype=torch.float64), torch.as_tensor(y)
        expected = torch.nn.functional.cross_entropy(zt, yt).item()
        assert out["before"]["nll"] == pytest.approx(expected, rel=1e-12)
        assert out["before"]["nll"] > 3 * 2000 / 200  # the three rows alone contribute 30
        if method == "temperature":
            after = torch.nn.functional.cross_entropy(zt / out["temperature"], yt).item()
            assert out["after"]["nll"] == pytest.approx(after, rel=1e-12)
        assert out["after"]["effective_bins"] >= 1 and out["before"]["min_bin_count"] >= 1


def test_temperature_cli_reports_converged(tmp_path, capsys):
    """Defect 7: a fit on its bound warns and `temperature --json` says converged: false."""
    from modelval.metrics.temperature import ScalingFitWarning

    y = np.arange(30) % 3
    np.savez(tmp_path / "val.npz", logits=np.eye(3)[y] * 5.0, labels=y)
    args = ["calibration", "temperature", "--val", str(tmp_path / "val.npz"), "--test", str(tmp_path / "val.npz")]
    with pytest.warns(ScalingFitWarning):
        assert main([*args, "--json", "--sweep"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["converged"] is False and out["temperature"] == pytest.approx(1e-3, rel=1e-4)


def test_temperature_cli_odir(tmp_path, capsys):
    for name, seed in (("val", 0), ("test", 1)):
        z, y = overconfident(1000, seed)
        np.savez(tmp_path / f"{name}.npz", logits=z, labels=y)
    args = [
        "calibration",
        "temperature",
        "--val",
        str(tmp_path / "val.npz"),
        "--test",
        str(tmp_path / "test.npz"),
        "--json",
    ]
    assert main([*args, "--method", "matrix", "--odir", "0.5", "0.1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["odir"] == [0.5, 0.1] and out["converged"] is True and out["temperature"] is None
    assert out["after"]["nll"] < out["before"]["nll"]


def test_ece_intervals_and_seed_summary(tmp_path, capsys):
    root = tmp_path / "preds"
    rng = np.random.default_rng(0)
    expected: dict[int, float] = {}
    for seed in (1, 2, 3):
        conf = rng.uniform(0.3, 1.0, 400)
        right = rng.uniform(size=400) < conf - 0.1
        rows = [{"label": 0, "pred": 0 if r else 1, "conf": float(c)} for c, r in zip(conf, right, strict=True)]
        write_jsonl(root / f"preds-flood-lb25-set1-seed{seed}-v001" / "p.jsonl", rows)
        from modelval.metrics.calibration import expected_calibration_error

        expected[seed] = expected_calibration_error(conf, right, 4)
    # An older version of seed 3 is superseded, also in the per-seed summary.
    write_jsonl(root / "preds-flood-lb25-set1-seed3-v000" / "p.jsonl", good_rows())
    table_csv, seeds_csv = tmp_path / "ece.csv", tmp_path / "ece.seeds.csv"  # the per-seed summary beside the table
    argv = [
        "calibration",
        "ece",
        str(root),
        "--json",
        "--bootstrap",
        "200",
        "--csv",
        str(table_csv),
        "--bins",
        "4",
    ]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    (used,) = [o for o in out if not o["skipped"]]
    low, high = used["ece_ci95"]
    assert low < used["ece"] < high and used["bootstrap"]["n_resamples"] == 200
    assert set(used) >= {"mce_ci95", "rms_ci95", "accuracy_ci95"}
    (row,) = list(csv.DictReader(seeds_csv.open()))
    values = [expected[s] for s in (1, 2, 3)]
    assert int(row["n_seeds"]) == 3
    assert float(row["ece_mean"]) == pytest.approx(np.mean(values))
    assert float(row["ece_sd"]) == pytest.approx(np.std(values, ddof=1))
    assert [float(row[f"ece_seed{s}"]) for s in (1, 2, 3)] == pytest.approx(values)
    assert table_csv.exists()
    assert main(["calibration", "ece", str(root), "--bootstrap", "0", "--json"]) == 0
    assert "ece_ci95" not in json.loads(capsys.readouterr().out)[0]
    assert main(["calibration", "ece", str(root), "--bootstrap", "100"]) == 0
    assert "ECE 95% CI" in capsys.readouterr().out


def test_reliability_has_wilson_bins_and_ece_interval(tmp_path, capsys):
    path = write_jsonl(tmp_path / "p.jsonl", good_rows())
    out = tmp_path / "rel.png"
    assert (
        main(
            ["calibration", "reliability", str(path), "--out", str(out), "--bins", "4", "--json", "--bootstrap", "100"]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["ece_ci95"][0] <= result["ece"] <= result["ece_ci95"][1]
    first = result["bins"][0]  # conf 0.0 and 0.25: 1 right of 2 -> Wilson (0.0945, 0.9055)
    assert first["count"] == 2 and first["accuracy_ci95"] == pytest.approx([0.09453120573, 0.90546879427])


def test_metrics_intervals(tmp_path, capsys):
    y = np.repeat(np.arange(4), 50)
    p = np.where(np.arange(200) % 3 == 0, (y + 1) % 4, y)
    path = write_jsonl(tmp_path / "p.jsonl", [{"label": int(a), "pred": int(b)} for a, b in zip(y, p, strict=True)])
    (tmp_path / "c.json").write_text(json.dumps([500, 100, 20, 5]))
    argv = ["metrics", str(path), "--train-counts", str(tmp_path / "c.json"), "--json", "--stratify"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    for name in ("accuracy", "balanced_accuracy"):
        assert out[f"{name}_ci95"][0] < out[name] < out[f"{name}_ci95"][1]
    assert set(out["shot_accuracy_ci95"]) == {"many", "medium", "few"}
    assert out["bootstrap"]["stratified"] is True and out["bootstrap"]["n_resamples"] == 1000


@pytest.mark.parametrize("method", ["histogram", "isotonic"])
def test_temperature_with_top_label_calibrators(tmp_path, capsys, method):
    for name, seed in (("val", 0), ("test", 1)):
        z, y = overconfident(3000, seed)
        np.savez(tmp_path / f"{name}.npz", logits=z, labels=y)
    args = [
        "calibration",
        "temperature",
        "--val",
        str(tmp_path / "val.npz"),
        "--test",
        str(tmp_path / "test.npz"),
        "--method",
        method,
    ]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert out["after"]["ece"] < out["before"]["ece"] / 3
    assert out["after"]["nll"] is None and "top-1 confidence" in out["after"]["null_reasons"]["nll"]
    assert out["after"]["accuracy"] == out["before"]["accuracy"]
    assert main(args) == 0
    assert "fitted top-label" in capsys.readouterr().out


def test_metrics_adds_calibration_and_ece_per_shot_group_when_rows_carry_conf(tmp_path, capsys):
    from modelval.metrics.calibration import expected_calibration_error

    rng = np.random.default_rng(2)
    y = np.repeat(np.arange(4), 100)
    conf = rng.uniform(0.25, 1.0, 400)
    right = rng.uniform(size=400) < conf
    p = np.where(right, y, (y + 1) % 4)
    rows = [{"label": int(a), "pred": int(b), "conf": float(c)} for a, b, c in zip(y, p, conf, strict=True)]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    (tmp_path / "c.json").write_text(json.dumps([500, 100, 20, 5]))
    argv = ["metrics", str(path), "--train-counts", str(tmp_path / "c.json"), "--json", "--bins", "10"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert out["ece"] == pytest.approx(expected_calibration_error(conf, right, 10))
    assert out["ece_ci95"][0] < out["ece"] < out["ece_ci95"][1] and out["n_bins"] == 10
    many, medium, few = (y == 0), (y == 1) | (y == 2), (y == 3)
    for name, mask in (("many", many), ("medium", medium), ("few", few)):
        assert out["ece_by_group"][name] == pytest.approx(expected_calibration_error(conf[mask], right[mask], 10))
    assert main(argv[:-3]) == 0
    assert "ECE many/medium/few" in capsys.readouterr().out
    # Rows without conf: the calibration numbers are null, with the reason.
    no_conf = write_jsonl(tmp_path / "n.jsonl", [{"label": 0, "pred": 0}, {"label": 1, "pred": 0}])
    assert main(["metrics", str(no_conf), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ece"] is None and "conf" in out["null_reasons"]["ece"]


def test_bins_auto_is_the_cube_root_rule_per_file(tmp_path, capsys):
    from modelval.metrics.calibration import expected_calibration_error

    rng = np.random.default_rng(5)
    conf = rng.uniform(0.2, 1.0, 1000)
    right = rng.uniform(size=1000) < conf
    rows = [{"label": 0, "pred": 0 if r else 1, "conf": float(c)} for c, r in zip(conf, right, strict=True)]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    assert main(["calibration", "ece", str(path), "--bins", "auto", "--bootstrap", "0", "--json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["n_bins"] == 10 and record["ece"] == pytest.approx(expected_calibration_error(conf, right, 10))
    out = tmp_path / "r.png"
    assert (
        main(
            ["calibration", "reliability", str(path), "--out", str(out), "--bins", "auto", "--bootstrap", "0", "--json"]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["n_bins"] == 10


def test_the_text_tables_show_the_front_doors_numbers(tmp_path, capsys):
    """The commands format what modelval.api.calibration returns: the text and a notebook agree."""
    from modelval.api.calibration import prediction_metrics, reliability

    path = write_jsonl(tmp_path / "p.jsonl", good_rows())
    figure = tmp_path / "rel.png"
    assert (
        main(["calibration", "reliability", str(path), "--out", str(figure), "--bins", "4", "--bootstrap", "50"]) == 0
    )
    text = capsys.readouterr().out
    report = reliability(path, n_bins=4, bootstrap=50)
    low, high = report.intervals["ece"].low, report.intervals["ece"].high
    assert f"ECE {report.ece:.4f} [{low:.4f}, {high:.4f}], MCE {report.mce:.4f}, 10 rows used" in text
    assert main(["metrics", str(path), "--bins", "4", "--bootstrap", "0"]) == 0
    text = capsys.readouterr().out
    numbers = prediction_metrics(path, n_bins=4, bootstrap=0)
    assert f"  balanced accuracy   {numbers.balanced_accuracy:.4f}\n" in text
    assert f"  ECE                 {numbers.ece:.4f}  (4 bins)" in text and numbers.ece == pytest.approx(0.26)
