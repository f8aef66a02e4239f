"""The coverage of the benchmark's humans' intervals with few human observers, by simulation (issue 42, point 10).

A panel of ``h`` simulated humans answers ``n`` trials in each of 3 conditions: trial ``k`` has a difficulty, human
``i`` an ability and a lapse rate (answering at random), so humans differ in how much they share errors. The
estimand is the expectation of the humans' row's error consistency (mean kappa over pairs of distinct humans) for
panels and trials drawn like these, taken as the mean of the estimate over 2000 simulated panels. An interval
covers when it holds it. ``python tests/behaviour/test_review_42_coverage.py`` prints the table of
docs/uncertainty.md (400 panels per line); the test runs a smaller version.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest

from modelval.behaviour import benchmark_cells
from modelval.behaviour.benchmark import HIGHER_FIRST, HUMAN_LIKENESS
from modelval.behaviour.benchmark_cells import ConditionCells, DatasetCells, _dataset_values, table_uncertainty

CONDITIONS = 3


def _panel(rng: np.random.Generator, h: int, n: int, lapse: float) -> DatasetCells:
    conditions = []
    for c in range(CONDITIONS):
        difficulty = rng.normal(0, 1.5, n)
        ability = rng.normal(0.5, 0.8, h)
        right = rng.random((h, n)) < 1 / (1 + np.exp(-(ability[:, None] - difficulty[None, :])))
        lapses = rng.random((h, n)) < rng.uniform(0, lapse, h)[:, None]
        right = np.where(lapses, rng.random((h, n)) < 0.3, right)
        model = rng.random(n) < 1 / (1 + np.exp(difficulty))
        conditions.append(ConditionCells(str(c), right, np.ones_like(right), {"m": (model, np.ones(n, dtype=bool))}))
    return DatasetCells("simulated", [f"h{i}" for i in range(h)], conditions, {"m": None})


def _plain_draws(rng: np.random.Generator, h: int, n_bootstrap: int, *, pairs: bool = False) -> np.ndarray:
    """The former draw: all h humans, the rows without a pair left to be dropped (here redrawn, the same law)."""
    draws = rng.integers(0, h, size=(n_bootstrap, h))
    while pairs:
        short = np.flatnonzero((draws == draws[:, :1]).all(axis=1))
        if short.size == 0:
            break
        draws[short] = rng.integers(0, h, size=(short.size, h))
    return draws


def coverage(h: int, n: int, lapse: float, *, panels: int, resamples: int, seed: int = 0) -> dict[str, float]:
    """Coverage and mean width of the humans' 95% interval: ``corrected`` (h - 1 drawn) and ``plain`` (h drawn).

    Parameters
    ----------
    h
        Humans per panel.
    n
        Trials per condition.
    lapse
        The largest lapse rate of a human.
    panels
        Simulated panels.
    resamples
        Bootstrap resamples per panel.
    seed
        Seed of the simulation.
    """
    rng = np.random.default_rng(seed)
    truth = np.mean([_dataset_values(_panel(rng, h, n, lapse)).values["humans"][0, 3] for _ in range(2000)])
    found: dict[str, list[tuple[float, float]]] = {"corrected": [], "plain": []}
    for index in range(panels):
        cells = {"simulated": _panel(rng, h, n, lapse)}
        for scheme, intervals in found.items():
            with mock.patch.object(benchmark_cells, "human_draws", _plain_draws) if scheme == "plain" else _nothing():
                band = table_uncertainty(cells, [], higher_first=HIGHER_FIRST, human_likeness=HUMAN_LIKENESS,
                                         n_bootstrap=resamples, seed=index, permutations=0)  # fmt: skip
            intervals.append(band.intervals["humans"]["simulated"]["error_consistency"])
    result = {}
    for scheme, intervals in found.items():
        bounds = np.array(intervals)
        result[scheme] = float(np.mean((bounds[:, 0] <= truth) & (truth <= bounds[:, 1])))
        result[f"{scheme}_width"] = float(np.mean(bounds[:, 1] - bounds[:, 0]))
    return result


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: object) -> None:
        return None


@pytest.mark.slow
def test_the_small_panel_correction_widens_the_humans_interval_and_covers_better():
    """Human-dominated spread (many trials, 4 humans who differ): the plain bootstrap under-covers."""
    found = coverage(4, 1500, 0.9, panels=60, resamples=200)
    assert found["corrected_width"] > 1.05 * found["plain_width"]
    assert found["corrected"] >= found["plain"]


if __name__ == "__main__":
    for h, n, lapse in ((4, 160, 0.8), (4, 1500, 0.9), (10, 160, 0.8), (10, 1500, 0.9)):
        print(h, n, lapse, coverage(h, n, lapse, panels=400, resamples=400))
