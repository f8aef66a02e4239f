"""What a bootstrap resamples on cue-conflict images: stimuli, texture images, shape images, or both.

The 1200 conflict stimuli of Geirhos et al. (ICLR 2019) are not 1200 independent draws. Each one is a
*shape image* (160: 10 per category) rendered by style transfer in the style of a *texture image* (48:
3 per category); every texture image is in 15 to 35 of the conflict stimuli (17 to 37 of all 1280),
every shape image in 3 to 12. A texture that a model reads as its category pulls all the stimuli made
from it the same way, so resampling stimuli as if they were independent understates the spread of a
shape bias about twofold (EfficientNet-Lite0: [21.1%, 26.9%] over stimuli, [17.9%, 30.4%] over texture images).

**Estimand.** A shape bias is a property of an observer *on stimuli like these*: made the same way
from texture and shape images drawn like these ones. The interval says how much the number would move
with other source images, and each unit answers a narrower or wider version of that question:

- ``stimuli``: the 1200 stimuli drawn with replacement, as if independent (how much the number moves
  with other stimuli *from these very sources*; too narrow for the claim "this model is texture-biased").
- ``texture`` (the default): the texture images drawn with replacement; each stimulus made from a
  drawn texture image comes along as often as its texture image was drawn (a cluster bootstrap over
  48 clusters). The shape images stay fixed.
- ``shape``: the same over the 160 shape images (the texture images stay fixed).
- ``two-way``: shape and texture images drawn independently; a stimulus weighs (times its shape image
  was drawn) x (times its texture image was drawn): the pigeonhole bootstrap for a crossed design
  (McCullagh 2000; Owen 2007), which is known to be conservative (slightly too wide).

A resample is a vector of non-negative integer *weights*, one per stimulus (how often it is in the
resample), so every statistic is a weighted sum and the same weights serve both observers of a paired
comparison. Edge and silhouette images have no shared sources: there only ``stimuli`` applies.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from modelval.behaviour.cue_conflict import stimulus_sources
from modelval.errors import DataError
from modelval.parsing import check_seed

RESAMPLING_UNITS: tuple[str, ...] = ("stimuli", "texture", "shape", "two-way")
#: The default unit on cue-conflict images (elsewhere: ``stimuli``, the only one).
DEFAULT_RESAMPLING = "texture"
RESAMPLING_DESCRIPTIONS: dict[str, str] = {
    "stimuli": "stimuli drawn with replacement, as if independent",
    "texture": "texture images drawn with replacement (cluster bootstrap: each drawn texture image brings all "
    "its stimuli); shape images fixed",
    "shape": "shape images drawn with replacement (cluster bootstrap: each drawn shape image brings all its "
    "stimuli); texture images fixed",
    "two-way": "shape and texture images drawn independently; a stimulus weighs (draws of its shape image) x "
    "(draws of its texture image) (pigeonhole bootstrap, conservative)",
}
#: Bound on the cells of one chunk of weights (resamples x stimuli), so memory stays bounded for any file.
MAX_CELLS = 8_000_000


@dataclass(frozen=True)
class Resampling:
    """The unit of a bootstrap and, for cluster units, each stimulus's shape and texture image (as ids)."""

    unit: str
    shape_ids: np.ndarray | None = None
    texture_ids: np.ndarray | None = None

    @property
    def description(self) -> str:
        return RESAMPLING_DESCRIPTIONS[self.unit]


def _check_unit(unit: str) -> str:
    if unit not in RESAMPLING_UNITS:
        raise DataError(f"unknown resampling unit {unit!r}; expected one of: {', '.join(RESAMPLING_UNITS)}")
    return unit


