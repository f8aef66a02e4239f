"""Shape bias (Geirhos et al., ICLR 2019) from 16-class decisions.

Only cue-conflict images count (shape != texture; the 80 images whose shape equals their texture
are dropped). A decision is a *shape hit* when it names the shape category, a *texture hit* when
it names the texture category, and *other* otherwise.

    shape bias          = shape hits / (shape hits + texture hits)
    cue-conflict accuracy = (shape hits + texture hits) / conflict images

The 95% interval is a seeded percentile bootstrap over conflict images.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.decisions import Decision

HUMAN_SHAPE_BIAS_APPROX = 0.96  # mean of the paper's human observers (Geirhos et al. 2019, Fig. 4)


@dataclass(frozen=True)
class CategoryShapeBias:
    category: str
    shape_hits: int
    texture_hits: int
    other: int

    @property
    def shape_bias(self) -> float:
        hits = self.shape_hits + self.texture_hits
        return self.shape_hits / hits if hits else math.nan


@dataclass(frozen=True)
class ShapeBiasResult:
    shape_hits: int
    texture_hits: int
    other: int
    conflict_images: int
    excluded_no_conflict: int
    ci_low: float
    ci_high: float
    per_category: dict[str, CategoryShapeBias] = field(default_factory=dict)

    @property
    def shape_bias(self) -> float:
        hits = self.shape_hits + self.texture_hits
        return self.shape_hits / hits if hits else math.nan

    @property
    def cue_accuracy(self) -> float:
        hits = self.shape_hits + self.texture_hits
        return hits / self.conflict_images if self.conflict_images else math.nan

    def to_dict(self) -> dict[str, object]:
        """JSON-ready; NaN becomes None."""
        return {
            "shape_bias": _finite_or_none(self.shape_bias),
            "shape_hits": self.shape_hits,
            "texture_hits": self.texture_hits,
            "other": self.other,
            "conflict_images": self.conflict_images,
            "excluded_no_conflict": self.excluded_no_conflict,
            "cue_accuracy": _finite_or_none(self.cue_accuracy),
            "ci95": [_finite_or_none(self.ci_low), _finite_or_none(self.ci_high)],
            "per_category": {
                name: {**asdict(value), "shape_bias": _finite_or_none(value.shape_bias)}
                for name, value in self.per_category.items()
            },
        }


def _finite_or_none(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def compute_shape_bias(
    decisions: Sequence[Decision],
    *,
    n_bootstrap: int = 1000,
    seed: int = 0,
) -> ShapeBiasResult:
    """Shape bias and its breakdown from per-image decisions."""
    conflicts = [d for d in decisions if d.is_conflict]
    shape = np.array([d.response == d.shape for d in conflicts], dtype=bool)
    texture = np.array([d.response == d.texture for d in conflicts], dtype=bool)
    per_category = {}
    shapes = np.array([d.shape for d in conflicts])
    for category in CATEGORIES:
        mask = shapes == category
        s, t = int(shape[mask].sum()), int(texture[mask].sum())
        per_category[category] = CategoryShapeBias(category, s, t, int(mask.sum()) - s - t)
    low, high = bootstrap_interval(shape, texture, n_bootstrap=n_bootstrap, seed=seed)
    return ShapeBiasResult(
        shape_hits=int(shape.sum()),
        texture_hits=int(texture.sum()),
        other=len(conflicts) - int(shape.sum()) - int(texture.sum()),
        conflict_images=len(conflicts),
        excluded_no_conflict=len(decisions) - len(conflicts),
        ci_low=low,
        ci_high=high,
        per_category=per_category,
    )


def bootstrap_interval(
    shape_hits: np.ndarray,
    texture_hits: np.ndarray,
    *,
    n_bootstrap: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    max_draws: int = 8_000_000,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the shape bias, resampling conflict images with replacement."""
    n = len(shape_hits)
    if n == 0 or n_bootstrap <= 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    # Resample in chunks of at most `max_draws` indices, so memory stays bounded however many images a
    # decision file holds (a 4-million-row file would need 33 GB in one piece). Inputs that fit draw in
    # one piece, as before, so the published intervals are unchanged; larger ones are still seeded.
    per_chunk = max(1, max_draws // n)
    s = np.empty(n_bootstrap, dtype=np.int64)
    t = np.empty(n_bootstrap, dtype=np.int64)
    for start in range(0, n_bootstrap, per_chunk):
        stop = min(n_bootstrap, start + per_chunk)
        samples = rng.integers(0, n, size=(stop - start, n))
        s[start:stop] = shape_hits[samples].sum(axis=1)
        t[start:stop] = texture_hits[samples].sum(axis=1)
    hits = s + t
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = s / hits
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return math.nan, math.nan
    tail = (1 - level) / 2 * 100
    return float(np.percentile(ratios, tail)), float(np.percentile(ratios, 100 - tail))
