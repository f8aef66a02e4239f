"""The benchmark table's uncertainty as data: intervals, resamples used, rank intervals and the ranking rule.

:mod:`modelval.behaviour.benchmark_cells` computes them (its module doc says how); this module holds what they are
and how observers are ranked, in the table and in each resample alike.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from modelval.behaviour.benchmark_pairs import PAIRED_TEST, PairTest

__all__ = ["HUMAN_RANKING", "MEASURES", "RESAMPLING", "TableUncertainty", "rank_table"]

MEASURES: tuple[str, ...] = ("ood_accuracy", "accuracy_difference", "observed_consistency", "error_consistency")
RESAMPLING = (
    "percentile bootstrap: the trials resampled with replacement within each condition (the same draw for every "
    "observer and human, so trials stay paired), and the human observers resampled: h - 1 of a dataset's h drawn "
    "with replacement "
    "(the small-panel correction: the bootstrap variance of a mean over the humans is then the unbiased s^2/h, where "
    "drawing h gives (h - 1)/h of it; panels of 2 draw both); the humans' row from its own such draw, redrawn "
    "until it has 2 distinct humans (pairs of two draws of the same human are left out); each resample recomputes "
    "the whole table"
)
HUMAN_RANKING = (
    "the human-likeness ranks (accuracy difference, observed and error consistency, mean rank) are among the "
    "observers with all three defined (in the table and in each resample); an observer with one undefined (with "
    "--degenerate-kappa nan: always right or always wrong in every kept condition of a dataset) gets none of them, "
    "and 'unranked' says why"
)


def _rank_rows(values: np.ndarray, higher_first: bool) -> np.ndarray:
    """Average ranks along the last axis (1 = best; ties share their mean rank; NaN gets no rank)."""
    v = values if higher_first else -values
    better = (v[..., None, :] > v[..., :, None]).sum(axis=-1)
    equal = (v[..., None, :] == v[..., :, None]).sum(axis=-1)
    ranks = 1.0 + better + (equal - 1) / 2.0
    return np.where(np.isnan(values), np.nan, ranks)


def rank_table(
    values: np.ndarray, higher_first: Mapping[str, bool], human_likeness: Sequence[str]
) -> dict[str, np.ndarray]:
    """Per measure of :data:`MEASURES` and ``"mean_rank"``: the ranks of ``values`` ``(..., observers, 4)``.

    OOD accuracy ranks every observer that has it; the human-likeness ranks and their mean only the observers
    with all of ``human_likeness`` defined (:data:`HUMAN_RANKING`), so no mean rank mixes ranks among different
    sets of observers.

    Parameters
    ----------
    values
        ``(..., observers, 4)`` in :data:`MEASURES` order.
    higher_first
        Measure -> True when a higher value ranks first.
    human_likeness
        The measures of the mean rank.
    """
    columns = [MEASURES.index(m) for m in human_likeness]
    comparable = ~np.isnan(values[..., columns]).any(axis=-1)  # (..., observers)
    ranks: dict[str, np.ndarray] = {}
    for k, measure in enumerate(MEASURES):
        column = values[..., k] if measure not in human_likeness else np.where(comparable, values[..., k], np.nan)
        ranks[measure] = _rank_rows(column, higher_first[measure])
    ranks["mean_rank"] = np.mean(np.stack([ranks[m] for m in human_likeness]), axis=0)
    return ranks


@dataclass
class TableUncertainty:
    """Intervals of every value, rank intervals, and which observers the data tell apart."""

    n_bootstrap: int
    seed: int
    permutations: int
    #: label -> dataset (or "aggregate") -> measure -> (low, high); "humans" included
    intervals: dict[str, dict[str, dict[str, tuple[float, float]]]]
    #: label -> measure (or "mean_rank") -> (low, high), complete observers only
    rank_intervals: dict[str, dict[str, tuple[float, float]]]
    pairs: list[PairTest]
    #: label -> dataset (or "aggregate") -> measure -> resamples where the value was defined (those the interval used)
    used: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    #: label -> dataset -> kept condition -> (low, high) of the mean kappa (the per-condition rows' intervals)
    condition_intervals: dict[str, dict[str, dict[str, tuple[float, float]]]] = field(default_factory=dict)
    #: dataset -> (humans in the panel, humans drawn per resample)
    human_draws: dict[str, tuple[int, int]] = field(default_factory=dict)

    def short(self) -> dict[str, dict[str, dict[str, int]]]:
        """The intervals made from fewer resamples than asked for (an undefined value left out), as in :attr:`used`."""
        found: dict[str, dict[str, dict[str, int]]] = {}
        for label, per in self.used.items():
            for where, counts in per.items():
                low = {m: n for m, n in counts.items() if n < self.n_bootstrap}
                if low:
                    found.setdefault(label, {})[where] = low
        return found

    def to_dict(self) -> dict[str, object]:
        return {
            "intervals_method": f"{RESAMPLING}; {self.n_bootstrap} resamples, seed {self.seed}; 95% percentile",
            "ranks_method": "in each resample the complete observers ranked as the table ranks them; the interval "
            f"is the 2.5 and 97.5 percentiles of an observer's ranks; {HUMAN_RANKING}",
            "pairs_method": f"{PAIRED_TEST}; {self.permutations} sign-flip sets, seed {self.seed}",
            "condition_intervals_method": "each kept condition's error_consistency_ci95 in an observer's per_condition "
            "rows: the 2.5 and 97.5 percentiles of that condition's mean kappa over the table's own resamples",
            "n_bootstrap": self.n_bootstrap,
            "seed": self.seed,
            "permutations": self.permutations,
            "human_draws": {d: {"panel": h, "drawn": m} for d, (h, m) in self.human_draws.items()},
            "resamples_used": self.used,
            "resamples_used_meaning": "label -> dataset (or 'aggregate') -> measure -> the resamples in which the "
            "value was defined, of n_bootstrap requested: its interval is their percentiles (an undefined one, e.g. "
            "a degenerate kappa with --degenerate-kappa nan, is left out)",
            "intervals": {
                label: {where: {m: list(v) for m, v in per.items()} for where, per in found.items()}
                for label, found in self.intervals.items()
            },
            "rank_intervals": {
                label: {m: list(v) for m, v in per.items()} for label, per in self.rank_intervals.items()
            },
            "pairs": [pair.to_dict() for pair in self.pairs],
        }


def _interval(samples: np.ndarray) -> tuple[float, float]:
    finite = samples[~np.isnan(samples)]
    if finite.size == 0:
        return (math.nan, math.nan)
    low, high = np.percentile(finite, [2.5, 97.5])
    return (float(low), float(high))
