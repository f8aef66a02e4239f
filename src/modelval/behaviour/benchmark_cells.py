"""The benchmark table's numbers as arrays: values, degenerate kappa cells, bootstrap intervals, rank
intervals and paired tests between observers.

Every value of model-vs-human's table (:mod:`modelval.behaviour.benchmark`) is a mean of *cells*: one
cell is one observer against one human observer (or one pair of humans) in one kept condition, computed
from four sums over the condition's trials, ``[n, correct_x, correct_y, agree]`` (only the trials the pair
keeps: all of them, or with ``na_handling="exclude"`` those both answered). A resample or a sign flip
changes the sums linearly, so a whole bootstrap is one matrix product per condition.

- **Values** (as the table): per condition the mean over the humans of each cell value (kappa, observed
  consistency, squared accuracy difference), then the mean over the kept conditions; OOD accuracy is
  pooled over the kept conditions' trials; the humans' row is the mean over pairs of distinct humans.
- **Degenerate kappa.** When an observer of a cell is always right (or always wrong) in the condition,
  kappa says nothing about shared errors: the expected agreement equals the other's accuracy, so kappa is
  0 whatever the other does, and when both are always right it is 0/0, which model-vs-human sets to 1
  (its rule: kappa = 1 whenever the observed agreement is 1). ``"one"`` (the default) keeps
  model-vs-human's values, so its tables reproduce; ``"nan"`` leaves these cells out of the means (Klein
  et al., NeurIPS 2025: kappa is undefined there). The cells are counted under either rule.
- **Intervals**: a seeded percentile bootstrap that resamples the trials within each condition (the same
  draw for every observer and human, so trials stay paired) and the human observers within each dataset's
  panel (with replacement; a pair of two draws of the same human is left out, as a human is never paired
  with itself). Every resample recomputes the whole table, so the aggregate and the ranks get intervals too.
- **Rank intervals**: in each resample the complete observers are ranked as the table ranks them (ties
  share their mean rank); the interval is the 2.5 and 97.5 percentiles of an observer's ranks.
- **Distinguishable pairs**: for each pair of observers and each measure, a paired sign-flip test of
  the difference of their aggregates (per trial, which of the two gave which answer is a coin flip; the
  humans are held fixed), Holm-adjusted over the pairs of each measure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from modelval.behaviour.decisions import NO_RESPONSE, Decision
from modelval.behaviour.trials import aligned
from modelval.errors import DataError
from modelval.parsing import check_seed

#: How a kappa cell counts where an observer is always right (or always wrong) in the condition.
DEGENERATE_KAPPA: tuple[str, ...] = ("one", "nan")
DEGENERATE_MEANINGS = {
    "one": "model-vs-human's rule: kappa = 1 whenever the observed agreement is 1 (so 1 when both observers of a "
    "cell are always right, where the formula is 0/0), else the formula (0 when one observer is always right or "
    "always wrong)",
    "nan": "kappa undefined (NaN) in a cell where an observer is always right or always wrong in the condition "
    "(expected agreement = the other's accuracy, or 1): such cells are left out of the means (Klein et al., "
    "NeurIPS 2025)",
}
MEASURES: tuple[str, ...] = ("ood_accuracy", "accuracy_difference", "observed_consistency", "error_consistency")
RESAMPLING = (
    "percentile bootstrap: the trials resampled with replacement within each condition (the same draw for every "
    "observer and human, so trials stay paired), and the human observers resampled with replacement within each "
    "dataset's panel (pairs of two draws of the same human left out); each resample recomputes the whole table"
)
PAIRED_TEST = (
    "paired sign-flip test of the difference of two observers' aggregates: on each trial which of the two gave "
    "which answer is a coin flip, the humans held fixed; two-sided, Monte Carlo with the seed, p >= 2/(N+1); "
    "Holm-adjusted over the pairs of each measure"
)


def check_degenerate_kappa(rule: str) -> str:
    """Refuse an unknown degenerate-kappa rule.

    Parameters
    ----------
    rule
        The rule to check.
    """
    if rule not in DEGENERATE_KAPPA:
        raise DataError(f"unknown degenerate-kappa rule {rule!r}; expected one of: {', '.join(DEGENERATE_KAPPA)}")
    return rule


@dataclass
class ConditionCells:
    """One kept condition: the humans' and each observer's correctness (and answered) on the same images."""

    condition: str
    humans: np.ndarray  # (h, n) bool
    human_answered: np.ndarray  # (h, n) bool
    observers: dict[str, tuple[np.ndarray, np.ndarray]]  # label -> (correct, answered), each (n,)


@dataclass
class DatasetCells:
    """One dataset's kept conditions and the humans (the same observers in every condition)."""

    dataset: str
    human_names: list[str]
    conditions: list[ConditionCells]
    #: observer label -> the index of the human it is (left out of its own comparisons), if it is one
    self_index: dict[str, int | None] = field(default_factory=dict)


