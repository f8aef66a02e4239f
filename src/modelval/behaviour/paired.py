"""Paired statistics of two observers on the same images: do two models (or two protocols) differ?

The statistic is the shape bias on cue-conflict images (shape hits / (shape + texture hits) over the
conflict images) and the 16-class accuracy on the other experiments. Both observers answered the same
images, so everything is paired, and every interval and p-value belongs to the number it is printed with:

- the **difference** A - B of the statistic, with a seeded percentile bootstrap 95% interval in which
  one set of resample weights serves both observers. On cue-conflict the bootstrap resamples the
  texture images by default (:mod:`modelval.behaviour.resampling`: stimuli that share a texture image
  are not independent); elsewhere it resamples images.
- the **test of that difference**: a paired permutation test (A's and B's answers swapped on a random
  subset of the stimuli, :mod:`modelval.behaviour.permutation`) with a stated number of permutations
  and seed.
- **per category**: the difference on the images of each (shape) category, its interval from the same
  resamples, and an exact paired permutation test, Holm-adjusted over the categories.
- the exact **McNemar test**, kept under its own name because it tests another quantity: on
  cue-conflict the *shape-decision rate* (shape hits / conflict images: shape hit vs not, a texture hit
  and any other answer alike), elsewhere the accuracy (where it is the exact test of the difference
  printed). Under "no difference" a discordant image is equally likely to favour either observer, so the
  count favouring A is Binomial(discordant, 1/2); the two-sided p-value is ``min(1, 2 * P(X <= min(b, c)))``,
  as in statsmodels' ``mcnemar(exact=True)``. The shape-decision rate and the shape bias can disagree
  both ways: a protocol that turns texture answers into "other" answers raises the shape bias without
  a single extra shape hit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.decisions import Decision
from modelval.behaviour.experiments import get_dataset
from modelval.behaviour.permutation import (
    DEFAULT_PERMUTATIONS,
    PermutationTest,
    exact_permutation_test,
    holm,
    permutation_test,
)
from modelval.behaviour.resampling import (
    RESAMPLING_DESCRIPTIONS,
    bootstrap_weights,
    percentile_interval,
    resampling_for,
)
from modelval.behaviour.trials import aligned, responses

#: What a discordant image is, with cue conflicts (True) and without.
DISCORDANT_DEFINITIONS = {
    True: "conflict images where exactly one observer chose the shape category (shape hit vs not)",
    False: "images where exactly one observer answered correctly",
}
#: The statistic McNemar tests, with cue conflicts (True) and without, and its meaning.
MCNEMAR_STATISTICS = {
    True: (
        "shape_decision_rate",
        "shape hits / conflict images: NOT the shape bias (a texture hit and any other answer count alike)",
    ),
    False: ("accuracy", "correct / images: the statistic of the comparison itself"),
}
PER_CATEGORY_METHOD = (
    "exact paired permutation test per category (all 2^d sign flips, counted by stimulus type), "
    "Holm-adjusted over the categories with a defined difference"
)


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value for ``b`` and ``c`` discordant pairs (1.0 when there are none).

    Parameters
    ----------
    b
        Pairs only A answered correctly.
    c
        Pairs only B answered correctly.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got {b} and {c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = Fraction(sum(math.comb(n, k) for k in range(min(b, c) + 1)), 2**n)
    return float(min(Fraction(1), 2 * tail))


def mcnemar_mid_p(b: int, c: int) -> float:
    """The two-sided McNemar mid-p value: ``2 P(X < min) + P(X = min)``, X ~ Bin(b + c, 1/2) (1.0 with no
    discordant pairs).

    Parameters
    ----------
    b, c
        The discordant pairs: only the first hits, only the second hits.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got {b} and {c}")
    n, k = b + c, min(b, c)
    if n == 0:
        return 1.0
    below = sum(math.comb(n, i) for i in range(k))  # exact, as mcnemar_exact: no float tail sums
    return float(min(Fraction(1), Fraction(2 * below + math.comb(n, k), 2**n)))


