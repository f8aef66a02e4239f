"""The calibration door's questions about prediction files (modelval.api.calibration): the same numbers and JSON
as `modelval ece`, `reliability`, `temperature` and `metrics`; the numbers agree with packages we did not write;
bad inputs are one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from modelval.api.calibration import (
    ECEReport,
    PredictionMetricsReport,
    RecalibrationReport,
    ReliabilityReport,
    ece_of_artifacts,
    prediction_metrics,
    recalibrate,
    reliability,
)
from modelval.cli import main
from modelval.errors import DataError, InputValidationError, ModelvalError
from reference_packages import reference, reference_names

(calibration_curve,) = reference_names("sklearn.calibration", "calibration_curve")
(multiclass_calibration_error,) = reference_names(
    "torchmetrics.functional.classification", "multiclass_calibration_error"
)
sk_metrics = reference("sklearn.metrics")
(IsotonicRegression,) = reference_names("sklearn.isotonic", "IsotonicRegression")
netcal_metrics = reference("netcal.metrics")
scipy_optimize = reference("scipy.optimize")


def write_jsonl(path: Path, rows: list[dict | str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def overconfident_logits(n: int, seed: int, classes: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Logits three times too sharp for labels drawn from softmax(z): temperature scaling should find T near 3."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, classes)) * 1.5
    labels = np.array([rng.choice(classes, p=row) for row in softmax(z)])
    return z * 3, labels


def prediction_rows(n: int, seed: int, classes: int = 4, conf: bool = True) -> tuple[list[dict], np.ndarray]:
    """Rows {label, pred, conf} from a random probability matrix (pred = argmax, conf = max), and the matrix."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(classes), n // classes)
    z = rng.normal(size=(len(labels), classes)) * 2.0
    z[np.arange(len(labels)), labels] += 1.5
    probs = softmax(z)
    rows = [
        {"label": int(y), "pred": int(p.argmax()), **({"conf": float(p.max())} if conf else {})}
        for y, p in zip(labels, probs, strict=True)
    ]
    return rows, probs


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Artifact folders: two versions and three seeds of one set, a set without conf, a plain file."""
    root = tmp_path / "preds"
    for seed in (1, 2, 3):
        rows, _ = prediction_rows(200, seed)
        write_jsonl(root / f"preds-flood-lb25-set1-seed{seed}-v00{seed}" / "p.jsonl", rows)
    rows, _ = prediction_rows(120, 7)
    write_jsonl(root / "preds-flood-lb25-set2-seed1-v001" / "p.jsonl", [*rows, "{not json"])
    write_jsonl(root / "preds-flood-lb50-set1-seed1-v001" / "p.jsonl", [{"label": 1, "pred": 1}])
    write_jsonl(root / "loose.jsonl", prediction_rows(80, 9)[0])
    return root


def cli_json(capsys, argv: list[str]) -> tuple[str, object]:
    assert main(argv) == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    return text, json.loads(text)


# --- each function prints what its command prints ----------------------------------------------------------


@pytest.mark.parametrize(
    "options", [[], ["--adaptive", "--bins", "6"], ["--convention", "torchmetrics", "--bins", "auto"]]
)
def test_ece_of_artifacts_is_the_commands_json(tree, capsys, options):
    argv = ["calibration", "ece", str(tree), "--bootstrap", "40", "--seed", "5", "--json", *options]
    text, _ = cli_json(capsys, argv)
    settings = {"--adaptive": ("adaptive", True), "--convention": ("convention", "torchmetrics")}
    kwargs = dict(settings[o] for o in options if o in settings)
    if "--bins" in options:
        value = options[options.index("--bins") + 1]
        kwargs["n_bins"] = value if value == "auto" else int(value)
    report = ece_of_artifacts(tree, bootstrap=40, seed=5, **kwargs)
    assert isinstance(report, ECEReport)
    assert report.to_json() + "\n" == text  # byte for byte
    assert [r["skipped"] for r in report.to_list()].count(False) == len(report.evaluated) == 3


def test_ece_of_artifacts_seed_summary_is_the_commands_csv(tree, tmp_path, capsys):
    table_csv, seeds_csv = tmp_path / "table.csv", tmp_path / "table.seeds.csv"  # --csv FILE writes both
    assert main(["calibration", "ece", str(tree), "--bootstrap", "0", "--csv", str(table_csv)]) == 0
    text = capsys.readouterr().out
    assert f"wrote the (event, label budget) x set table to {table_csv}" in text
    assert f"wrote the per-seed summary (mean, sd over seeds) to {seeds_csv}" in text
    from modelval.metrics.artifacts import write_seed_summary_csv, write_summary_csv

    per_seed = ece_of_artifacts(tree, bootstrap=0, per_seed=True)
    assert write_seed_summary_csv(per_seed.seed_summary, tmp_path / "s2.csv").read_text() == seeds_csv.read_text()
    winners = ece_of_artifacts(tree, bootstrap=0)
    assert write_summary_csv(winners.summary, tmp_path / "t2.csv").read_text() == table_csv.read_text()
    (row,) = [r for r in per_seed.seed_summary.rows if r["set"] == 1]
    values = [r.ece for r in per_seed.records if r.key and r.key.set == 1 and r.key.label_budget == 25]
    assert row["n_seeds"] == 3 and row["ece_sd"] == pytest.approx(np.std(values, ddof=1))
    with pytest.raises(InputValidationError, match="per_seed=True"):
        _ = winners.seed_summary  # one seed per set: an sd over seeds would be no sd
    summary = winners.to_dict()["summary"]
    assert summary["mean_of_sets"] == pytest.approx(winners.summary.mean_of_sets)


@pytest.mark.parametrize("adaptive", [False, True])
def test_reliability_is_the_commands_json_and_writes_the_same_files(tmp_path, capsys, adaptive):
    rows, _ = prediction_rows(400, 3)
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    figure, folder = tmp_path / "cli" / "r.png", tmp_path / "cli-dir"
    argv = ["calibration", "reliability", str(path), "--out", str(figure), "--report-dir", str(folder), "--bins", "10"]
    argv += ["--bootstrap", "60", "--stratify", "--json", *(["--adaptive"] if adaptive else [])]
    text, cli = cli_json(capsys, argv)
    cli_record = (folder / "reliability.json").read_text()
    report = reliability(
        path, n_bins=10, adaptive=adaptive, bootstrap=60, stratify=True, figure=figure, report_dir=folder
    )
    assert isinstance(report, ReliabilityReport)
    assert report.to_json() + "\n" == text
    assert (folder / "reliability.json").read_text() == cli_record  # the file the command writes, the same bytes
    assert report.written == [figure, folder / "p-reliability.png", folder / "reliability.json"]
    assert all(p.is_file() for p in report.written)
    assert cli["ece"] == report.ece and report.figure == figure


def test_reliability_without_a_figure_writes_nothing(tmp_path):
    rows, _ = prediction_rows(100, 4)
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    report = reliability(path, bootstrap=0)
    assert report.written == [] and report.to_dict()["out"] is None and report.intervals is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jsonl"]


@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("temperature", []),
        ("vector", []),
        ("matrix", ["--odir", "0.5", "0.1"]),
        ("histogram", ["--bins", "10"]),
        ("isotonic", []),
    ],
)
def test_recalibrate_is_the_commands_json(tmp_path, capsys, method, options):
    for name, seed in (("val", 0), ("test", 1)):
        z, y = overconfident_logits(600, seed)
        np.savez(tmp_path / f"{name}.npz", logits=z, labels=y)
    figure = tmp_path / "t.png"
    argv = ["calibration", "temperature", "--val", str(tmp_path / "val.npz"), "--test", str(tmp_path / "test.npz")]
    argv += ["--method", method]
    text, cli = cli_json(capsys, [*argv, *options, "--json", "--out", str(figure)])
    odir = (0.5, 0.1) if "--odir" in options else None
    n_bins = 10 if "--bins" in options else 15
    report = recalibrate(
        tmp_path / "val.npz", tmp_path / "test.npz", method=method, odir=odir, n_bins=n_bins, figure=figure
    )
    assert isinstance(report, RecalibrationReport)
    assert report.to_json() + "\n" == text
    assert report.val_examples == report.test_examples == 600
    assert report.top_label is (method in ("histogram", "isotonic"))
    # arrays in memory give the same numbers as the files
    in_memory = recalibrate(overconfident_logits(600, 0), overconfident_logits(600, 1), method=method, odir=odir,
                            n_bins=n_bins)  # fmt: skip
    assert in_memory.to_dict() == {k: v for k, v in report.to_dict().items() if k != "written"}
    assert ("written" in cli) is (method in ("temperature", "vector", "matrix"))


@pytest.mark.parametrize("bootstrap", [0, 80])
def test_prediction_metrics_is_the_commands_json(tmp_path, capsys, bootstrap):
    rows, _ = prediction_rows(400, 5)
    path = write_jsonl(tmp_path / "p.jsonl", [*rows, "{bad", json.dumps({"label": 0, "pred": 1, "conf": 3})])
    weights, counts = [500, 100, 20, 5], [500, 100, 20, 5]
    (tmp_path / "w.json").write_text(json.dumps({str(i): w for i, w in enumerate(weights)}))
    (tmp_path / "c.json").write_text(json.dumps(counts))
    argv = [
        "metrics",
        str(path),
        "--class-weights",
        str(tmp_path / "w.json"),
        "--train-counts",
        str(tmp_path / "c.json"),
    ]
    argv += ["--bootstrap", str(bootstrap), "--stratify", "--bins", "10", "--json"]
    text, _ = cli_json(capsys, argv)
    report = prediction_metrics(
        path, class_weights=tmp_path / "w.json", train_counts=tmp_path / "c.json", bootstrap=bootstrap,
        stratify=True, n_bins=10,
    )  # fmt: skip
    assert isinstance(report, PredictionMetricsReport)
    assert report.to_json() + "\n" == text
    # class weights and training counts given as values give the same numbers as the files
    values = prediction_metrics(path, class_weights=weights, train_counts=counts, bootstrap=bootstrap, stratify=True,
                                n_bins=10)  # fmt: skip
    assert values.to_json() == report.to_json()
    # the row with conf 3 counts for accuracy but leaves the calibration numbers undefined, with the reason
    assert report.ece is None and report.rows_used == 401 and report.rows_dropped == 1
    assert "only 400 of 401 rows carry a valid conf" in json.loads(report.to_json())["null_reasons"]["ece"]


# --- against packages we did not write ----------------------------------------------------------------------


def test_ece_of_artifacts_equals_netcal_and_torchmetrics(tmp_path):
    rows, probs = prediction_rows(2000, 11, classes=5)
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    conf = np.array([r["conf"] for r in rows])
    labels = np.array([r["label"] for r in rows])
    correct = (np.array([r["pred"] for r in rows]) == labels).astype(np.int64)
    (default,) = ece_of_artifacts(path, n_bins=15, bootstrap=0).records
    # netcal's positive-class ECE of (conf, correct) is the top-1 ECE; continuous conf, so [lo, hi) = (lo, hi]
    assert default.ece == pytest.approx(netcal_metrics.ECE(15).measure(conf, correct), abs=1e-12)
    assert default.mce == pytest.approx(netcal_metrics.MCE(15).measure(conf, correct), abs=1e-12)
    assert default.accuracy == pytest.approx(sk_metrics.accuracy_score(labels, probs.argmax(1)))
    (tm,) = ece_of_artifacts(path, n_bins=15, convention="torchmetrics", bootstrap=0).records
    reference_probs, target = torch.tensor(probs), torch.tensor(labels)
    for name, norm in (("ece", "l1"), ("mce", "max"), ("rms", "l2")):
        expected = float(multiclass_calibration_error(reference_probs, target, 5, n_bins=15, norm=norm))
        # torchmetrics' multiclass path bins and sums in float32: equal to its rounding
        assert getattr(tm, name) == pytest.approx(expected, abs=2e-6), name


@pytest.mark.parametrize(("adaptive", "strategy"), [(False, "uniform"), (True, "quantile")])
def test_reliability_bins_equal_sklearn_calibration_curve(tmp_path, adaptive, strategy):
    rows, _ = prediction_rows(1000, 12)
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    report = reliability(path, n_bins=10, adaptive=adaptive, bootstrap=0)
    conf = np.array([r["conf"] for r in rows])
    correct = np.array([r["label"] == r["pred"] for r in rows], dtype=np.int64)
    prob_true, prob_pred = calibration_curve(correct, conf, n_bins=10, strategy=strategy)
    nonempty = report.bins.counts > 0
    np.testing.assert_allclose(report.bins.accuracy[nonempty], prob_true, rtol=0, atol=1e-12)
    np.testing.assert_allclose(report.bins.confidence[nonempty], prob_pred, rtol=0, atol=1e-12)


def test_recalibrate_equals_torch_and_scipy_and_sklearn():
    val, test = overconfident_logits(1500, 0), overconfident_logits(1500, 1)
    report = recalibrate(val, test, n_bins=15)
    z_val, y_val = torch.tensor(val[0]), torch.tensor(val[1])
    best = scipy_optimize.minimize_scalar(
        lambda t: torch.nn.functional.cross_entropy(z_val / t, y_val).item(),
        bounds=(0.05, 50.0),
        method="bounded",
        options={"xatol": 1e-10},
    )
    assert report.temperature == pytest.approx(best.x, rel=1e-6) and 2.5 < report.temperature < 3.5
    z_test, y_test = torch.tensor(test[0]), torch.tensor(test[1])
    for scores, t in ((report.before, 1.0), (report.after, report.temperature)):
        assert scores["nll"] == pytest.approx(torch.nn.functional.cross_entropy(z_test / t, y_test).item(), rel=1e-12)
        probs = softmax(test[0] / t)
        brier = sk_metrics.brier_score_loss(test[1], probs, labels=range(5), scale_by_half=False)
        assert scores["brier"] == pytest.approx(brier, rel=1e-10)
        tm = float(multiclass_calibration_error(torch.tensor(probs), y_test, 5, n_bins=15))
        assert scores["ece"] == pytest.approx(tm, abs=2e-6)
        assert scores["accuracy"] == pytest.approx(sk_metrics.accuracy_score(test[1], probs.argmax(1)))
    assert report.after["ece"] < report.before["ece"] / 2
    # isotonic regression of the top-1 confidence: scikit-learn's, fitted on the validation pairs
    isotonic = recalibrate(val, test, method="isotonic", n_bins=15)
    val_p, test_p = softmax(val[0]), softmax(test[0])
    fitted = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(
        val_p.max(1), (val_p.argmax(1) == val[1]).astype(float)
    )
    calibrated = fitted.predict(test_p.max(1))
    correct = (test_p.argmax(1) == test[1]).astype(np.int64)
    assert isotonic.after["ece"] == pytest.approx(netcal_metrics.ECE(15).measure(calibrated, correct), abs=1e-9)


def test_prediction_metrics_equal_sklearn(tmp_path):
    rows, _ = prediction_rows(400, 13, classes=4)
    rows = [r for i, r in enumerate(rows) if not (r["label"] == 3 and i % 3)]  # a rare class
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    y = np.array([r["label"] for r in rows])
    p = np.array([r["pred"] for r in rows])
    weights, counts = np.array([500.0, 100, 20, 5]), [500, 100, 20, 5]
    report = prediction_metrics(path, class_weights=weights, train_counts=counts, bootstrap=0)
    recall = sk_metrics.recall_score(y, p, average=None)
    assert report.accuracy == pytest.approx(sk_metrics.accuracy_score(y, p))
    assert report.balanced_accuracy == pytest.approx(sk_metrics.balanced_accuracy_score(y, p))
    assert report.reweighted_accuracy == pytest.approx(recall @ weights / weights.sum())
    expected_shots = {"many": recall[0], "medium": recall[1:3].mean(), "few": recall[3]}
    assert report.shot_accuracy == pytest.approx(expected_shots)
    for average in ("macro", "micro", "weighted"):
        precision, rec, f1, _ = sk_metrics.precision_recall_fscore_support(y, p, average=average, zero_division=0)
        assert report.averages[average] == pytest.approx({"precision": precision, "recall": rec, "f1": f1})
    precision, rec, f1, support = sk_metrics.precision_recall_fscore_support(y, p, zero_division=0)
    assert [c["support"] for c in report.per_class] == support.tolist()
    assert [c["f1"] for c in report.per_class] == pytest.approx(f1.tolist())
    assert report.confusion_matrix.tolist() == sk_metrics.confusion_matrix(y, p).tolist()
    conf = np.array([r["conf"] for r in rows])
    assert report.ece == pytest.approx(netcal_metrics.ECE(15).measure(conf, (y == p).astype(np.int64)), abs=1e-12)


# --- bad inputs are one line --------------------------------------------------------------------------------


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert isinstance(error.value, ModelvalError) and "\n" not in message
    return message


def test_bad_inputs_are_one_line_errors(tmp_path):
    good = write_jsonl(tmp_path / "p.jsonl", prediction_rows(40, 1)[0])
    no_conf = write_jsonl(tmp_path / "n.jsonl", [{"label": 0, "pred": 0}])
    huge = write_jsonl(tmp_path / "h.jsonl", [{"label": 100000, "pred": 0}])
    with pytest.raises(DataError) as error:
        reliability(no_conf)
    assert "cannot draw a reliability diagram: no 'conf' key" in one_line(error)
    with pytest.raises(DataError) as error:
        ece_of_artifacts([tmp_path / "missing"])
    assert "no such file or directory" in one_line(error)
    with pytest.raises(DataError) as error:
        prediction_metrics(huge)
    assert "100001 classes" in one_line(error)
    with pytest.raises(DataError) as error:
        prediction_metrics(good, num_classes=4, train_counts=[1, 2, 3])
    assert one_line(error) == "train_counts: 3 training counts but 4 classes"
    with pytest.raises(InputValidationError) as error:
        prediction_metrics(good, class_weights=[1, -1, 1, 1])
    assert "negative at class(es) [1]" in one_line(error)
    with pytest.raises(DataError) as error:
        recalibrate(overconfident_logits(20, 0, classes=5), overconfident_logits(20, 1, classes=3))
    assert one_line(error) == "--val has 5 classes but --test has 3"
    for call, match in [
        (lambda: reliability(good, n_bins=0), "n_bins must be a positive integer or 'auto'"),
        (lambda: ece_of_artifacts(good, bootstrap=-1), "bootstrap is a number of resamples"),
        (lambda: ece_of_artifacts(good, convention="sklearn"), "convention must be one of"),
        (lambda: recalibrate((np.zeros((2, 2)), [0, 1]), (np.zeros((2, 2)), [0, 1]), n_bins="auto"), "positive"),
        (lambda: recalibrate((np.zeros((2, 2)), [0, 1]), (np.zeros((2, 2)), [0, 1]), method="platt"), "platt"),
        (lambda: prediction_metrics(good, num_classes=0), "num_classes must be a positive integer"),
    ]:
        with pytest.raises(InputValidationError, match=match) as error:
            call()
        one_line(error)
