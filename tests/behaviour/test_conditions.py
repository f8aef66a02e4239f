"""model-vs-human's 14 further datasets, condition by condition, against the published human raw data.

The independent computation reads each CSV with :mod:`csv`, groups the trials by the condition string as
written, matches two observers inside a condition by an image id of its own (a regular expression for the
ImageNet id, else the last ``_`` part), and takes kappa from ``sklearn.metrics.cohen_kappa_score`` (with
model-vs-human's rule kappa = 1 when two observers agree on every trial). The humans are the observers of
each other: each against the others, and every pair.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

from modelval.behaviour.conditions import (
    accuracy_by_condition,
    compare_by_condition,
    humans_by_condition,
    trials_by_condition,
)
from modelval.behaviour.decisions import write_decisions
from modelval.behaviour.experiments import (
    BENCHMARK_DATASETS,
    EXPERIMENTS,
    MODEL_VS_HUMAN_DATASETS,
    canonical_condition,
    experiment,
)
from modelval.behaviour.humans import load_human_panel
from modelval.behaviour.raw_names import parse_session_name, short_image_name
from modelval.behaviour.trials import dataset_of, read_trials
from modelval.errors import DataError
from reference_packages import reference_names

# Reference packages (imported on first use: a missing one skips only the parity tests that use it)
(cohen_kappa_score,) = reference_names("sklearn.metrics", "cohen_kappa_score")

#: model-vs-human's condition lists (``modelvshuman/datasets/experiments.py``, ``data_conditions``), copied
#: by hand as literals, and its benchmark exclusions (``plotting/plot.py``, ``EXCLUDE_CONDITIONS``).
UPSTREAM_CONDITIONS = {
    "colour": ["cr", "bw"],
    "contrast": ["c100", "c50", "c30", "c15", "c10", "c05", "c03", "c01"],
    "high-pass": ["inf", "3.0", "1.5", "1.0", "0.7", "0.55", "0.45", "0.4"],
    "low-pass": ["0", "1", "3", "5", "7", "10", "15", "40"],
    "phase-scrambling": ["0", "30", "60", "90", "120", "150", "180"],
    "power-equalisation": ["0", "pow"],
    "false-colour": ["True", "False"],
    "rotation": ["0", "90", "180", "270"],
    "eidolonI": ["1-10-10", "2-10-10", "4-10-10", "8-10-10", "16-10-10", "32-10-10", "64-10-10", "128-10-10"],
    "eidolonII": ["1-3-10", "2-3-10", "4-3-10", "8-3-10", "16-3-10", "32-3-10", "64-3-10", "128-3-10"],
    "eidolonIII": ["1-0-10", "2-0-10", "4-0-10", "8-0-10", "16-0-10", "32-0-10", "64-0-10", "128-0-10"],
    "uniform-noise": ["0.0", "0.03", "0.05", "0.1", "0.2", "0.35", "0.6", "0.9"],
}
UPSTREAM_EXCLUDED = {
    "colour": ["cr"],
    "contrast": ["c100", "c03", "c01"],
    "high-pass": ["inf", "0.55", "0.45", "0.4"],
    "low-pass": ["0", "15", "40"],
    "phase-scrambling": ["0", "150", "180"],
    "power-equalisation": ["0"],
    "false-colour": ["True"],
    "rotation": ["0"],
    "eidolonI": ["1-10-10", "64-10-10", "128-10-10"],
    "eidolonII": ["1-3-10", "32-3-10", "64-3-10", "128-3-10"],
    "eidolonIII": ["1-0-10", "16-0-10", "32-0-10", "64-0-10", "128-0-10"],
    "uniform-noise": ["0.0", "0.6", "0.9"],
}
OBSERVERS = {name: 4 for name in UPSTREAM_CONDITIONS} | {"sketch": 7, "stylized": 5}
TRIALS = {name: 1280 for name in UPSTREAM_CONDITIONS} | {
    "phase-scrambling": 1120,
    "power-equalisation": 1120,
    "false-colour": 1120,
    "sketch": 800,
    "stylized": 800,
}

_IMAGENET_ID = re.compile(r"(n0\d{7}_\d+\.\w+)$")


def _image_id(name: str) -> str:
    found = _IMAGENET_ID.search(name)
    return found.group(1) if found else name.split("_")[-1]


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    header = [h.lower() for h in rows[0]]
    return [dict(zip(header, row, strict=True)) for row in rows[1:]]


def _independent(folder: Path) -> dict[str, dict[str, dict[str, tuple[str, bool]]]]:
    """subject -> raw condition -> image id -> (category, correct)."""
    found: dict[str, dict[str, dict[str, tuple[str, bool]]]] = {}
    for path in sorted(folder.glob("*_subject-*.csv")):
        for row in _read(path):
            per = found.setdefault(row["subj"], defaultdict(dict))
            per[row["condition"]][_image_id(row["imagename"])] = (
                row["category"],
                row["object_response"] == row["category"],
            )
    return found


def _kappa(a: np.ndarray, b: np.ndarray) -> float:
    return 1.0 if (a == b).all() else float(cohen_kappa_score(a, b))


def _vectors(data, subject: str, condition: str, images: list[str]) -> np.ndarray:
    return np.array([data[subject][condition][image][1] for image in images])


#: The edit loop recomputes three datasets (a colour one, a parametric distortion, a two-condition set); the slow
#: tier all 14 (each 1-2 s of reading and pairing the humans' trials).
FAST_CONDITION_DATASETS = ("colour", "contrast", "stylized")


@pytest.mark.parametrize(
    "dataset",
    [d if d in FAST_CONDITION_DATASETS else pytest.param(d, marks=pytest.mark.slow) for d in MODEL_VS_HUMAN_DATASETS],
)
def test_human_values_per_condition_equal_an_independent_computation(dataset, model_vs_human_raw_data):
    data = _independent(model_vs_human_raw_data / dataset)
    subjects = sorted(data)
    assert len(subjects) == OBSERVERS[dataset]
    panel = load_human_panel(model_vs_human_raw_data, dataset)
    ours = {name: compare_by_condition(panel.observers[name], panel, subject=name) for name in subjects}
    mutual = humans_by_condition(panel)
    raw_conditions = sorted(data[subjects[0]])
    assert len(raw_conditions) == len(experiment(dataset).conditions)
    for raw in raw_conditions:
        condition = canonical_condition(raw, dataset)
        images = sorted(data[subjects[0]][raw])
        assert all(sorted(data[s][raw]) == images for s in subjects)  # every human saw the same images
        vectors = {s: _vectors(data, s, raw, images) for s in subjects}
        pairs = {(a, b): _kappa(vectors[a], vectors[b]) for a, b in combinations(subjects, 2)}
        row = next(r for r in mutual if r.condition == condition)
        assert row.error_consistency == pytest.approx(np.mean(list(pairs.values())), abs=1e-12)
        assert row.accuracy == pytest.approx(np.mean([v.mean() for v in vectors.values()]), abs=1e-12)
        for subject in subjects:
            mine = next(r for r in ours[subject] if r.condition == condition)
            others = [s for s in subjects if s != subject]
            assert mine.n_trials == len(images)
            assert mine.accuracy == pytest.approx(vectors[subject].mean(), abs=1e-12)
            kappas = [pairs[tuple(sorted((subject, other)))] for other in others]
            assert mine.error_consistency == pytest.approx(np.mean(kappas), abs=1e-12)
            observed = [(vectors[subject] == vectors[other]).mean() for other in others]
            assert mine.observed_consistency == pytest.approx(np.mean(observed), abs=1e-12)
            differences = [(vectors[subject].mean() - vectors[other].mean()) ** 2 for other in others]
            assert mine.accuracy_difference == pytest.approx(np.mean(differences), abs=1e-12)
            assert mine.human_accuracy_mean == pytest.approx(np.mean([vectors[o].mean() for o in others]), abs=1e-12)
            left = [k for pair, k in pairs.items() if subject not in pair]
            assert mine.human_human_kappa_mean == pytest.approx(np.mean(left), abs=1e-12)
            assert mine.humans == len(others)


@pytest.mark.parametrize("dataset", MODEL_VS_HUMAN_DATASETS)
def test_conditions_are_upstreams_in_upstreams_order(dataset, model_vs_human_raw_data):
    entry = experiment(dataset)
    if dataset in UPSTREAM_CONDITIONS:
        assert list(entry.values) == UPSTREAM_CONDITIONS[dataset]
        assert list(entry.excluded) == UPSTREAM_EXCLUDED[dataset]
        assert set(entry.excluded) < set(entry.values)
    else:
        assert entry.values == ("0",) and entry.excluded == ()
    trials = read_trials(next((model_vs_human_raw_data / dataset).glob("*_subject-01_*.csv")))
    groups = trials_by_condition(trials, dataset)
    assert list(groups) == list(entry.values)  # every level has trials, in upstream's order
    assert sum(len(g) for g in groups.values()) == TRIALS[dataset] == entry.images
    assert dataset_of(trials) == dataset  # from the image names' code (and, for the Eidolons, the conditions)


@pytest.mark.parametrize("dataset", [d for d in MODEL_VS_HUMAN_DATASETS if d in UPSTREAM_CONDITIONS])
def test_conditions_are_named_as_pandas_reads_them(dataset, model_vs_human_raw_data):
    """model-vs-human reads the CSVs with pandas (``read_csv``, then ``condition.astype(str)``): ``0.00``
    becomes ``0.0``, ``3`` becomes ``3.0`` next to ``inf``, ``true`` becomes ``True``."""
    pd = pytest.importorskip("pandas")
    path = next((model_vs_human_raw_data / dataset).glob("*_subject-01_*.csv"))
    frame = pd.read_csv(path)
    frame.columns = [c.lower() for c in frame.columns]
    upstream = frame.condition.astype(str).tolist()
    ours = [canonical_condition(t.condition, dataset) for t in read_trials(path)]
    assert ours == upstream


def test_short_image_names_as_upstream():
    # the two cases model-vs-human's helper/plotting_helper.py asserts, and the release naming
    assert short_image_name("0000_cl_s01_bw_boat_40_n02951358_5952.JPEG") == "n02951358_5952.JPEG"
    assert short_image_name("airplane1-bicycle2.png") == "airplane1-bicycle2.png"
    assert short_image_name("dnn/session-1/0571_nse_dnn_0.00_bicycle_10_n03792782_1418.png") == "n03792782_1418.png"
    assert short_image_name("0001_ske_dnn_0_airplane_00_airplane-0001-sketch-0.png") == "airplane-0001-sketch-0.png"
    parsed = parse_session_name("0002_eid_dnn_16-10-10_airplane_10_n02690373_4183.png")
    assert parsed is not None
    assert (parsed.code, parsed.observer, parsed.condition, parsed.category, parsed.short) == (
        "eid",
        "dnn",
        "16-10-10",
        "airplane",
        "n02690373_4183.png",
    )
    assert parse_session_name("oven10.png") is None


def test_canonical_condition_refuses_an_unknown_level():
    assert canonical_condition("0.90", "uniform-noise") == "0.9"
    assert canonical_condition("3", "high-pass") == "3.0"
    assert canonical_condition("true", "false-colour") == "True"
    assert canonical_condition("NaN", "sketch") == "0"  # one condition: whatever is written
    with pytest.raises(DataError, match=r"condition '0.07' is not one of the uniform-noise conditions \(0.0, 0.03"):
        canonical_condition("0.07", "uniform-noise")


def test_the_eidolons_are_told_apart_by_their_conditions(model_vs_human_raw_data):
    for dataset in ("eidolonI", "eidolonII", "eidolonIII"):
        trials = read_trials(next((model_vs_human_raw_data / dataset).glob("*_subject-02_*.csv")))
        assert dataset_of(trials) == dataset


def test_benchmark_order_covers_the_17():
    assert sorted(BENCHMARK_DATASETS) == sorted(EXPERIMENTS)
    assert len(MODEL_VS_HUMAN_DATASETS) == 14


def test_an_observer_missing_a_condition_is_refused(model_vs_human_raw_data):
    panel = load_human_panel(model_vs_human_raw_data, "rotation")
    partial = [t for t in panel.observers["subject-01"] if canonical_condition(t.condition, "rotation") != "90"]
    with pytest.raises(DataError, match=r"no trials in condition\(s\) 90 of rotation"):
        compare_by_condition(partial, panel, subject="subject-01")


def test_written_trials_read_back_with_their_conditions(model_vs_human_raw_data, tmp_path):
    trials = read_trials(next((model_vs_human_raw_data / "contrast").glob("*_subject-03_*.csv")))
    path = write_decisions(tmp_path / "contrast_copy_session_1.csv", trials, subject="copy", as_written=True)
    again = read_trials(path)
    assert [(t.image, t.category, t.response, t.condition) for t in again] == [
        (t.image, t.category, t.response, t.condition) for t in trials
    ]
    assert {t.subject for t in again} == {"copy"}
    assert [r.to_dict() for r in accuracy_by_condition(again, "contrast")] == [
        r.to_dict() for r in accuracy_by_condition(trials, "contrast")
    ]
