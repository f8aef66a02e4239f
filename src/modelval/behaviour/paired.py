"""Paired statistics of two observers on the same images: do two models (or two protocols) differ?

The statistic is the shape bias on cue-conflict images (shape hits / (shape + texture hits) over the
conflict images) and the 16-class accuracy on the other experiments. Both observers answered the same
images, so the comparison is paired:

- the difference A - B with a seeded percentile bootstrap 95% interval in which the images are
  resampled *jointly* (one index set per resample, used for both observers);
- the exact McNemar test on the discordant images: under "no difference" an image on which exactly
  one observer succeeds is equally likely to favour either, so the count favouring A is
  Binomial(discordant, 1/2); the two-sided p-value is ``min(1, 2 * P(X <= min(b, c)))``, as in
  statsmodels' ``mcnemar(exact=True)``.

"Success" is a *shape hit* on cue-conflict (the response names the shape category; a texture hit
and any other response both count as no shape hit) and a correct response elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.cue_conflict import parse_stimulus_name
from modelval.behaviour.trials import Trial, aligned, responses

DISCORDANT_DEFINITIONS = {
    "cue-conflict": "conflict images where exactly one observer chose the shape category (shape hit vs not)",
    "other": "images where exactly one observer answered correctly",
}


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value for ``b`` and ``c`` discordant pairs (1.0 when there are none)."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got {b} and {c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = Fraction(sum(math.comb(n, k) for k in range(min(b, c) + 1)), 2**n)
    return float(min(Fraction(1), 2 * tail))


@dataclass(frozen=True)
class PairedComparison:
    """A - B on the same images; ``statistic`` is "shape_bias" or "accuracy"."""

    dataset: str
    statistic: str
    images: int
    value_a: float
    value_b: float
    ci95: tuple[float, float]
    a_only: int  # discordant images where only A succeeded
    b_only: int
    mcnemar_p: float
    per_category: dict[str, dict[str, float]]
    names: tuple[str, str] = ("A", "B")

    @property
    def difference(self) -> float:
        return self.value_a - self.value_b

    def to_dict(self) -> dict[str, object]:
        key = "cue-conflict" if self.dataset == "cue-conflict" else "other"
        return {
            "dataset": self.dataset,
            "statistic": self.statistic,
            "a": self.names[0],
            "b": self.names[1],
            "images": self.images,
            "value_a": self.value_a,
            "value_b": self.value_b,
            "difference": self.difference,
            "ci95": list(self.ci95),
            "mcnemar_p": self.mcnemar_p,
            "discordant": {
                "a_only": self.a_only,
                "b_only": self.b_only,
                "total": self.a_only + self.b_only,
                "definition": DISCORDANT_DEFINITIONS[key],
            },
            "per_category": self.per_category,
        }


def _ratio(hits: np.ndarray, totals: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return hits / totals


def compare_paired(
    a: Sequence[Trial],
    b: Sequence[Trial],
    *,
    dataset: str,
    names: tuple[str, str] = ("A", "B"),
    n_bootstrap: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> PairedComparison:
    """Paired comparison of two observers' trials on ``dataset`` (see the module docstring)."""
    images = aligned(a, b, names=names)
    resp_a, resp_b = responses(a, images), responses(b, images)
    categories = np.array([t.category for t in sorted(a, key=lambda t: t.image)])
    if dataset == "cue-conflict":
        parsed = [parse_stimulus_name(image) for image in images]
        keep = np.array([shape != texture for shape, texture in parsed])
        shapes = np.array([shape for shape, _ in parsed])[keep]
        textures = np.array([texture for _, texture in parsed])[keep]
        ra, rb = np.array(resp_a)[keep], np.array(resp_b)[keep]
        success_a, success_b = ra == shapes, rb == shapes
        # shape bias = shape hits / (shape + texture hits): the denominator differs per observer
        denom_a, denom_b = success_a | (ra == textures), success_b | (rb == textures)
        categories = shapes
        statistic = "shape_bias"
    else:
        success_a = np.array(resp_a) == categories
        success_b = np.array(resp_b) == categories
        denom_a = denom_b = np.ones(len(images), dtype=bool)
        statistic = "accuracy"
    value_a = float(_ratio(success_a.sum(), denom_a.sum()))
    value_b = float(_ratio(success_b.sum(), denom_b.sum()))
    ci = _paired_bootstrap(success_a, denom_a, success_b, denom_b, n_bootstrap=n_bootstrap, seed=seed, level=level)
    a_only = int((success_a & ~success_b).sum())
    b_only = int((success_b & ~success_a).sum())
    per_category = {}
    for category in CATEGORIES:
        mask = categories == category
        if not mask.any():
            continue
        va = float(_ratio(success_a[mask].sum(), denom_a[mask].sum()))
        vb = float(_ratio(success_b[mask].sum(), denom_b[mask].sum()))
        per_category[category] = {"a": va, "b": vb, "difference": va - vb, "images": int(mask.sum())}
    return PairedComparison(
        dataset=dataset,
        statistic=statistic,
        images=len(success_a),
        value_a=value_a,
        value_b=value_b,
        ci95=ci,
        a_only=a_only,
        b_only=b_only,
        mcnemar_p=mcnemar_exact(a_only, b_only),
        per_category=per_category,
        names=names,
    )


def _paired_bootstrap(
    hits_a: np.ndarray,
    denom_a: np.ndarray,
    hits_b: np.ndarray,
    denom_b: np.ndarray,
    *,
    n_bootstrap: int,
    seed: int,
    level: float,
) -> tuple[float, float]:
    n = len(hits_a)
    if n == 0 or n_bootstrap <= 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    samples = rng.integers(0, n, size=(n_bootstrap, n))  # one index set per resample, shared by A and B
    diff = _ratio(hits_a[samples].sum(1), denom_a[samples].sum(1)) - _ratio(
        hits_b[samples].sum(1), denom_b[samples].sum(1)
    )
    diff = diff[np.isfinite(diff)]
    if diff.size == 0:
        return math.nan, math.nan
    tail = (1 - level) / 2 * 100
    return float(np.percentile(diff, tail)), float(np.percentile(diff, 100 - tail))
