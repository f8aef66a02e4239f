"""The trial planner for error consistency: its variance against Fleiss, Cohen & Everitt's null variance and a
simulation, its trial counts against simulated power, and Klein et al.'s example (kappa 0.1 at accuracies 0.7
and 0.75 is significant with 1000 trials)."""

from __future__ import annotations

import numpy as np
import pytest

from modelval.behaviour.consistency import kappa_cells, kappa_variance, trials_for_kappa_difference

Z = 1.959963984540054


def _kappa(counts: np.ndarray) -> np.ndarray:
    n = counts.sum(axis=-1)
    both, only_1, only_2, neither = (counts[..., k] / n for k in range(4))
    p1, p2 = both + only_1, both + only_2
    expected = p1 * p2 + (1 - p1) * (1 - p2)
    return (both + neither - expected) / (1 - expected)


def test_the_variance_at_kappa_zero_is_fleiss_cohen_everitts():
    for p1, p2 in ((0.7, 0.75), (0.9, 0.5), (0.2, 0.6)):
        a, b = np.array([p1, 1 - p1]), np.array([p2, 1 - p2])
        pe = float(a @ b)
        fleiss = (pe + pe**2 - float(np.sum(a * b * (a + b)))) / (1 - pe) ** 2
        assert kappa_variance(p1, p2, 0.0) == pytest.approx(fleiss, rel=1e-6)


def test_the_variance_and_the_planned_power_hold_in_simulation():
    rng = np.random.default_rng(0)
    for p1, p2, kappa in ((0.7, 0.75, 0.1), (0.9, 0.5, 0.2)):
        counts = rng.multinomial(800, kappa_cells(p1, p2, kappa), size=40_000)
        assert np.var(_kappa(counts)) * 800 == pytest.approx(kappa_variance(p1, p2, kappa), rel=0.03)
    plan = trials_for_kappa_difference(0.7, 0.75, 0.1, 0.1, power=0.8)
    n = plan.trials
    a = _kappa(rng.multinomial(n, kappa_cells(0.7, 0.75, 0.1), size=40_000))
    b = _kappa(rng.multinomial(n, kappa_cells(0.7, 0.75, 0.2), size=40_000))
    se = np.sqrt((kappa_variance(0.7, 0.75, 0.1) + kappa_variance(0.7, 0.75, 0.2)) / n)
    assert np.mean(np.abs(b - a) / se > Z) == pytest.approx(0.8, abs=0.015)
    assert plan.trials == 1687


def test_klein_et_als_example():
    """kappa 0.1 between observers of accuracy 0.7 and 0.75 on 1000 trials is significant (their notebook)."""
    plan = trials_for_kappa_difference(0.7, 0.75, 0.0, 0.1, design="one-sample")
    assert plan.trials == 791 and plan.trials < 1000
    rng = np.random.default_rng(1)
    kappas = _kappa(rng.multinomial(1000, kappa_cells(0.7, 0.75, 0.1), size=40_000))
    power = np.mean(np.abs(kappas) / np.sqrt(kappa_variance(0.7, 0.75, 0.0) / 1000) > Z)
    assert 0.86 < power < 0.90
    with pytest.raises(ValueError, match="kappa_max"):
        kappa_cells(0.9, 0.3, 0.9)
