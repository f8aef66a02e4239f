"""Shape bias (Geirhos et al., ICLR 2019) from 16-class decisions.

Only cue-conflict images count (shape != texture; the 80 images whose shape equals their texture
are dropped). A decision is a *shape hit* when it names the shape category, a *texture hit* when
it names the texture category, and *other* otherwise.

    shape bias          = shape hits / (shape hits + texture hits)
    cue-conflict accuracy = (shape hits + texture hits) / conflict images

The 95% interval is a seeded percentile bootstrap. By default it resamples the *texture images* the
stimuli were made from (a cluster bootstrap: :mod:`modelval.behaviour.resampling` says why and what
the other units are); ``resample="stimuli"`` gives the older, about twice too narrow, interval over
stimuli drawn as if independent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.decisions import NO_RESPONSE, Decision
from modelval.behaviour.resampling import (
    DEFAULT_RESAMPLING,
    Resampling,
    bootstrap_weights,
    percentile_interval,
    resampling_for,
    weighted_ratio,
)
from modelval.parsing import BOOTSTRAP

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
    #: What the bootstrap of the interval resampled (a unit of :mod:`modelval.behaviour.resampling`).
    ci_resampling: str = DEFAULT_RESAMPLING
    #: Conflict stimuli answered with no class (``na``: a VLM's refusal or unparsable answer, a human's missing
    #: answer); part of ``other``: neither a shape nor a texture hit, and counted in the accuracy's denominator.
    abstentions: int = 0

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
            "abstentions": self.abstentions,
            "ci95": [_finite_or_none(self.ci_low), _finite_or_none(self.ci_high)],
            "ci95_resampling": self.ci_resampling,
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
    resample: str = DEFAULT_RESAMPLING,
) -> ShapeBiasResult:
    """Shape bias of per-image decisions on the cue-conflict stimuli, with a 95% bootstrap interval.

    Only cue-conflict images count: a decision on one of the 80 images whose shape equals its texture
    is dropped (``excluded_no_conflict``). On the others a decision is a *shape hit* when it names the
    shape category, a *texture hit* when it names the texture category, and *other* otherwise (another
    category, or ``na``: a human's missing answer, a VLM's abstention). The shape bias is
    ``shape hits / (shape hits + texture hits)``, as in Geirhos et al. (ICLR 2019); the cue-conflict
    accuracy is ``(shape hits + texture hits) / conflict images``. Both are also given per shape
    category.

    The interval is the 2.5th and 97.5th percentile of the shape bias over ``n_bootstrap`` resamples
    drawn by ``numpy.random.default_rng(seed)``: the same decisions and seed give the same interval.
    By default the resampled unit is the *texture image* the stimuli were made from (a cluster
    bootstrap: a drawn texture image brings all the stimuli made from it), because stimuli that share a
    texture image are not independent; see ``modelval.behaviour.resampling``.

    Parameters
    ----------
    decisions
        Per-image 16-class decisions (``modelval.behaviour.decisions.Decision``), e.g. from
        ``modelval.read_decisions``; each image at most once. Decisions on no-conflict images may be
        included: they are counted in ``excluded_no_conflict`` and nowhere else.
    n_bootstrap
        Number of bootstrap resamples; 0 draws none and the interval is ``(nan, nan)``.
    seed
        Seed of the bootstrap's random generator, a whole number >= 0.
    resample
        The bootstrap's unit: ``"texture"`` (the default: texture images), ``"shape"`` (the shape
        images), ``"two-way"`` (both, drawn independently; conservative) or ``"stimuli"`` (the conflict
        stimuli drawn as if independent, which gives an interval about half as wide as it should be).

    Returns
    -------
    ShapeBiasResult
        ``shape_bias`` and ``cue_accuracy`` (NaN when nothing counts), the counts ``shape_hits``,
        ``texture_hits``, ``other``, ``abstentions`` (the ``na`` among ``other``), ``conflict_images`` and
        ``excluded_no_conflict``, the interval
        ``ci_low`` and ``ci_high`` with its unit ``ci_resampling``, and ``per_category``: a
        ``CategoryShapeBias`` (the same counts and ``shape_bias``) for each of the 16 shape categories.
        ``to_dict()`` gives all of it JSON-ready (NaN as None).

    Raises
    ------
    modelval.errors.DataError
        ``resample`` is not one of the four units.
    modelval.errors.InputValidationError
        ``seed`` is negative or not a whole number (checked when resamples are drawn), or ``n_bootstrap`` is
        not 0 to 100000 (:data:`modelval.parsing.BOOTSTRAP`, as ``--bootstrap``).

    Examples
    --------
    The published decisions of ResNet-50 (texture-vs-shape's raw data) give the paper's shape bias of
    22%, from 162 shape and 572 texture hits on the 1200 conflict images:

    >>> from modelval import compute_shape_bias, read_decisions
    >>> decisions = read_decisions(REFERENCE / "style-transfer-512-nomask-experiment_resnet50_session-1.csv")
    >>> result = compute_shape_bias(decisions, seed=0)
    >>> result.shape_hits, result.texture_hits, result.other, result.conflict_images, result.excluded_no_conflict
    (162, 572, 466, 1200, 80)
    >>> round(result.shape_bias, 4), round(result.cue_accuracy, 4)
    (0.2207, 0.6117)
    >>> result.ci_resampling, round(result.ci_low, 4), round(result.ci_high, 4)
    ('texture', 0.1557, 0.288)
    >>> cat = result.per_category["cat"]
    >>> cat.shape_hits, cat.texture_hits, round(cat.shape_bias, 3)
    (2, 38, 0.05)

    Resampling the stimuli as if they were independent gives an interval less than half as wide:

    >>> naive = compute_shape_bias(decisions, seed=0, resample="stimuli")
    >>> round(naive.ci_low, 4), round(naive.ci_high, 4)
    (0.1925, 0.2527)
    """
    BOOTSTRAP.check(n_bootstrap, "bootstrap")  # the command line's limit and words (a negative count drew none)
    conflicts = [d for d in decisions if d.is_conflict]
    shape = np.array([d.response == d.shape for d in conflicts], dtype=bool)
    texture = np.array([d.response == d.texture for d in conflicts], dtype=bool)
    per_category = {}
    shapes = np.array([d.shape for d in conflicts])
    for category in CATEGORIES:
        mask = shapes == category
        s, t = int(shape[mask].sum()), int(texture[mask].sum())
        per_category[category] = CategoryShapeBias(category, s, t, int(mask.sum()) - s - t)
    resampling = resampling_for([d.stimulus_name for d in conflicts], resample)
    low, high = bootstrap_interval(shape, texture, n_bootstrap=n_bootstrap, seed=seed, resampling=resampling)
    return ShapeBiasResult(
        shape_hits=int(shape.sum()),
        texture_hits=int(texture.sum()),
        other=len(conflicts) - int(shape.sum()) - int(texture.sum()),
        conflict_images=len(conflicts),
        excluded_no_conflict=len(decisions) - len(conflicts),
        ci_low=low,
        ci_high=high,
        per_category=per_category,
        ci_resampling=resample,
        abstentions=sum(d.response == NO_RESPONSE for d in conflicts),
    )


def bootstrap_interval(
    shape_hits: np.ndarray,
    texture_hits: np.ndarray,
    *,
    n_bootstrap: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    max_draws: int = 8_000_000,
    resampling: Resampling | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the shape bias (default: conflict images drawn with replacement).

    ``resampling`` (from :func:`~modelval.behaviour.resampling.resampling_for`) draws texture or shape
    images instead. Memory stays bounded (chunks of at most ``max_draws`` weights) however many images a
    decision file holds; inputs that fit draw in one piece, so seeded intervals do not depend on it.

    Parameters
    ----------
    shape_hits
        Per conflict image: 1 for a shape hit.
    texture_hits
        Per conflict image: 1 for a texture hit.
    n_bootstrap
        Bootstrap resamples (0: no interval).
    seed
        Seed of the resamples.
    level
        Coverage of the interval (0.95: 95%).
    max_draws
        The most draws held at once.
    resampling
        What a resample draws (:func:`~modelval.behaviour.resampling.resampling_for`; ``None``: conflict images).
    """
    n = len(shape_hits)
    resampling = resampling or Resampling("stimuli")
    hits = np.asarray(shape_hits, dtype=bool) | np.asarray(texture_hits, dtype=bool)
    ratios = [
        weighted_ratio(weights, shape_hits, hits)
        for weights in bootstrap_weights(n, resampling, n_bootstrap=n_bootstrap, seed=seed, max_cells=max_draws)
    ]
    if not ratios:
        return math.nan, math.nan
    return percentile_interval(np.concatenate(ratios), level)
