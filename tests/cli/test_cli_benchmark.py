"""``modelval benchmark`` and the per-condition output of ``humans``, ``accuracy`` and ``compare``.

The observers are the published human sessions (a human given as the observer is compared with the
others, as model-vs-human compares its humans); the reference values are recomputed here with csv and
scikit-learn, and the ranks with scipy.
"""

from __future__ import annotations

import csv
import io
import json
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

from modelval.behaviour.benchmark import METRICS, average_ranks
from modelval.behaviour.experiments import BENCHMARK_DATASETS, canonical_condition, experiment
from modelval.behaviour.trials import read_trials
from modelval.cli import main
from reference_packages import reference_names

(cohen_kappa_score,) = reference_names("sklearn.metrics", "cohen_kappa_score")
(rankdata,) = reference_names("scipy.stats", "rankdata")

CONDITION_KEYS = {
    "condition",
    "n_trials",
    "accuracy",
    "error_consistency",
    "observed_consistency",
    "human_accuracy_mean",
    "human_human_kappa_mean",
}


@pytest.fixture
def human_data(model_vs_human_raw_data, modelval_reference_dir, monkeypatch):
    """Both publications found without --reference-dir, as a user's settings would find them."""
    return model_vs_human_raw_data


def _session(raw: Path, dataset: str, subject: str) -> Path:
    upstream = experiment(dataset).upstream
    return raw / upstream / f"{upstream}_{subject}_session_1.csv"


def _json(argv, capsys) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _correct(path: Path, dataset: str) -> dict[str, dict[str, bool]]:
    """condition -> image id -> correct, read with csv alone."""
    found: dict[str, dict[str, bool]] = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            name = row["imagename"].split("_")
            image = "_".join(name[-2:]) if name[-2].startswith("n0") else name[-1]
            condition = canonical_condition(row["condition"], dataset)
            found.setdefault(condition, {})[image] = row["object_response"] == row["category"]
    return found


def _kappa(a, b) -> float:
    return 1.0 if (np.asarray(a) == np.asarray(b)).all() else float(cohen_kappa_score(a, b))


def _humans_reference(raw: Path, dataset: str) -> dict[str, float]:
    """The humans' row recomputed: every pair per kept condition, averaged over pairs then conditions."""
    upstream = experiment(dataset).upstream
    files = sorted((raw / upstream).glob(f"{upstream}_subject-*.csv"))
    data = [_correct(path, dataset) for path in files]
    kept = experiment(dataset).benchmark_conditions
    kappas, observed, differences, correct, total = [], [], [], 0, 0
    for condition in kept:
        images = sorted(data[0][condition])
        vectors = [np.array([d[condition][i] for i in images]) for d in data]
        kappas.append(np.mean([_kappa(a, b) for a, b in combinations(vectors, 2)]))
        observed.append(np.mean([(a == b).mean() for a, b in combinations(vectors, 2)]))
        differences.append(np.mean([(a.mean() - b.mean()) ** 2 for a, b in combinations(vectors, 2)]))
        correct += sum(int(v.sum()) for v in vectors)
        total += sum(len(v) for v in vectors)
    return {
        "ood_accuracy": correct / total,
        "accuracy_difference": float(np.mean(differences)),
        "observed_consistency": float(np.mean(observed)),
        "error_consistency": float(np.mean(kappas)),
    }


@pytest.mark.slow  # reads all 17 datasets' human raw data
def test_benchmark_of_two_humans_on_the_17_datasets(human_data, capsys):
    argv = ["benchmark", "--json", "--brain-score"]
    for dataset in BENCHMARK_DATASETS:
        argv += ["--decisions", f"A={_session(human_data, dataset, 'subject-01')}"]
        argv += ["--decisions", f"B={_session(human_data, dataset, 'subject-02')}"]
    payload = _json(argv, capsys)
    assert payload["datasets"] == list(BENCHMARK_DATASETS)
    assert payload["conditions"]["kept"]["uniform-noise"] == ["0.03", "0.05", "0.1", "0.2", "0.35"]
    humans = payload["humans"]["datasets"]
    for dataset in ("contrast", "eidolonIII", "sketch", "false-colour"):
        expected = _humans_reference(human_data, dataset)
        for metric in METRICS:
            assert humans[dataset][metric] == pytest.approx(expected[metric], abs=1e-12), (dataset, metric)
    observers = {entry["observer"]: entry for entry in payload["observers"]}
    assert set(observers) == {"A", "B"} and all(entry["complete"] for entry in observers.values())
    for entry in observers.values():
        for metric in METRICS:
            per = [entry["datasets"][d][metric] for d in BENCHMARK_DATASETS]
            assert entry["aggregate"][metric] == pytest.approx(np.mean(per), abs=1e-12)
        scores = entry["brain_score"]["datasets"]
        for dataset in BENCHMARK_DATASETS:
            raw = abs(entry["datasets"][dataset]["error_consistency"])
            ceiling = abs(humans[dataset]["error_consistency"])
            assert scores[dataset]["ceiled"] == pytest.approx(min(max(raw / ceiling, 0), 1), abs=1e-12)
        assert entry["brain_score"]["mean_ceiled"] == pytest.approx(
            np.mean([scores[d]["ceiled"] for d in BENCHMARK_DATASETS]), abs=1e-12
        )
    # subject-01 against the other humans on contrast: per kept condition, the mean over the other three
    a = _correct(_session(human_data, "contrast", "subject-01"), "contrast")
    others = [_correct(_session(human_data, "contrast", f"subject-0{k}"), "contrast") for k in (2, 3, 4)]
    kappas = []
    for condition in experiment("contrast").benchmark_conditions:
        images = sorted(a[condition])
        mine = [a[condition][i] for i in images]
        kappas.append(np.mean([_kappa(mine, [o[condition][i] for i in images]) for o in others]))
    assert observers["A"]["datasets"]["contrast"]["error_consistency"] == pytest.approx(np.mean(kappas), abs=1e-12)


