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
