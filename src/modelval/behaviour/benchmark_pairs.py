"""Which observers of the benchmark table the data tell apart: paired sign-flip tests of their aggregates.

For each pair of observers and each measure, a paired sign-flip test of the difference of their aggregates (per
trial, which of the two gave which answer is a coin flip; the humans are held fixed), Holm-adjusted over the
pairs of each measure. A Monte Carlo p at its floor ``2/(N+1)`` is a bound (``p <= floor``), and so is a Holm
p that such a p sets: the JSON flags both (``p_at_floor``, ``p_holm_is_bound``), the text prints ``<=``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

PAIRED_TEST = (
    "paired sign-flip test of the difference of two observers' aggregates: on each trial which of the two gave "
    "which answer is a coin flip, the humans held fixed; two-sided, Monte Carlo with the seed, p >= 2/(N+1); "
    "Holm-adjusted over the pairs of each measure; a p at the floor is the bound p <= 2/(N+1), and a Holm p "
    "set by such a p is a bound too (p_holm_is_bound)"
)


# The cell arithmetic (shared with :mod:`modelval.behaviour.benchmark_cells`, which imports it from here).


def _pair_terms(x: np.ndarray, xa: np.ndarray, y: np.ndarray, ya: np.ndarray, exclude: bool) -> np.ndarray:
    """(..., n, 4) per-trial terms [kept, kept*x, kept*y, kept*(x == y)] of pairs (broadcast over leading axes)."""
    keep = (xa & ya) if exclude else np.ones(np.broadcast_shapes(x.shape, y.shape), dtype=bool)
    keep_f = keep.astype(np.float64)
    return np.stack(np.broadcast_arrays(keep_f, keep_f * x, keep_f * y, keep_f * (x == y)), axis=-1)


def _cell_values(sums: np.ndarray, rule: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """kappa, observed consistency, squared accuracy difference, and the degenerate cells (an observer always right
    or always wrong) from the four sums."""
    n, sx, sy, agree = (sums[..., k] for k in range(4))
    with np.errstate(invalid="ignore", divide="ignore"):
        p1, p2, observed = sx / n, sy / n, agree / n
        expected = p1 * p2 + (1 - p1) * (1 - p2)
        kappa = (observed - expected) / (1 - expected)
    degenerate = (p1 == 0.0) | (p1 == 1.0) | (p2 == 0.0) | (p2 == 1.0)
    kappa = np.where(observed == 1.0, 1.0, kappa)
    if rule == "nan":
        kappa = np.where(degenerate, np.nan, kappa)
    return kappa, observed, (p1 - p2) ** 2, degenerate


def _nanmean(values: np.ndarray, weights: np.ndarray, axis: int) -> np.ndarray:
    """Weighted mean ignoring NaN (weights: how often each entry counts; 0 leaves it out)."""
    w = np.where(np.isnan(values), 0.0, weights)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(w.sum(axis=axis) > 0, np.nansum(values * w, axis=axis) / w.sum(axis=axis), np.nan)


@dataclass
class PairTest:
    """Two observers' aggregates in one measure: the difference and the paired sign-flip test."""

    a: str
    b: str
    measure: str
    difference: float
    p: float
    p_holm: float = math.nan
    permutations: int = 0
    #: True when the Holm p is set by a p at the Monte Carlo floor: it is then an upper bound, not a value.
    p_holm_is_bound: bool = False

    @property
    def at_floor(self) -> bool:
        floor = 2 / (self.permutations + 1) if self.permutations else math.nan
        return bool(self.permutations) and self.p <= floor * (1 + 1e-9)

    @property
    def distinguishable(self) -> bool:
        return not math.isnan(self.p_holm) and self.p_holm < 0.05

    def to_dict(self) -> dict[str, object]:
        return {
            "a": self.a,
            "b": self.b,
            "measure": self.measure,
            "difference": self.difference,
            "p": self.p,
            "p_at_floor": self.at_floor,
            "p_holm": self.p_holm,
            "p_holm_is_bound": self.p_holm_is_bound,
            "distinguishable": self.distinguishable,
        }