def test_ranks_are_scipys_average_ranks():
    rng = np.random.default_rng(3)
    values = {f"m{i}": float(v) for i, v in enumerate(rng.choice([0.1, 0.2, 0.3, 0.35], size=9))}
    for higher_first in (True, False):
        ours = average_ranks(values, higher_first=higher_first)
        signed = np.array(list(values.values())) * (-1 if higher_first else 1)
        assert [ours[name] for name in values] == pytest.approx(list(rankdata(signed, method="average")))
    assert average_ranks({"a": 1.0, "b": float("nan")}, higher_first=True) == {"a": 1.0}


def test_markdown_and_csv_print_the_json_numbers(human_data, capsys):
    files = []
    for subject, label in (("subject-01", "first"), ("subject-03", "third")):
        for dataset in ("rotation", "high-pass"):
            files += ["--decisions", f"{label}={_session(human_data, dataset, subject)}"]
    payload = _json(["benchmark", *files, "--json"], capsys)
    assert main(["benchmark", *files, "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    by = {(row["observer"], row["dataset"]): row for row in rows}
    observers = {entry["observer"]: entry for entry in payload["observers"]}
    for label, entry in observers.items():
        for dataset, scores in entry["datasets"].items():
            for metric in METRICS:
                assert float(by[label, dataset][metric]) == pytest.approx(scores[metric], abs=1e-15)
        for metric in METRICS:
            assert float(by[label, "all"][metric]) == pytest.approx(entry["aggregate"][metric], abs=1e-15)
            assert float(by[label, "all"][f"rank_{metric}"]) == entry["ranks"][metric]
        assert float(by[label, "all"]["mean_rank"]) == pytest.approx(entry["ranks"]["mean_rank"])
    assert float(by["humans", "all"]["error_consistency"]) == pytest.approx(
        payload["humans"]["aggregate"]["error_consistency"], abs=1e-15
    )
    assert main(["benchmark", *files]) == 0
    table = capsys.readouterr().out
    first = observers["first"]["aggregate"]
    assert f"| first | {first['ood_accuracy']:.3f} [" in table
    assert f"{first['error_consistency']:.3f}" in table and "humans (each pair of observers; not ranked)" in table


def test_all_conditions_keeps_every_level(human_data, capsys):
    file = _session(human_data, "low-pass", "subject-02")
    kept = _json(["benchmark", "--decisions", str(file), "--json"], capsys)
    every = _json(["benchmark", "--decisions", str(file), "--json", "--all-conditions"], capsys)
    assert kept["conditions"]["kept"]["low-pass"] == ["1", "3", "5", "7", "10"]
    assert every["conditions"]["kept"]["low-pass"] == ["0", "1", "3", "5", "7", "10", "15", "40"]
    trials = read_trials(file)
    assert every["observers"][0]["datasets"]["low-pass"]["ood_accuracy"] == pytest.approx(
        np.mean([t.correct for t in trials])
    )


def test_report_dir_writes_the_table_and_the_line_plots(human_data, tmp_path, capsys):
    argv = ["benchmark", "--report-dir", str(tmp_path / "report")]
    for dataset in ("uniform-noise", "eidolonII", "stylized"):
        argv += ["--decisions", str(_session(human_data, dataset, "subject-04"))]
    assert main(argv) == 0
    capsys.readouterr()
    names = {p.name for p in (tmp_path / "report").iterdir()}
    assert {"benchmark.json", "benchmark.md", "benchmark.csv"} <= names
    assert {"conditions-uniform-noise.png", "conditions-eidolonII.png", "conditions-accuracy.png"} <= names
    assert "conditions-stylized.png" not in names  # one condition: no line to draw
    payload = json.loads((tmp_path / "report" / "benchmark.json").read_text())
    assert str(tmp_path / "report" / "conditions-error-consistency.png") in payload["files"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["benchmark", "--decisions", "missing.csv"], "decision file not found: missing.csv"),
        (["benchmark", "--model", "efficientnet_lite0", "--data-root", "x"], "a data root names one dataset's folder"),
        (["benchmark", "--datasets", "colour,stripes", "--model", "x"], "unknown dataset 'stripes'"),
    ],
)
def test_bad_usage_is_one_line(argv, message, capsys, human_data):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and err[0].startswith("modelval: error:")