def resolve_unit(unit: str | None, *, cue_conflict: bool) -> str:
    """``unit`` checked; ``None`` is the default: ``texture`` on cue-conflict, ``stimuli`` elsewhere.

    A source unit on images without shared sources (edges, silhouettes) is refused rather than silently
    replaced, so a report never claims a resampling it did not do.

    Parameters
    ----------
    unit
        One of :data:`RESAMPLING_UNITS`, or ``None``.
    cue_conflict
        True for cue-conflict images.
    """
    if unit is None:
        return DEFAULT_RESAMPLING if cue_conflict else "stimuli"
    _check_unit(unit)
    if unit != "stimuli" and not cue_conflict:
        raise DataError(
            f"resampling by {unit!r} needs cue-conflict stimuli (a shape image and a texture image per stimulus); "
            "edge and silhouette images have no shared sources: use 'stimuli'"
        )
    return unit


def resampling_for(names: Sequence[str], unit: str) -> Resampling:
    """The :class:`Resampling` of stimuli named ``names`` (cue-conflict names when ``unit`` is a source unit).

    Parameters
    ----------
    names
        The stimuli's file names.
    unit
        The bootstrap's unit, or ``None``.
    """
    _check_unit(unit)
    if unit == "stimuli":
        return Resampling(unit)
    sources = [stimulus_sources(name) for name in names]
    return Resampling(unit, _ids([shape for shape, _ in sources]), _ids([texture for _, texture in sources]))


def _ids(values: Sequence[str]) -> np.ndarray:
    index: dict[str, int] = {}
    return np.array([index.setdefault(value, len(index)) for value in values], dtype=np.int64)


def _counts(rng: np.random.Generator, units: int, rows: int) -> np.ndarray:
    """``rows`` x ``units``: how often each unit is drawn when ``units`` units are drawn with replacement."""
    draws = rng.integers(0, units, size=(rows, units))
    flat = draws + np.arange(rows)[:, None] * units
    return np.bincount(flat.ravel(), minlength=rows * units).reshape(rows, units).astype(np.float64)


def bootstrap_weights(
    n: int, resampling: Resampling, *, n_bootstrap: int, seed: int, max_cells: int = MAX_CELLS
) -> Iterator[np.ndarray]:
    """Chunks of resample weights, ``(resamples, n)`` each, ``n_bootstrap`` rows in all, seeded.

    ``stimuli`` draws exactly as the bootstrap before cluster units existed (``rng.integers(0, n)`` in
    chunks of at most ``max_cells`` indices), so its intervals are unchanged.

    Parameters
    ----------
    n
        How many stimuli.
    resampling
        What a resample draws.
    n_bootstrap
        Bootstrap resamples (0: no interval).
    seed
        Seed of the resamples.
    max_cells
        The most weights per chunk.
    """
    if n <= 0 or n_bootstrap <= 0:
        return
    rng = np.random.default_rng(check_seed(seed))
    per_chunk = max(1, max_cells // n)
    for start in range(0, n_bootstrap, per_chunk):
        rows = min(n_bootstrap, start + per_chunk) - start
        if resampling.unit == "stimuli":
            yield _counts(rng, n, rows)
            continue
        assert resampling.shape_ids is not None and resampling.texture_ids is not None
        weights = np.ones((rows, n))
        if resampling.unit in ("texture", "two-way"):
            ids = resampling.texture_ids
            weights *= _counts(rng, int(ids.max()) + 1, rows)[:, ids]
        if resampling.unit in ("shape", "two-way"):
            ids = resampling.shape_ids
            weights *= _counts(rng, int(ids.max()) + 1, rows)[:, ids]
        yield weights


def percentile_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The percentile interval of the finite ``values`` (NaN, NaN when none is finite).

    Parameters
    ----------
    values
        The resampled values.
    level
        Coverage of the interval (0.95: 95%).
    """
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan, math.nan
    tail = (1 - level) / 2 * 100
    return float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))


def weighted_ratio(weights: np.ndarray, numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """Per resample: sum(w * numerator) / sum(w * denominator) (NaN where the denominator is 0).

    Parameters
    ----------
    weights
        Resample weights, ``(resamples, n)``.
    numerator
        Per stimulus.
    denominator
        Per stimulus.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weights @ np.asarray(numerator, dtype=np.float64)) / (
            weights @ np.asarray(denominator, dtype=np.float64)
        )