def pair_tests(
    cells: dict[str, Any],
    ranked: Sequence[str],
    point: dict[str, dict[str, np.ndarray]],
    *,
    measures: Sequence[str],
    permutations: int,
    rng: np.random.Generator,
    rule: str,
    na_handling: str,
) -> list[PairTest]:
    """The paired tests of every pair of ``ranked`` observers in every measure, Holm-adjusted per measure.

    Parameters
    ----------
    cells
        Dataset -> its cells (:class:`~modelval.behaviour.benchmark_cells.DatasetCells`).
    ranked
        The observers to pair.
    point
        The table's values, ``label -> dataset -> (4,)``.
    measures
        The measures, in the values' order.
    permutations
        Random sign flips (0: none).
    rng
        The seeded generator.
    rule
        The degenerate-kappa rule.
    na_handling
        How a "na" answer counts: ``"wrong"`` or ``"exclude"``.
    """
    from modelval.behaviour.permutation import holm, holm_bounds, two_sided_p

    pairs: list[PairTest] = []
    if permutations <= 0 or len(ranked) < 2:
        return pairs
    datasets = list(cells)
    for a, b in combinations(ranked, 2):
        observed = np.mean([point[a][d] - point[b][d] for d in datasets], axis=0)
        null = np.mean([_flipped_difference(cells[d], a, b, permutations, rng, rule, na_handling)
                        for d in datasets], axis=0)  # (P, 4)  # fmt: skip
        for k, measure in enumerate(measures):
            p = two_sided_p(null[:, k], float(observed[k]), permutations=permutations)
            pairs.append(PairTest(a, b, measure, float(observed[k]), p, permutations=permutations))
    for measure in measures:
        family = {f"{t.a}\0{t.b}": t for t in pairs if t.measure == measure}
        adjusted = holm({key: t.p for key, t in family.items()})
        bounds = holm_bounds({key: t.p for key, t in family.items()}, {key: t.at_floor for key, t in family.items()})
        for key, t in family.items():
            t.p_holm, t.p_holm_is_bound = adjusted[key], bounds[key]
    return pairs


def _flipped_difference(
    cells: Any, a: str, b: str, permutations: int, rng: np.random.Generator, rule: str, na_handling: str
) -> np.ndarray:
    """(P, 4): the dataset's measures of A' minus B' under random per-trial swaps of A's and B's answers."""
    exclude = na_handling == "exclude"
    h = len(cells.human_names)
    num_a = np.zeros(permutations)
    num_b = np.zeros(permutations)
    den = 0.0
    per_a: list[np.ndarray] = []
    per_b: list[np.ndarray] = []
    for cond in cells.conditions:
        (xa, aa), (xb, ab) = cond.observers[a], cond.observers[b]
        n = xa.size
        flips = (rng.random((permutations, n)) < 0.5).astype(np.float64)
        ta = _pair_terms(xa[None, :], aa[None, :], cond.humans, cond.human_answered, exclude)  # (h, n, 4)
        tb = _pair_terms(xb[None, :], ab[None, :], cond.humans, cond.human_answered, exclude)
        moved = np.tensordot(flips, tb - ta, axes=([1], [1]))  # (P, h, 4)
        sums_a, sums_b = ta.sum(axis=1)[None] + moved, tb.sum(axis=1)[None] - moved
        change = flips @ (xb.astype(np.float64) - xa)
        num_a += xa.sum() + change
        num_b += xb.sum() - change
        den += n
        for sums, label, into in ((sums_a, a, per_a), (sums_b, b, per_b)):
            kappa, observed, diff, _ = _cell_values(sums, rule)
            own = cells.self_index.get(label)
            weight = np.ones((permutations, h))
            if own is not None:
                weight[:, own] = 0.0
            into.append(np.stack([_nanmean(m, weight, 1) for m in (diff, observed, kappa)], axis=1))
    shape = (len(per_a), permutations, 3)
    mean_a = _nanmean(np.stack(per_a), np.ones(shape), 0)
    mean_b = _nanmean(np.stack(per_b), np.ones(shape), 0)
    return np.column_stack([(num_a - num_b) / den, mean_a - mean_b])