def dataset_cells(
    observers: Mapping[str, Sequence[Decision]], panel_observers: Mapping[str, Sequence[Decision]], dataset: str,
    conditions: Sequence[str],
) -> DatasetCells:  # fmt: skip
    """The cells of ``dataset``: ``observers[label] -> trials`` and the humans, per kept condition.

    Parameters
    ----------
    observers
        Label -> that observer's trials.
    panel_observers
        Human -> trials.
    dataset
        One of :data:`~modelval.behaviour.experiments.DATASET_NAMES`.
    conditions
        The kept conditions.
    """
    from modelval.behaviour.conditions import trials_by_condition

    names = sorted(panel_observers)
    humans = {name: trials_by_condition(panel_observers[name], dataset) for name in names}
    mine = {label: trials_by_condition(trials, dataset) for label, trials in observers.items()}
    cells = []
    for condition in conditions:
        if not any(condition in humans[name] for name in names):
            continue
        reference = humans[names[0]].get(condition, [])
        images = aligned(reference, reference)
        h_correct, h_answered = zip(*(_vectors(humans[name].get(condition, []), images) for name in names), strict=True)
        per: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for label, groups in mine.items():
            found = groups.get(condition, [])
            aligned(found, reference, names=(label or "the decisions", f"human {names[0]}"))
            per[label] = _vectors(found, images)
        cells.append(ConditionCells(condition, np.array(h_correct), np.array(h_answered), per))
    subjects = {label: (trials[0].subject if trials else "") for label, trials in observers.items()}
    self_index = {label: (names.index(subject) if subject in names else None) for label, subject in subjects.items()}
    return DatasetCells(dataset, names, cells, self_index)


