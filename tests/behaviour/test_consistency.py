"""kappa_max by hand and as a true bound, the observer-by-observer matrix, and 'na' left out of a pair."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelval.behaviour.consistency import error_consistency, kappa_matrix, kappa_max
from modelval.behaviour.decisions import Decision
from modelval.behaviour.humans import load_human_panel
from modelval.behaviour.trials import read_trials
from reference_packages import reference_names

# Reference packages (imported on first use: a missing one skips only the parity tests that use it)
(cohen_kappa_score,) = reference_names("sklearn.metrics", "cohen_kappa_score")


@pytest.mark.parametrize(
    ("p1", "p2", "expected"),
    [
        # c_max = 1 - 0.6 = 0.4; c_exp = 0.2*0.8 + 0.8*0.2 = 0.32; (0.4 - 0.32) / 0.68 = 2/17
        (0.2, 0.8, 2 / 17),
        # the case: a cue-conflict model right on 21% against humans right on 78%
        (0.21, 0.78, (0.43 - (0.21 * 0.78 + 0.79 * 0.22)) / (1 - (0.21 * 0.78 + 0.79 * 0.22))),
        (0.5, 0.5, 1.0),  # equal accuracies: the same errors are possible
        (1.0, 1.0, 1.0),  # c_exp = 1: model-vs-human's c_obs == 1 -> 1
        (0.0, 1.0, 0.0),  # c_max = 0 = c_exp
        (0.7, 0.6, (0.9 - 0.54) / 0.46),
    ],
)
def test_kappa_max_by_hand(p1, p2, expected):
    assert kappa_max(p1, p2) == pytest.approx(expected, abs=1e-12)
    assert kappa_max(p2, p1) == pytest.approx(expected, abs=1e-12)


def test_a_21_percent_model_cannot_reach_the_humans_mutual_kappa():
    assert kappa_max(0.21, 0.78) == pytest.approx(0.1395, abs=1e-4)
    assert kappa_max(0.21, 0.78) < 0.33


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=2, max_size=200))
def test_kappa_never_exceeds_kappa_max(pairs):
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    result = error_consistency(a, b)
    assert result.kappa <= result.kappa_max + 1e-12
    assert result.kappa_max == pytest.approx(kappa_max(a.mean(), b.mean()))


@pytest.mark.parametrize(("n", "k1", "k2"), [(10, 2, 7), (160, 57, 140), (1280, 269, 993)])
def test_kappa_max_is_reached_by_nested_errors(n, k1, k2):
    """The bound is attained: the less accurate observer right only where the other is right."""
    a = np.arange(n) < k1
    b = np.arange(n) < k2
    assert error_consistency(a, b).kappa == pytest.approx(kappa_max(k1 / n, k2 / n), abs=1e-12)
    assert error_consistency(a, b).kappa == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)


def test_matrix_of_all_observers_equals_sklearn(modelval_reference_dir):
    panel = load_human_panel(modelval_reference_dir, "edges")
    observers = {**panel.observers, "vgg": read_trials(modelval_reference_dir / "edge-experiment_vgg_session_1.csv")}
    matrix = kappa_matrix(observers)
    assert matrix.names[-1] == "vgg" and matrix.kappa.shape == (11, 11)
    assert np.allclose(matrix.kappa, matrix.kappa.T) and np.all(np.diag(matrix.kappa) == 1)
    assert np.all(matrix.kappa <= matrix.kappa_max + 1e-12)
    images = sorted(t.image for t in observers["vgg"])
    vectors = {
        name: [next(t.correct for t in trials if t.image == i) for i in images] for name, trials in observers.items()
    }
    for i, a in enumerate(matrix.names):
        for j, b in enumerate(matrix.names):
            if i < j:
                assert matrix.kappa[i, j] == pytest.approx(cohen_kappa_score(vectors[a], vectors[b]), abs=1e-12)
    payload = matrix.to_dict()
    assert payload["observers"] == matrix.names and len(payload["kappa"]) == 11


def test_na_excluded_pairwise(modelval_reference_dir):
    """subject-09 did not answer 30 edge trials; 'exclude' drops them from each pair it is in, and only there."""
    panel = load_human_panel(modelval_reference_dir, "edges")
    nine, three = panel.observers["subject-09"], panel.observers["subject-03"]
    assert sum(t.response == "na" for t in nine) == 30
    matrix = kappa_matrix({"s03": three, "s09": nine}, na_handling="exclude")
    index3 = {t.image: t for t in three}
    kept = [t.image for t in nine if t.response != "na" and index3[t.image].response != "na"]
    by9 = {t.image: t for t in nine}
    expected = cohen_kappa_score([index3[i].correct for i in kept], [by9[i].correct for i in kept])
    assert matrix.kappa[0, 1] == pytest.approx(expected, abs=1e-12)
    wrong = kappa_matrix({"s03": three, "s09": nine})
    assert wrong.kappa[0, 1] != matrix.kappa[0, 1]
    assert matrix.accuracy[1] == pytest.approx(np.mean([t.correct for t in nine if t.response != "na"]))


def test_na_keep_argument_is_checked():
    with pytest.raises(ValueError, match="keep"):
        error_consistency([True, False], [True, True], keep=[True])
    assert math.isnan(kappa_matrix({"a": [Decision("x.png", "cat", "cat", "na")]}, na_handling="exclude").accuracy[0])