def test_humans_json_gains_the_conditions(human_data, capsys):
    payload = _json(
        ["humans", "--decisions", str(_session(human_data, "eidolonI", "subject-03")), "--json", "--bootstrap", "100"],
        capsys,
    )
    assert payload["dataset"] == "eidolonI" and payload["excluded_self"] == "subject-03"
    conditions = payload["conditions"]
    assert [row["condition"] for row in conditions] == list(experiment("eidolonI").values)
    for row in conditions:
        assert row.keys() >= CONDITION_KEYS and row["n_trials"] == 160 and row["humans"] == 3
        low, high = row["error_consistency_ci95"]
        assert low <= row["error_consistency"] <= high
    assert payload["benchmark"]["conditions"] == list(experiment("eidolonI").benchmark_conditions)
    kept = [row for row in conditions if row["in_benchmark"]]
    assert payload["benchmark"]["error_consistency"] == pytest.approx(np.mean([r["error_consistency"] for r in kept]))
    assert main(["humans", "--decisions", str(_session(human_data, "eidolonI", "subject-03")), "--bootstrap", "0"]) == 0
    text = capsys.readouterr().out
    assert "per condition" in text and "pool the 8 conditions" in text
    row = conditions[2]
    assert f"{row['condition']:<10} {row['n_trials']:>6} {row['accuracy']:>8.1%}" in text


def test_accuracy_json_gains_the_conditions(human_data, capsys):
    file = _session(human_data, "phase-scrambling", "subject-02")
    payload = _json(["accuracy", "--decisions", str(file), "--json"], capsys)
    trials = read_trials(file)
    assert payload["dataset"] == "phase-scrambling" and payload["images"] == 1120
    rows = payload["conditions"]
    assert [r["condition"] for r in rows] == ["0", "30", "60", "90", "120", "150", "180"]
    for row in rows:
        mine = [t for t in trials if t.condition == row["condition"]]
        assert (row["n_trials"], row["correct"]) == (len(mine), sum(t.correct for t in mine))
    assert [r["in_benchmark"] for r in rows] == [False, True, True, True, True, False, False]


def test_compare_gains_the_conditions(human_data, capsys):
    a, b = (_session(human_data, "power-equalisation", s) for s in ("subject-01", "subject-04"))
    payload = _json(["compare", str(a), str(b), "--json", "--bootstrap", "50", "--permutations", "200"], capsys)
    rows = payload["conditions"]
    assert [r["condition"] for r in rows] == ["0", "pow"]
    ta, tb = read_trials(a), read_trials(b)
    for row in rows:
        ca = {
            t.image: t.correct for t in ta if canonical_condition(t.condition, "power-equalisation") == row["condition"]
        }
        cb = {
            t.image: t.correct for t in tb if canonical_condition(t.condition, "power-equalisation") == row["condition"]
        }
        images = sorted(ca)
        va, vb = np.array([ca[i] for i in images]), np.array([cb[i] for i in images])
        assert row["accuracy_a"] == pytest.approx(va.mean()) and row["accuracy_b"] == pytest.approx(vb.mean())
        assert row["discordant"] == {"a_only": int((va & ~vb).sum()), "b_only": int((vb & ~va).sum())}
        assert row["error_consistency"] == pytest.approx(cohen_kappa_score(va, vb))


def test_human_figures_with_conditions(human_data, modelval_reference_dir, tmp_path, capsys):
    out = tmp_path / "figures"
    argv = [
        "humans",
        "--report-dir",
        str(out),
        "--bootstrap",
        "50",
        "--decisions",
        f"S3={_session(human_data, 'contrast', 'subject-03')}",
        "--decisions",
        f"S3={_session(human_data, 'sketch', 'subject-03')}",
        "--decisions",
        f"VGG-16={modelval_reference_dir / 'edge-experiment_vgg_session_1.csv'}",
    ]
    assert main(argv) == 0
    capsys.readouterr()
    names = {p.name for p in out.iterdir()}
    assert {"conditions-contrast.png", "human-likeness.png", "error-consistency.png"} <= names
    payload = json.loads((out / "figures.json").read_text())
    rows = payload["conditions"]["S3"]["contrast"]
    assert [r["condition"] for r in rows] == list(experiment("contrast").values)
    assert payload["conditions"]["S3"]["sketch"][0]["n_trials"] == 800
    assert str(out / "conditions-contrast.png") in payload["figures"]