def _vectors(trials: Sequence[Decision], images: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    index = {t.image: t for t in trials}
    try:
        chosen = [index[image] for image in images]
    except KeyError as error:
        raise DataError(f"no trial for image {error.args[0]!r}") from None
    return (
        np.array([t.correct for t in chosen], dtype=bool),
        np.array([t.response != NO_RESPONSE for t in chosen], dtype=bool),
    )


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
class CellValues:
    """Per observer (and ``"humans"``): the four measures of one dataset, one row per resample."""

    values: dict[str, np.ndarray]  # label -> (B, 4) in MEASURES order
    degenerate: dict[str, int]  # "observers", "human_pairs": degenerate kappa cells (draw 0)
    per_condition_kappa: dict[str, list[float]]  # label -> mean kappa per kept condition (draw 0)


def _dataset_values(
    cells: DatasetCells,
    *,
    weights: Sequence[np.ndarray] | None = None,
    draws: np.ndarray | None = None,
    rule: str = "one",
    na_handling: str = "wrong",
) -> CellValues:
    """The dataset's four measures for every observer and the humans' row, under ``weights`` (per condition,
    (B, n): how often each trial is drawn) and human ``draws`` ((B, h) indices into the panel)."""
    exclude = na_handling == "exclude"
    h = len(cells.human_names)
    B = 1 if weights is None else weights[0].shape[0]
    d = np.tile(np.arange(h), (B, 1)) if draws is None else draws
    rows = np.arange(B)[:, None]
    labels = list(cells.conditions[0].observers) if cells.conditions else []
    per_cond: dict[str, list[np.ndarray]] = {label: [] for label in [*labels, "humans"]}
    ood_num: dict[str, np.ndarray] = {label: np.zeros(B) for label in [*labels, "humans"]}
    ood_den: dict[str, np.ndarray] = {label: np.zeros(B) for label in [*labels, "humans"]}
    degenerate = {"observers": 0, "human_pairs": 0}
    kappas: dict[str, list[float]] = {label: [] for label in [*labels, "humans"]}
    iu = np.triu_indices(h, 1)
    for index, cond in enumerate(cells.conditions):
        n = cond.humans.shape[1]
        w = np.ones((1, n)) if weights is None else weights[index]
        total = w.sum(axis=1)
        # the humans' pairs: (h, h, n, 4) terms -> (B, h, h, 4) sums
        terms = _pair_terms(cond.humans[:, None, :], cond.human_answered[:, None, :], cond.humans[None, :, :],
                            cond.human_answered[None, :, :], exclude)  # fmt: skip
        sums = np.tensordot(w, terms, axes=([1], [2]))  # (B, h, h, 4)
        kappa, observed, diff, degen = _cell_values(sums, rule)
        degenerate["human_pairs"] += int(degen[0][iu].sum())
        drawn = (rows[:, :, None], d[:, :, None], d[:, None, :])
        valid = np.triu(np.ones((h, h), dtype=bool), 1)[None] & (d[:, :, None] != d[:, None, :])
        weight = valid.astype(np.float64)
        values = [_nanmean(m[drawn].reshape(B, -1), weight.reshape(B, -1), 1) for m in (kappa, observed, diff)]
        per_cond["humans"].append(np.stack(values, axis=1))
        kappas["humans"].append(float(values[0][0]))
        human_hits = w @ cond.humans.T.astype(np.float64)  # (B, h)
        ood_num["humans"] += np.take_along_axis(human_hits, d, axis=1).sum(axis=1)
        ood_den["humans"] += total * h
        for label, (x, xa) in cond.observers.items():
            terms = _pair_terms(x[None, :], xa[None, :], cond.humans, cond.human_answered, exclude)  # (h, n, 4)
            sums = np.tensordot(w, terms, axes=([1], [1]))  # (B, h, 4)
            kappa, observed, diff, degen = _cell_values(sums, rule)
            own = cells.self_index.get(label)
            degenerate["observers"] += int(sum(degen[0][j] for j in range(h) if j != own))
            weight = np.ones((B, h)) if own is None else (d != own).astype(np.float64)
            values = [_nanmean(np.take_along_axis(m, d, axis=1), weight, 1) for m in (kappa, observed, diff)]
            per_cond[label].append(np.stack(values, axis=1))
            kappas[label].append(float(values[0][0]))
            ood_num[label] += w @ x.astype(np.float64)
            ood_den[label] += total
    result = {}
    for label, found in per_cond.items():
        stacked = np.stack(found, axis=0) if found else np.full((1, B, 3), np.nan)  # (C, B, 3)
        means = _nanmean(stacked, np.ones_like(stacked), 0)  # (B, 3): mean over the kept conditions
        with np.errstate(invalid="ignore", divide="ignore"):
            ood = ood_num[label] / ood_den[label]
        result[label] = np.column_stack([ood, means[:, 2], means[:, 1], means[:, 0]])  # MEASURES' order
    return CellValues(result, degenerate, kappas)


def table_values(
    cells: Mapping[str, DatasetCells], *, rule: str = "one", na_handling: str = "wrong"
) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, dict[str, int]], dict[str, dict[str, list[float]]]]:
    """Point values: ``label -> dataset -> (4,)`` (``"humans"`` included), degenerate cells per dataset, and the mean
    kappa per kept condition (``label -> dataset -> [...]``).

    Parameters
    ----------
    cells
        Dataset -> its cells.
    rule
        The degenerate-kappa rule (:data:`DEGENERATE_KAPPA`).
    na_handling
        How a "na" answer counts: ``"wrong"`` or ``"exclude"``.
    """
    values: dict[str, dict[str, np.ndarray]] = {}
    degenerate: dict[str, dict[str, int]] = {}
    kappas: dict[str, dict[str, list[float]]] = {}
    for dataset, found in cells.items():
        result = _dataset_values(found, rule=rule, na_handling=na_handling)
        degenerate[dataset] = result.degenerate
        for label, row in result.values.items():
            values.setdefault(label, {})[dataset] = row[0]
            kappas.setdefault(label, {})[dataset] = result.per_condition_kappa[label]
    return values, degenerate, kappas


