"""Issue 42, points 9-11: ranks of observers with an undefined measure, the resamples the humans' intervals use
and their small-panel correction, Holm p-values at the Monte Carlo floor, and the per-condition intervals."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from modelval.behaviour.benchmark import benchmark_table
from modelval.behaviour.benchmark_cells import ConditionCells, DatasetCells, _dataset_values, human_draws
from modelval.behaviour.benchmark_text import benchmark_markdown
from modelval.behaviour.humans import load_human_panel
from modelval.behaviour.permutation import holm, holm_bounds
from modelval.behaviour.trials import read_trials
from modelval.jsonio import strict

VGG_EDGES = "edge-experiment_vgg_session_1.csv"
RESNET = "style-transfer-512-nomask-experiment_resnet50_session-1.csv"
VGG16 = "style-transfer-512-nomask-experiment_vgg16_session-1.csv"


@pytest.fixture
def edges(modelval_reference_dir):
    panel = load_human_panel(modelval_reference_dir, "edges")
    vgg = read_trials(modelval_reference_dir / VGG_EDGES)
    perfect = [dataclasses.replace(t, subject="perfect", response=t.category) for t in vgg]
    return panel, vgg, perfect


# -- point 9: an observer with an undefined error consistency is not ranked as if its missing cells did not exist


def test_an_always_right_observer_gets_no_mean_rank_and_the_others_rank_among_the_comparable(edges):
    panel, vgg, perfect = edges
    table = benchmark_table({"perfect": {"edges": perfect}, "vgg": {"edges": vgg}}, {"edges": panel},
                            degenerate_kappa="nan", n_bootstrap=40)  # fmt: skip
    ranks = table.ranks()
    # before: vgg's mean rank was (2 + 2 + 1) / 3 = 1.67, its error-consistency rank among itself alone
    assert ranks["vgg"]["mean_rank"] == 1.0
    assert all(math.isnan(ranks["perfect"][m]) for m in ("error_consistency", "accuracy_difference", "mean_rank"))
    assert ranks["perfect"]["ood_accuracy"] == 1.0  # OOD accuracy is defined for both: still ranked
    reason = table.unranked()["perfect"]
    assert "error consistency undefined on edges" in reason and "degenerate" in reason
    text = benchmark_markdown(table)
    assert text.index("| vgg |") < text.index("| perfect |")  # the unranked observer is listed last
    assert "not ranked: perfect: no human-likeness ranks or mean rank" in text
    payload = json.loads(json.dumps(strict(table.to_dict())))
    entry = {e["observer"]: e for e in payload["observers"]}
    assert entry["perfect"]["unranked"] == reason and entry["perfect"]["ranks"]["mean_rank"] is None
    assert entry["vgg"]["unranked"] is None
    band = table.uncertainty
    assert band is not None and band.rank_intervals["vgg"]["mean_rank"] == (1.0, 1.0)
    assert all(math.isnan(v) for v in band.rank_intervals["perfect"]["mean_rank"])


# -- point 10: every resample used and reported; h - 1 of h humans drawn


def test_human_draws_keep_every_resample_and_draw_one_fewer():
    rng = np.random.default_rng(0)
    draws = human_draws(rng, 4, 5000, pairs=True)  # the humans' row: redrawn until it has a pair
    assert draws.shape == (5000, 3)
    assert all(len(set(row)) >= 2 for row in draws.tolist())
    assert human_draws(rng, 4, 5000).shape == (5000, 3)
    assert human_draws(rng, 2, 10).shape == (10, 2)  # a pair of humans: both, there is no smaller panel


def _panel(h: int, n: int, rng: np.random.Generator) -> DatasetCells:
    difficulty = rng.normal(0, 1.5, n)
    ability = rng.normal(0.5, 1.0, h)
    humans = rng.random((h, n)) < 1 / (1 + np.exp(-(ability[:, None] - difficulty[None, :])))
    model = rng.random(n) < 1 / (1 + np.exp(difficulty))
    cond = ConditionCells("0", humans, np.ones_like(humans), {"m": (model, np.ones(n, dtype=bool))})
    return DatasetCells("edges", [f"h{i}" for i in range(h)], [cond], {"m": None})


def test_the_small_panel_correction_gives_the_unbiased_variance_of_a_mean_over_humans():
    """The trials held fixed, the observer's mean kappa over 4 humans is a mean of 4 numbers: the bootstrap's
    variance must be s^2/4 (s^2 with ddof 1), by hand from the 4 kappas; drawing all 4 gives 3/4 of it."""
    rng = np.random.default_rng(7)
    cells = _panel(4, 300, rng)
    per_human = _dataset_values(cells, weights=[np.ones((4, 300))], draws=np.arange(4)[:, None]).values["m"][:, 3]
    target = np.var(per_human, ddof=1) / 4
    fixed = [np.ones((20000, 300))]
    corrected = _dataset_values(cells, weights=fixed, draws=human_draws(rng, 4, 20000)).values["m"][:, 3]
    plain = _dataset_values(cells, weights=fixed, draws=rng.integers(0, 4, (20000, 4))).values["m"][:, 3]
    assert np.var(corrected) == pytest.approx(target, rel=0.05)
    assert np.var(plain) == pytest.approx(0.75 * target, rel=0.05)


def test_the_table_reports_the_resamples_each_interval_used(edges):
    panel, vgg, perfect = edges
    table = benchmark_table({"vgg": {"edges": vgg}, "perfect": {"edges": perfect}}, {"edges": panel},
                            degenerate_kappa="nan", n_bootstrap=60)  # fmt: skip
    band = table.to_dict()["uncertainty"]
    assert band["resamples_used"]["humans"]["aggregate"]["error_consistency"] == 60  # type: ignore[index]
    assert band["resamples_used"]["perfect"]["edges"]["error_consistency"] == 0  # type: ignore[index]
    assert band["human_draws"] == {"edges": {"panel": 10, "drawn": 9}}  # type: ignore[index]
    text = benchmark_markdown(table)
    assert "perfect edges error consistency: 0 of 60" in text and "h - 1 of each panel's h human" in text


# -- point 11: Holm at the floor is a bound; per-condition intervals are the table's own


def test_holm_bounds_by_hand():
    floor = 2 / 201
    p = {"a": floor, "b": 0.04, "c": 0.5}
    assert holm(p) == pytest.approx({"a": 3 * floor, "b": 0.08, "c": 0.5})
    assert holm_bounds(p, {"a": True}) == {"a": True, "b": False, "c": False}
    both = {"a": floor, "b": floor, "c": 0.5}
    assert holm_bounds(both, {"a": True, "b": True}) == {"a": True, "b": True, "c": False}


def test_a_holm_p_at_the_floor_prints_as_a_bound(modelval_reference_dir):
    panel = load_human_panel(modelval_reference_dir, "cue-conflict")
    observers = {label: {"cue-conflict": read_trials(modelval_reference_dir / name)}
                 for label, name in (("ResNet-50", RESNET), ("VGG-16", VGG16))}  # fmt: skip
    table = benchmark_table(observers, {"cue-conflict": panel}, permutations=200)
    assert table.uncertainty is not None
    test = next(t for t in table.uncertainty.pairs if t.measure == "error_consistency")
    assert test.at_floor and test.p_holm_is_bound and test.to_dict()["p_holm_is_bound"] is True
    assert f"Holm p ≤ {test.p_holm:.2g}" in benchmark_markdown(table)


def test_the_shape_bias_interval_column_says_whose_it_is():
    from modelval.judgement.rows import BREAKDOWN_COLUMNS

    assert "95% CI" not in BREAKDOWN_COLUMNS and BREAKDOWN_COLUMNS[-1] == "Shape bias 95% CI"


def test_per_condition_intervals_are_the_tables_or_say_why_not(edges):
    panel, vgg, _ = edges
    table = benchmark_table({"vgg": {"edges": vgg}}, {"edges": panel}, n_bootstrap=60)
    scores = table.observers["vgg"]["edges"]
    kept = next(row for row in scores.per_condition if row.condition == "0")
    low, high = kept.ci95  # type: ignore[union-attr]
    assert low < kept.error_consistency < high
    assert (low, high) == table.uncertainty.condition_intervals["vgg"]["edges"]["0"]  # type: ignore[union-attr]
    plain = benchmark_table({"vgg": {"edges": vgg}}, {"edges": panel})
    row = strict(plain.observers["vgg"]["edges"].per_condition[0].to_dict())
    assert row["error_consistency_ci95"] == [None, None]
    assert "no bootstrap" in row["null_reasons"]["error_consistency_ci95[0]"]
