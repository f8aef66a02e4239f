"""Closed-form intervals of a binomial proportion: a reliability bin's accuracy, a category's accuracy.

Shared ground: numpy only, used by the metrics (reliability bins) and the behaviour wing (accuracy figures)."""

from __future__ import annotations

from statistics import NormalDist
from typing import Any

import numpy as np

from modelval.errors import InputValidationError


def wilson_interval(successes: Any, trials: Any, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a binomial proportion (Wilson 1927), element-wise.

    ``p = k/n``, ``z`` the normal quantile of ``(1 + level) / 2``;
    centre ``(p + z^2/2n) / (1 + z^2/n)``, half-width ``z sqrt(p(1-p)/n + z^2/4n^2) / (1 + z^2/n)``.
    Unlike the normal (Wald) interval it stays inside [0, 1] and is sensible for a bin with 0 or all
    right. It equals ``statsmodels.stats.proportion.proportion_confint(method="wilson")``. Where
    ``trials`` is 0 both ends are NaN.

    Parameters
    ----------
    successes
        How many succeeded.
    trials
        Of how many.
    level
        The interval's level.
    """
    if not 0 < level < 1:
        raise InputValidationError(f"level must lie strictly between 0 and 1, got {level!r}")
    k = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    if np.any(k < 0) or np.any(k > n):
        raise InputValidationError("successes must lie between 0 and trials")
    z = NormalDist().inv_cdf((1 + level) / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        denom = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At k = 0 (k = n) the lower (upper) end is exactly 0 (1); floating point would leave 1e-17.
    low = np.where(n > 0, np.where(k == 0, 0.0, np.clip(centre - half, 0.0, 1.0)), np.nan)
    high = np.where(n > 0, np.where(k == n, 1.0, np.clip(centre + half, 0.0, 1.0)), np.nan)
    return low, high


def newcombe_difference(
    p1: float, bounds1: tuple[float, float], p2: float, bounds2: tuple[float, float], phi: float = 0.0
) -> tuple[float, float]:
    """Newcombe's hybrid score interval of ``p1 - p2`` from each proportion's Wilson bounds (Newcombe 1998).

    ``phi = 0``: two independent proportions (method 10 of Newcombe, Stat Med 17:873; 56/70 - 48/80 gives
    [0.0524, 0.3339]). For paired proportions ``phi`` is the correlation of the 2x2 table (Newcombe, Stat Med 17:2635,
    method 10): ``L = D - sqrt(d1^2 - 2 phi d1 e2 + e2^2)``, ``U = D + sqrt(e1^2 - 2 phi e1 d2 + d2^2)`` with
    ``d = p - lower`` and ``e = upper - p``.

    Parameters
    ----------
    p1, p2
        The two proportions.
    bounds1, bounds2
        Their Wilson intervals (lower, upper).
    phi
        The correlation of the paired outcomes (0: independent samples).
    """
    d1, e1 = p1 - bounds1[0], bounds1[1] - p1
    d2, e2 = p2 - bounds2[0], bounds2[1] - p2
    difference = p1 - p2
    low = difference - float(np.sqrt(max(d1**2 - 2 * phi * d1 * e2 + e2**2, 0.0)))
    high = difference + float(np.sqrt(max(e1**2 - 2 * phi * e1 * d2 + d2**2, 0.0)))
    return low, high


def paired_difference(both: int, only_1: int, only_2: int, neither: int, level: float = 0.95) -> tuple[float, float]:
    """Newcombe's interval of the difference of two paired proportions, ``(both + only_1 - both - only_2) / n``.

    Parameters
    ----------
    both, only_1, only_2, neither
        The 2x2 table of the paired outcomes: successes of both, of the first only, of the second only, of neither.
    level
        The coverage.
    """
    n = both + only_1 + only_2 + neither
    if n == 0:
        return float("nan"), float("nan")
    k1, k2 = both + only_1, both + only_2
    low, high = wilson_interval([k1, k2], [n, n], level)
    margins = float(k1) * (n - k1) * k2 * (n - k2)
    phi = (both * neither - only_1 * only_2) / np.sqrt(margins) if margins > 0 else 0.0
    return newcombe_difference(k1 / n, (low[0], high[0]), k2 / n, (low[1], high[1]), float(phi))