def _rank_rows(values: np.ndarray, higher_first: bool) -> np.ndarray:
    """Average ranks along the last axis (1 = best; ties share their mean rank; NaN gets no rank)."""
    v = values if higher_first else -values
    better = (v[..., None, :] > v[..., :, None]).sum(axis=-1)
    equal = (v[..., None, :] == v[..., :, None]).sum(axis=-1)
    ranks = 1.0 + better + (equal - 1) / 2.0
    return np.where(np.isnan(values), np.nan, ranks)


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

    @property
    def distinguishable(self) -> bool:
        return not math.isnan(self.p_holm) and self.p_holm < 0.05

    def to_dict(self) -> dict[str, object]:
        floor = 2 / (self.permutations + 1) if self.permutations else math.nan
        return {
            "a": self.a,
            "b": self.b,
            "measure": self.measure,
            "difference": self.difference,
            "p": self.p,
            "p_at_floor": bool(self.permutations) and self.p <= floor * (1 + 1e-9),
            "p_holm": self.p_holm,
            "distinguishable": self.distinguishable,
        }


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

    def to_dict(self) -> dict[str, object]:
        return {
            "intervals_method": f"{RESAMPLING}; {self.n_bootstrap} resamples, seed {self.seed}; 95% percentile",
            "ranks_method": "in each resample the complete observers ranked as the table ranks them; the interval "
            "is the 2.5 and 97.5 percentiles of an observer's ranks",
            "pairs_method": f"{PAIRED_TEST}; {self.permutations} sign-flip sets, seed {self.seed}",
            "n_bootstrap": self.n_bootstrap,
            "seed": self.seed,
            "permutations": self.permutations,
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


def table_uncertainty(
    cells: Mapping[str, DatasetCells],
    ranked: Sequence[str],
    *,
    higher_first: Mapping[str, bool],
    human_likeness: Sequence[str],
    rule: str = "one",
    na_handling: str = "wrong",
    n_bootstrap: int = 1000,
    seed: int = 0,
    permutations: int = 2000,
) -> TableUncertainty:
    """The bootstrap intervals, rank intervals and pairwise tests of the table (see the module doc).

    ``ranked``: the complete observers (covering every dataset of ``cells``), ranked as the table ranks them.

    Parameters
    ----------
    cells
        Dataset -> its cells.
    ranked
        The complete observers, ranked as the table ranks them.
    higher_first
        Measure -> True when a higher value ranks first.
    human_likeness
        The measures that compare with the humans.
    rule
        The degenerate-kappa rule (:data:`DEGENERATE_KAPPA`).
    na_handling
        How a "na" answer counts: ``"wrong"`` or ``"exclude"``.
    n_bootstrap
        Bootstrap resamples (0: no interval).
    seed
        Seed of the resamples.
    permutations
        Random sign flips of the pairwise tests (0: none).
    """
    from modelval.behaviour.permutation import holm, two_sided_p

    rng = np.random.default_rng(check_seed(seed))
    datasets = list(cells)
    samples: dict[str, dict[str, np.ndarray]] = {}
    if n_bootstrap > 0:
        for dataset in datasets:
            found = cells[dataset]
            weights = [rng.multinomial(c.humans.shape[1], np.full(c.humans.shape[1], 1 / c.humans.shape[1]),
                                       size=n_bootstrap).astype(np.float64) for c in found.conditions]  # fmt: skip
            draws = rng.integers(0, len(found.human_names), size=(n_bootstrap, len(found.human_names)))
            result = _dataset_values(found, weights=weights, draws=draws, rule=rule, na_handling=na_handling)
            for label, rows in result.values.items():
                samples.setdefault(label, {})[dataset] = rows
    intervals: dict[str, dict[str, dict[str, tuple[float, float]]]] = {}
    for label, per in samples.items():
        intervals[label] = {d: {m: _interval(rows[:, k]) for k, m in enumerate(MEASURES)} for d, rows in per.items()}
        if all(d in per for d in datasets):
            aggregate = np.mean(np.stack([per[d] for d in datasets]), axis=0)
            intervals[label]["aggregate"] = {m: _interval(aggregate[:, k]) for k, m in enumerate(MEASURES)}
    rank_intervals: dict[str, dict[str, tuple[float, float]]] = {}
    if n_bootstrap > 0 and ranked:
        aggregates = np.stack([np.mean(np.stack([samples[label][d] for d in datasets]), axis=0) for label in ranked],
                              axis=1)  # (B, m, 4)  # fmt: skip
        ranks = {m: _rank_rows(aggregates[:, :, k], higher_first[m]) for k, m in enumerate(MEASURES)}
        mean_rank = np.mean(np.stack([ranks[m] for m in human_likeness]), axis=0)
        for i, label in enumerate(ranked):
            rank_intervals[label] = {m: _interval(ranks[m][:, i]) for m in MEASURES}
            rank_intervals[label]["mean_rank"] = _interval(mean_rank[:, i])
    pairs: list[PairTest] = []
    if permutations > 0 and len(ranked) > 1:
        point, _, _ = table_values(cells, rule=rule, na_handling=na_handling)
        for a, b in combinations(ranked, 2):
            observed = np.mean([point[a][d] - point[b][d] for d in datasets], axis=0)
            null = np.mean([_flipped_difference(cells[d], a, b, permutations, rng, rule, na_handling)
                            for d in datasets], axis=0)  # (P, 4)  # fmt: skip
            for k, measure in enumerate(MEASURES):
                p = two_sided_p(null[:, k], float(observed[k]), permutations=permutations)
                pairs.append(PairTest(a, b, measure, float(observed[k]), p, permutations=permutations))
        for measure in MEASURES:
            family = {f"{t.a}\0{t.b}": t.p for t in pairs if t.measure == measure}
            adjusted = holm(family)
            for t in pairs:
                if t.measure == measure:
                    t.p_holm = adjusted[f"{t.a}\0{t.b}"]
    return TableUncertainty(n_bootstrap, seed, permutations, intervals, rank_intervals, pairs)


def _flipped_difference(
    cells: DatasetCells, a: str, b: str, permutations: int, rng: np.random.Generator, rule: str, na_handling: str
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
