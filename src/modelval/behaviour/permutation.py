"""Paired permutation tests of a difference of two ratios, and Holm's correction for several tests.

Two observers A and B answered the same stimuli. Each stimulus *i* gives each observer a numerator and
a denominator term: for the shape bias, (shape hit, shape or texture hit); for accuracy, (correct, 1).
The statistic is the difference of the two ratios,

    T = sum(num_A) / sum(den_A) - sum(num_B) / sum(den_B),

i.e. the shape-bias difference (or the accuracy difference) that ``modelval compare`` and the
sensitivity card print. Under the null hypothesis "A and B are exchangeable on every stimulus", which
observer gave which answer on a stimulus is a coin flip, so the null distribution of T comes from
swapping A's and B's terms on a random subset of the stimuli (a *sign flip per stimulus*; scipy's
``permutation_test(..., permutation_type="samples")``). Only discordant stimuli (different terms)
change anything when swapped.

The two-sided p-value is scipy's: ``min(1, 2 * min(P(T* <= t), P(T* >= t)))``, comparisons with a
relative tolerance of 100 machine epsilons (so that theoretically equal values count as equal).

- :func:`permutation_test` draws ``permutations`` random sign-flip sets with a seed and adds one to
  numerator and denominator (the observed assignment is one of the permutations; Phipson & Smyth 2010),
  or enumerates all 2^d sets when that is no more than ``permutations``, as scipy does.
- :func:`exact_permutation_test` gives the exact p-value over all 2^d sign flips without enumerating
  them: the stimuli fall into a few *types* (the unordered pair of A's and B's terms), and after the
  flips the number of stimuli of a type in one orientation is Binomial(count, 1/2), independently per
  type; the null distribution is the product of these binomials. It is exact for any d whose grid of
  type counts is small (per category: always).

For accuracy (terms (correct, 1)) the exact test is the exact McNemar test: only "A right, B wrong"
stimuli and their mirror images are discordant, and T counts one orientation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from modelval.parsing import check_seed

#: Random sign-flip sets of the Monte Carlo test unless the caller says otherwise, and their seed.
DEFAULT_PERMUTATIONS = 10_000
DEFAULT_SEED = 0
#: Exact tests enumerate at most this many combinations of type counts.
MAX_EXACT_GRID = 4_000_000
_MAX_CELLS = 8_000_000
_EPS = float(np.finfo(np.float64).eps * 100)  # scipy.stats.permutation_test's tolerance

NULL_HYPOTHESIS = "A and B are exchangeable on every stimulus (which of the two gave which answer is a coin flip)"


@dataclass(frozen=True)
class PermutationTest:
    """A two-sided paired permutation test of ``statistic`` (the number it tests is ``observed``)."""

    statistic: str
    observed: float
    p: float
    permutations: int  # sign-flip sets drawn (Monte Carlo) or weighed (exact: 2 ** discordant)
    exact: bool
    seed: int | None
    discordant: int
    #: The exact p over all 2^d sign flips, computed when the Monte Carlo p sits at its floor (``None`` if not).
    exact_p: float | None = None

    @property
    def floor(self) -> float:
        """The smallest p the Monte Carlo test can give, 2/(N+1) (0 for an exact test)."""
        return 0.0 if self.exact or self.permutations <= 0 else 2.0 / (self.permutations + 1)

    @property
    def at_floor(self) -> bool:
        """No random sign flip was as extreme as the observed split: the true p is below the floor."""
        return not self.exact and self.permutations > 0 and self.p <= self.floor * (1 + 1e-9)

    def to_dict(self) -> dict[str, object]:
        return {
            "statistic": self.statistic,
            "method": "paired permutation",
            "flips": "per stimulus (A's and B's answers swapped on a random subset of the stimuli)",
            "null": NULL_HYPOTHESIS,
            "alternative": "two-sided",
            "observed": self.observed,
            "p": self.p,
            "permutations": self.permutations,
            "exact": self.exact,
            "seed": self.seed,
            "discordant": self.discordant,
            "at_floor": self.at_floor,
            "floor": self.floor,
            "exact_p": self.exact_p,
        }


def _ratio_difference(num_a: np.ndarray, den_a: np.ndarray, num_b: np.ndarray, den_b: np.ndarray) -> float:
    """sum(num_a) / sum(den_a) - sum(num_b) / sum(den_b) (NaN when a denominator is 0)."""
    sa, sb = float(np.sum(den_a)), float(np.sum(den_b))
    if sa == 0 or sb == 0:
        return math.nan
    return float(np.sum(num_a)) / sa - float(np.sum(num_b)) / sb


def _terms(*arrays: np.ndarray) -> list[np.ndarray]:
    arrays_f = [np.asarray(a, dtype=np.float64) for a in arrays]
    if len({a.shape for a in arrays_f}) != 1 or arrays_f[0].ndim != 1:
        raise ValueError("the four term vectors must be 1-D and of equal length (one entry per stimulus)")
    return arrays_f


def _p_value(null: np.ndarray, weights: np.ndarray | None, observed: float, *, adjustment: int, total: float) -> float:
    """Two-sided p as scipy computes it; ``weights`` are probabilities (exact) or None (counts)."""
    if math.isnan(observed):
        return math.nan
    gamma = abs(_EPS * observed)
    less, greater = null <= observed + gamma, null >= observed - gamma
    if weights is None:
        p_less = (np.count_nonzero(less) + adjustment) / (total + adjustment)
        p_greater = (np.count_nonzero(greater) + adjustment) / (total + adjustment)
    else:
        p_less, p_greater = float(weights[less].sum()), float(weights[greater].sum())
    return float(min(1.0, 2 * min(p_less, p_greater)))


def permutation_test(
    num_a: np.ndarray,
    den_a: np.ndarray,
    num_b: np.ndarray,
    den_b: np.ndarray,
    *,
    statistic: str = "ratio_difference",
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = DEFAULT_SEED,
) -> PermutationTest:
    """Monte Carlo paired permutation test of the ratio difference (exact when 2^d <= ``permutations``).

    Parameters
    ----------
    num_a
        A's numerator per stimulus type.
    den_a
        A's denominator per stimulus type.
    num_b
        B's numerator per stimulus type.
    den_b
        B's denominator per stimulus type.
    statistic
        The statistic (only ``"ratio_difference"``).
    permutations
        Random sign-flip sets (0: none).
    seed
        Seed of the resamples.
    """
    num_a, den_a, num_b, den_b = _terms(num_a, den_a, num_b, den_b)
    observed = _ratio_difference(num_a, den_a, num_b, den_b)
    discordant = np.flatnonzero((num_a != num_b) | (den_a != den_b))
    d = len(discordant)
    if permutations <= 0:
        return PermutationTest(statistic, observed, math.nan, 0, False, seed, d)
    if d <= 60 and 2**d <= permutations:
        exact = exact_permutation_test(num_a, den_a, num_b, den_b, statistic=statistic)
        return PermutationTest(statistic, observed, exact.p, 2**d, True, None, d)
    totals = np.array([num_a.sum(), den_a.sum(), num_b.sum(), den_b.sum()])
    # Swapping stimulus i moves (num_b - num_a)[i] into A's sum and the opposite into B's.
    change = np.stack([(num_b - num_a)[discordant], (den_b - den_a)[discordant]], axis=1)
    rng = np.random.default_rng(check_seed(seed))
    per_chunk = max(1, _MAX_CELLS // max(d, 1))
    null = np.empty(permutations)
    for start in range(0, permutations, per_chunk):
        rows = min(permutations, start + per_chunk) - start
        flips = (rng.random((rows, d)) < 0.5).astype(np.float64)
        moved = flips @ change  # (rows, 2): change of sum(num_a), sum(den_a)
        with np.errstate(invalid="ignore", divide="ignore"):
            null[start : start + rows] = (totals[0] + moved[:, 0]) / (totals[1] + moved[:, 1]) - (
                totals[2] - moved[:, 0]
            ) / (totals[3] - moved[:, 1])
    p = _p_value(null, None, observed, adjustment=1, total=permutations)
    test = PermutationTest(statistic, observed, p, permutations, False, seed, d)
    if test.at_floor:  # the Monte Carlo test can only say p <= 2/(N+1): say the exact p where it can be counted
        exact_p = _streamed_exact_p(num_a, den_a, num_b, den_b)
        if exact_p is not None:
            test = PermutationTest(statistic, observed, p, permutations, False, seed, d, exact_p)
    return test


#: The streamed exact test weighs at most this many combinations of type counts.
MAX_STREAMED_GRID = 200_000_000


Term = tuple[float, float]


def _discordant_types(
    num_a: np.ndarray, den_a: np.ndarray, num_b: np.ndarray, den_b: np.ndarray
) -> tuple[np.ndarray, list[tuple[Term, Term, int]]]:
    """The sums ``(num_a, den_a, num_b, den_b)`` over the stimuli a flip leaves unchanged, and the discordant
    stimuli grouped by type: the unordered pair of their terms, oriented as first seen ``(for A, for B, count)``."""
    same = (num_a == num_b) & (den_a == den_b)
    base = np.array([num_a[same].sum(), den_a[same].sum(), num_b[same].sum(), den_b[same].sum()], dtype=np.float64)
    types: dict[frozenset[Term], tuple[Term, Term, int]] = {}
    for i in np.flatnonzero(~same):
        ta, tb = (float(num_a[i]), float(den_a[i])), (float(num_b[i]), float(den_b[i]))
        u, v, count = types.get(frozenset((ta, tb)), (ta, tb, 0))
        types[frozenset((ta, tb))] = (u, v, count + 1)
    return base, list(types.values())


def _orientation_terms(u: Term, v: Term, count: int) -> np.ndarray:
    """``(count + 1, 4)``: the summed terms of one type when k of its ``count`` stimuli give A ``u`` (and B ``v``)
    and the rest the other way round, for k = 0 .. count."""
    k = np.arange(count + 1, dtype=np.float64)
    return np.stack(
        [k * u[0] + (count - k) * v[0], k * u[1] + (count - k) * v[1], k * v[0] + (count - k) * u[0],
         k * v[1] + (count - k) * u[1]],
        axis=1,
    )  # fmt: skip


def _streamed_exact_p(
    num_a: np.ndarray, den_a: np.ndarray, num_b: np.ndarray, den_b: np.ndarray, *, max_grid: int = MAX_STREAMED_GRID
) -> float | None:
    """The exact two-sided p over all 2^d sign flips, as :func:`exact_permutation_test`, for grids too large to
    hold at once (``None`` past ``max_grid`` combinations).

    The stimuli fall into types (cue-conflict's shape bias: shape hit, texture hit, neither; three discordant
    types); the count of each type in one orientation is Binomial(count, 1/2), independently. The two largest
    types are weighed as one grid, the others looped over; the weights are taken in logs, so tail
    probabilities far below 1e-300 of a single term are not lost before they are summed.
    """
    num_a, den_a, num_b, den_b = _terms(num_a, den_a, num_b, den_b)
    observed = _ratio_difference(num_a, den_a, num_b, den_b)
    if math.isnan(observed):
        return math.nan
    base, types = _discordant_types(num_a, den_a, num_b, den_b)
    found = sorted(types, key=lambda t: t[2])
    while len(found) < 2:
        found.insert(0, ((0.0, 0.0), (0.0, 0.0), 0))
    if math.prod(t[2] + 1 for t in found) > max_grid:
        return None

    def contribution(u: tuple[float, float], v: tuple[float, float], count: int) -> tuple[np.ndarray, np.ndarray]:
        log_w = np.array(
            [math.lgamma(count + 1) - math.lgamma(j + 1) - math.lgamma(count - j + 1) for j in range(count + 1)]
        )
        return _orientation_terms(u, v, count), log_w - count * math.log(2.0)

    *outer, (u1, v1, c1), (u2, v2, c2) = found
    t1, w1 = contribution(u1, v1, c1)
    t2, w2 = contribution(u2, v2, c2)
    grid_terms = (t1[:, None, :] + t2[None, :, :]).reshape(-1, 4)
    grid_log_w = (w1[:, None] + w2[None, :]).reshape(-1)
    gamma = abs(_EPS * observed)
    p_less = p_greater = 0.0
    outer_parts = [contribution(u, v, c) for u, v, c in outer]
    for choice in np.ndindex(*(c + 1 for _, _, c in outer)) if outer else [()]:
        shift = base.copy()
        log_shift = 0.0
        for (terms, log_w), j in zip(outer_parts, choice, strict=True):
            shift += terms[j]
            log_shift += log_w[j]
        totals = grid_terms + shift
        with np.errstate(invalid="ignore", divide="ignore"):
            null = totals[:, 0] / totals[:, 1] - totals[:, 2] / totals[:, 3]
        weights = np.exp(grid_log_w + log_shift)
        p_less += float(weights[null <= observed + gamma].sum())
        p_greater += float(weights[null >= observed - gamma].sum())
    return float(min(1.0, 2 * min(p_less, p_greater)))


def exact_permutation_test(
    num_a: np.ndarray,
    den_a: np.ndarray,
    num_b: np.ndarray,
    den_b: np.ndarray,
    *,
    statistic: str = "ratio_difference",
    max_grid: int = MAX_EXACT_GRID,
) -> PermutationTest:
    """The exact paired permutation test over all 2^d sign flips, by counting stimulus types (see module doc).

    Parameters
    ----------
    num_a
        A's numerator per stimulus type.
    den_a
        A's denominator per stimulus type.
    num_b
        B's numerator per stimulus type.
    den_b
        B's denominator per stimulus type.
    statistic
        The statistic (only ``"ratio_difference"``).
    max_grid
        The largest grid of counts computed exactly.
    """
    num_a, den_a, num_b, den_b = _terms(num_a, den_a, num_b, den_b)
    observed = _ratio_difference(num_a, den_a, num_b, den_b)
    base, types = _discordant_types(num_a, den_a, num_b, den_b)
    d = sum(count for _, _, count in types)
    grid = math.prod(count + 1 for _, _, count in types)
    if grid > max_grid:
        raise ValueError(f"the exact test would weigh {grid} combinations (> {max_grid}); use permutation_test")
    totals = base[None, :]
    weights = np.ones(1)
    for u, v, count in types:
        contribution = _orientation_terms(u, v, count)
        weight = np.array([math.comb(count, j) for j in range(count + 1)], dtype=np.float64) / 2.0**count
        totals = (totals[:, None, :] + contribution[None, :, :]).reshape(-1, 4)
        weights = (weights[:, None] * weight[None, :]).reshape(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        null = totals[:, 0] / totals[:, 1] - totals[:, 2] / totals[:, 3]
    p = _p_value(null, weights, observed, adjustment=0, total=1.0)
    return PermutationTest(statistic, observed, p, 2**d, True, None, d)


def holm(pvalues: Mapping[str, float]) -> dict[str, float]:
    """Holm's step-down adjustment of a family of p-values (undefined ones stay NaN, outside the family).

    Sorted ascending, the i-th of m p-values (i from 0) becomes ``max over j <= i of min(1, (m - j) * p_j)``;
    it controls the family-wise error rate at the nominal level under any dependence.

    Parameters
    ----------
    pvalues
        The family's p-values (NaN: outside the family).
    """
    defined = sorted((p, key) for key, p in pvalues.items() if not math.isnan(p))
    m = len(defined)
    adjusted = {key: math.nan for key in pvalues}
    running = 0.0
    for i, (p, key) in enumerate(defined):
        running = max(running, min(1.0, (m - i) * p))
        adjusted[key] = running
    return adjusted


def holm_bounds(pvalues: Mapping[str, float], at_floor: Mapping[str, bool]) -> dict[str, bool]:
    """Which Holm-adjusted p-values (:func:`holm`) are upper bounds rather than values.

    A Monte Carlo p at its floor only says ``p <= floor``; the adjusted p it sets (the running maximum of
    :func:`holm` taken at its term) is then only a bound too. An adjusted p set by an exact term is a value,
    whatever floored terms before it were (they could only be smaller).

    Parameters
    ----------
    pvalues
        The family's p-values (NaN: outside the family).
    at_floor
        Key -> True where that p is at its Monte Carlo floor.
    """
    defined = sorted((p, key) for key, p in pvalues.items() if not math.isnan(p))
    m = len(defined)
    bound = {key: False for key in pvalues}
    running, running_bound = -1.0, False
    for i, (p, key) in enumerate(defined):
        term = min(1.0, (m - i) * p)
        floored = bool(at_floor.get(key, False))
        if term > running:
            running, running_bound = term, floored
        elif term == running:
            running_bound = running_bound and floored  # an exact term reaches the same value
        bound[key] = running_bound
    return bound


def two_sided_p(null: np.ndarray, observed: float, *, permutations: int) -> float:
    """Two-sided Monte Carlo p of ``observed`` against ``permutations`` random null draws, as
    :func:`permutation_test` computes it (the observed assignment counted once; the floor is 2/(N+1)).

    Parameters
    ----------
    null
        The null draws.
    observed
        The observed statistic.
    permutations
        How many null draws.
    """
    return _p_value(np.asarray(null, dtype=np.float64), None, observed, adjustment=1, total=permutations)
