"""The benchmark's cell arithmetic against direct recomputation (scikit-learn's kappa on expanded resamples),
the exact sign-flip p over large grids against the grid-at-once path, and the pairwise test's null."""

from __future__ import annotations

import dataclasses
from itertools import combinations

import numpy as np
import pytest

from modelval.behaviour.benchmark import HIGHER_FIRST, HUMAN_LIKENESS, kept_conditions
from modelval.behaviour.benchmark_cells import _dataset_values, _rank_rows, dataset_cells, table_uncertainty
from modelval.behaviour.humans import load_human_panel
from modelval.behaviour.permutation import _streamed_exact_p, exact_permutation_test
from modelval.behaviour.trials import read_trials
from reference_packages import reference_names

(cohen_kappa_score,) = reference_names("sklearn.metrics", "cohen_kappa_score")
(rankdata,) = reference_names("scipy.stats", "rankdata")


def _kappa(a, b) -> float:
    return 1.0 if (np.asarray(a) == np.asarray(b)).all() else float(cohen_kappa_score(a, b))


def test_one_resample_is_the_table_of_the_resampled_trials_and_humans(modelval_reference_dir):
    panel = load_human_panel(modelval_reference_dir, "edges")
    vgg = read_trials(modelval_reference_dir / "edge-experiment_vgg_session_1.csv")
    cells = dataset_cells({"vgg": vgg}, panel.observers, "edges", kept_conditions("edges"))
    rng = np.random.default_rng(5)
    n, h = cells.conditions[0].humans.shape[1], len(cells.human_names)
    index = rng.integers(0, n, size=n)
    draw = np.array([0, 0, 3, 5, 5, 5, 7, 8, 9, 2])  # repeated humans
    weights = np.bincount(index, minlength=n).astype(float)[None, :]
    found = _dataset_values(cells, weights=[weights], draws=draw[None, :]).values
    cond = cells.conditions[0]
    x = cond.observers["vgg"][0][index]
    humans = [cond.humans[j][index] for j in draw]
    kappa = np.mean([_kappa(x, y) for y in humans])
    observed = np.mean([(x == y).mean() for y in humans])
    difference = np.mean([(x.mean() - y.mean()) ** 2 for y in humans])
    assert found["vgg"][0] == pytest.approx([x.mean(), difference, observed, kappa], abs=1e-12)
    pairs = [(i, j) for i, j in combinations(range(h), 2) if draw[i] != draw[j]]
    human_kappa = np.mean([_kappa(humans[i], humans[j]) for i, j in pairs])
    assert found["humans"][0][3] == pytest.approx(human_kappa, abs=1e-12)
    assert found["humans"][0][0] == pytest.approx(np.mean(humans), abs=1e-12)


def test_ranks_per_resample_are_scipys_average_ranks():
    rng = np.random.default_rng(0)
    values = rng.choice([0.1, 0.2, 0.3], size=(50, 6))
    for higher_first in (True, False):
        ours = _rank_rows(values, higher_first)
        theirs = np.array([rankdata(-row if higher_first else row, method="average") for row in values])
        assert ours == pytest.approx(theirs)


def test_streamed_exact_p_is_the_grid_at_once_p():
    rng = np.random.default_rng(2)
    for _ in range(4):
        kinds_a, kinds_b = rng.integers(0, 3, 300), rng.integers(0, 3, 300)  # neither, texture hit, shape hit
        terms = [(k == 2).astype(float) for k in (kinds_a,)] + [(kinds_a >= 1).astype(float)]
        terms += [(kinds_b == 2).astype(float), (kinds_b >= 1).astype(float)]
        assert _streamed_exact_p(*terms) == pytest.approx(exact_permutation_test(*terms, max_grid=10**8).p, rel=1e-9)


def test_identical_observers_are_not_distinguishable(modelval_reference_dir):
    panel = load_human_panel(modelval_reference_dir, "filled-silhouettes")
    vgg = read_trials(modelval_reference_dir / "silhouette-filled-experiment_vgg_session_1.csv")
    twin = [dataclasses.replace(t, subject="twin") for t in vgg]
    cells = {"filled-silhouettes": dataset_cells({"vgg": vgg, "twin": twin}, panel.observers, "filled-silhouettes",
                                                 kept_conditions("filled-silhouettes"))}  # fmt: skip
    band = table_uncertainty(cells, ["vgg", "twin"], higher_first=HIGHER_FIRST, human_likeness=HUMAN_LIKENESS,
                             n_bootstrap=50, permutations=200)  # fmt: skip
    assert all(t.p == 1.0 and not t.distinguishable for t in band.pairs)
    assert band.rank_intervals["vgg"]["error_consistency"] == (1.5, 1.5)