@dataclass(frozen=True)
class McNemar:
    """The exact McNemar test of the success rate (shape-decision rate on cue-conflict, else accuracy)."""

    statistic: str
    rate_a: float
    rate_b: float
    a_only: int  # discordant images where only A succeeded
    b_only: int
    definition: str
    meaning: str

    @property
    def p(self) -> float:
        return mcnemar_exact(self.a_only, self.b_only)

    def to_dict(self) -> dict[str, object]:
        return {
            "statistic": self.statistic,
            "statistic_meaning": self.meaning,
            "method": "exact McNemar (binomial test on the discordant images)",
            "rate_a": self.rate_a,
            "rate_b": self.rate_b,
            "difference": self.rate_a - self.rate_b,
            "p": self.p,
            "discordant": {
                "a_only": self.a_only,
                "b_only": self.b_only,
                "total": self.a_only + self.b_only,
                "definition": self.definition,
            },
        }


@dataclass(frozen=True)
class CategoryDifference:
    """A - B on the images of one (shape) category, with its interval and exact test."""

    a: float
    b: float
    images: int
    ci95: tuple[float, float]
    p: float
    p_holm: float = math.nan

    @property
    def difference(self) -> float:
        return self.a - self.b

    def to_dict(self) -> dict[str, object]:
        return {
            "a": self.a,
            "b": self.b,
            "difference": self.difference,
            "images": self.images,
            "ci95": list(self.ci95),
            "p": self.p,
            "p_holm": self.p_holm,
        }


@dataclass(frozen=True)
class PairedComparison:
    """A - B on the same images; ``statistic`` is "shape_bias" or "accuracy"."""

    dataset: str
    statistic: str
    images: int
    value_a: float
    value_b: float
    ci95: tuple[float, float]
    resampling: str
    n_bootstrap: int
    seed: int
    test: PermutationTest
    mcnemar: McNemar
    per_category: dict[str, CategoryDifference]
    names: tuple[str, str] = ("A", "B")

    @property
    def difference(self) -> float:
        return self.value_a - self.value_b

    @property
    def mcnemar_p(self) -> float:
        return self.mcnemar.p

    @property
    def a_only(self) -> int:
        return self.mcnemar.a_only

    @property
    def b_only(self) -> int:
        return self.mcnemar.b_only

    def to_dict(self) -> dict[str, object]:
        defined = sum(not math.isnan(row.p) for row in self.per_category.values())
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
            "ci95_resampling": self.resampling,
            "ci95_method": f"paired percentile bootstrap, {self.n_bootstrap} resamples, seed {self.seed}: "
            f"{RESAMPLING_DESCRIPTIONS[self.resampling]}; the same resamples for A and B",
            "test": self.test.to_dict(),
            "mcnemar": self.mcnemar.to_dict(),
            "per_category": {name: row.to_dict() for name, row in self.per_category.items()},
            "per_category_tests": {
                "method": PER_CATEGORY_METHOD,
                "correction": "Holm",
                "family": defined,
                "ci95": "the same bootstrap resamples, restricted to the category's images",
            },
        }


def _ratio(hits: np.ndarray, totals: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return hits / totals


def compare_paired(
    a: Sequence[Decision],
    b: Sequence[Decision],
    *,
    dataset: str,
    names: tuple[str, str] = ("A", "B"),
    n_bootstrap: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    resample: str | None = None,
    permutations: int = DEFAULT_PERMUTATIONS,
) -> PairedComparison:
    """Paired comparison of two observers' trials on ``dataset`` (see the module docstring).

    Parameters
    ----------
    a
        Observer A's trials.
    b
        Observer B's trials.
    dataset
        One of :data:`~modelval.behaviour.experiments.DATASET_NAMES`.
    names
        How A and B are named.
    n_bootstrap
        Bootstrap resamples (0: no interval).
    seed
        Seed of the resamples.
    level
        Coverage of the interval (0.95: 95%).
    resample
        The bootstrap's unit (``None``: texture images on cue conflicts, images elsewhere).
    permutations
        Random sign-flip sets of the permutation test (0: none).
    """
    cue_conflict = get_dataset(dataset).has_conflicts
    unit = get_dataset(dataset).resampling(resample)
    images = aligned(a, b, names=names)
    resp_a, resp_b = np.array(responses(a, images)), np.array(responses(b, images))
    index = {t.image: t for t in a}
    categories = np.array([index[image].shape for image in images])
    if cue_conflict:
        keep = np.array([index[image].is_conflict for image in images], dtype=bool)
        images = [image for image, kept in zip(images, keep, strict=True) if kept]
        shapes = categories[keep]
        textures = np.array([index[image].texture for image in images])
        ra, rb = resp_a[keep], resp_b[keep]
        num_a, num_b = ra == shapes, rb == shapes
        # shape bias = shape hits / (shape + texture hits): the denominator differs per observer
        den_a, den_b = num_a | (ra == textures), num_b | (rb == textures)
        categories = shapes
        statistic = "shape_bias"
    else:
        num_a, num_b = resp_a == categories, resp_b == categories
        den_a = den_b = np.ones(len(images), dtype=bool)
        statistic = "accuracy"
    value_a = float(_ratio(num_a.sum(), den_a.sum()))
    value_b = float(_ratio(num_b.sum(), den_b.sum()))
    present = [c for c in CATEGORIES if (categories == c).any()]
    members = np.stack([categories == c for c in present], axis=1).astype(np.float64)  # images x categories
    overall, per_category_ci = _paired_bootstrap(
        (num_a, den_a, num_b, den_b), members, images, unit, n_bootstrap=n_bootstrap, seed=seed, level=level
    )
    test_name = f"{statistic}_difference"
    test = permutation_test(num_a, den_a, num_b, den_b, statistic=test_name, permutations=permutations, seed=seed)
    per_category = _per_category(
        (num_a, den_a, num_b, den_b), members, present, per_category_ci, test_name, permutations, seed
    )
    key = cue_conflict
    rate = (num_a.mean(), num_b.mean()) if len(num_a) else (math.nan, math.nan)
    mcnemar = McNemar(
        statistic=MCNEMAR_STATISTICS[key][0],
        rate_a=float(rate[0]),
        rate_b=float(rate[1]),
        a_only=int((num_a & ~num_b).sum()),
        b_only=int((num_b & ~num_a).sum()),
        definition=DISCORDANT_DEFINITIONS[key],
        meaning=MCNEMAR_STATISTICS[key][1],
    )
    return PairedComparison(
        dataset=dataset,
        statistic=statistic,
        images=len(num_a),
        value_a=value_a,
        value_b=value_b,
        ci95=overall,
        resampling=unit,
        n_bootstrap=n_bootstrap,
        seed=seed,
        test=test,
        mcnemar=mcnemar,
        per_category=per_category,
        names=names,
    )


def _per_category(
    terms: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    members: np.ndarray,
    present: list[str],
    intervals: list[tuple[float, float]],
    test_name: str,
    permutations: int,
    seed: int,
) -> dict[str, CategoryDifference]:
    """Each category's values, interval and exact permutation test, with Holm's adjustment over the categories."""
    rows = {}
    for j, category in enumerate(present):
        mask = members[:, j].astype(bool)
        num_a, den_a, num_b, den_b = (term[mask] for term in terms)
        try:
            p = exact_permutation_test(num_a, den_a, num_b, den_b, statistic=test_name).p
        except ValueError:  # a very large category (not the published sets): Monte Carlo instead
            p = permutation_test(
                num_a, den_a, num_b, den_b, statistic=test_name, permutations=permutations, seed=seed
            ).p
        rows[category] = CategoryDifference(
            a=float(_ratio(num_a.sum(), den_a.sum())),
            b=float(_ratio(num_b.sum(), den_b.sum())),
            images=int(mask.sum()),
            ci95=intervals[j],
            p=p,
        )
    adjusted = holm({name: row.p for name, row in rows.items()})
    return {
        name: CategoryDifference(row.a, row.b, row.images, row.ci95, row.p, adjusted[name])
        for name, row in rows.items()
    }


def _paired_bootstrap(
    terms: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    members: np.ndarray,
    images: Sequence[str],
    unit: str,
    *,
    n_bootstrap: int,
    seed: int,
    level: float,
) -> tuple[tuple[float, float], list[tuple[float, float]]]:
    """Intervals of A - B overall and per category, from one set of resample weights shared by A and B."""
    nan = (math.nan, math.nan)
    if not len(images) or n_bootstrap <= 0:
        return nan, [nan] * members.shape[1]
    resampling = resampling_for(images, unit)
    columns = np.concatenate([np.ones((len(images), 1)), members], axis=1)  # overall, then each category
    na, da, nb, db = (np.asarray(t, dtype=np.float64)[:, None] * columns for t in terms)
    chunks = []
    for weights in bootstrap_weights(len(images), resampling, n_bootstrap=n_bootstrap, seed=seed):
        chunks.append(_ratio(weights @ na, weights @ da) - _ratio(weights @ nb, weights @ db))
    differences = np.concatenate(chunks)  # resamples x (1 + categories)
    intervals = [percentile_interval(differences[:, j], level) for j in range(columns.shape[1])]
    return intervals[0], intervals[1:]
