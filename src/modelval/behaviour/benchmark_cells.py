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
  draw for every observer and human, so trials stay paired) and h - 1 of each dataset's h human observers
  (with replacement: the small-panel correction of :func:`human_draws`; a pair of two draws of the same
  human is left out, as a human is never paired with itself, and a draw with fewer than 2 distinct humans
  is redrawn). Every resample recomputes the whole table, so the aggregate, the ranks and each kept
  condition's mean kappa get intervals too; ``used`` counts the resamples where each value was defined.
- **Rank intervals**: in each resample the complete observers are ranked as the table ranks them
  (:func:`~modelval.behaviour.benchmark_bands.rank_table`; ties share their mean rank); the interval is the
  2.5 and 97.5 percentiles of an observer's ranks.
- **Distinguishable pairs** (:mod:`modelval.behaviour.benchmark_pairs`): for each pair of observers and each
  measure, a paired sign-flip test of the difference of their aggregates, Holm-adjusted over the pairs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from modelval.behaviour.benchmark_bands import MEASURES, TableUncertainty, _interval, rank_table
from modelval.behaviour.benchmark_bands import _rank_rows as _rank_rows  # re-exported: the tests rank with it
from modelval.behaviour.benchmark_pairs import PairTest as PairTest  # re-exported where it used to live
from modelval.behaviour.benchmark_pairs import _cell_values, _nanmean, _pair_terms, pair_tests
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


def human_draws(rng: np.random.Generator, h: int, n_bootstrap: int, *, pairs: bool = False) -> np.ndarray:
    """(B, m) indices of the humans each resample draws: m = h - 1 of the panel's h (h when h <= 2), with
    replacement; with ``pairs`` (the humans' row) every row has at least 2 distinct humans (rows with fewer are
    redrawn, so every resample is used: the same law as keeping only the draws that have a pair).

    Drawing h - 1 is the small-panel correction of a bootstrap over few units: for a mean over the humans it makes
    the bootstrap variance ``(h - 1)/h * s^2 / (h - 1) = s^2 / h``, the unbiased variance of the mean (drawing h
    gives ``(h - 1)/h`` of it: 25% too small, the interval 13% too narrow, with 4 humans).

    Parameters
    ----------
    rng
        The seeded generator.
    h
        The panel's humans.
    n_bootstrap
        Bootstrap resamples.
    pairs
        Redraw the rows with fewer than 2 distinct humans.
    """
    m = h - 1 if h > 2 else h
    draws = rng.integers(0, h, size=(n_bootstrap, m))
    while pairs and h >= 2:
        short = np.flatnonzero((draws == draws[:, :1]).all(axis=1))
        if short.size == 0:
            break
        draws[short] = rng.integers(0, h, size=(short.size, m))
    return draws


@dataclass
class CellValues:
    """Per observer (and ``"humans"``): the four measures of one dataset, one row per resample."""

    values: dict[str, np.ndarray]  # label -> (B, 4) in MEASURES order
    degenerate: dict[str, int]  # "observers", "human_pairs": degenerate kappa cells (draw 0)
    per_condition_kappa: dict[str, list[float]]  # label -> mean kappa per kept condition (draw 0)
    #: label -> (C, B) mean kappa per kept condition and resample
    condition_samples: dict[str, np.ndarray] = field(default_factory=dict)


def _dataset_values(
    cells: DatasetCells,
    *,
    weights: Sequence[np.ndarray] | None = None,
    draws: np.ndarray | None = None,
    pair_draws: np.ndarray | None = None,
    rule: str = "one",
    na_handling: str = "wrong",
) -> CellValues:
    """The dataset's four measures for every observer and the humans' row, under ``weights`` (per condition,
    (B, n): how often each trial is drawn) and human ``draws`` ((B, m) indices into the panel; the humans' row
    ``pair_draws``, default ``draws``)."""
    exclude = na_handling == "exclude"
    h = len(cells.human_names)
    B = 1 if weights is None else weights[0].shape[0]
    d = np.tile(np.arange(h), (B, 1)) if draws is None else draws
    pd = d if pair_draws is None else pair_draws
    drawn_h = pd.shape[1]  # humans per resample: h, or fewer with a small-panel correction
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
        drawn = (rows[:, :, None], pd[:, :, None], pd[:, None, :])
        valid = np.triu(np.ones((drawn_h, drawn_h), dtype=bool), 1)[None] & (pd[:, :, None] != pd[:, None, :])
        weight = valid.astype(np.float64)
        values = [_nanmean(m[drawn].reshape(B, -1), weight.reshape(B, -1), 1) for m in (kappa, observed, diff)]
        per_cond["humans"].append(np.stack(values, axis=1))
        kappas["humans"].append(float(values[0][0]))
        human_hits = w @ cond.humans.T.astype(np.float64)  # (B, h)
        ood_num["humans"] += np.take_along_axis(human_hits, pd, axis=1).sum(axis=1)
        ood_den["humans"] += total * drawn_h
        for label, (x, xa) in cond.observers.items():
            terms = _pair_terms(x[None, :], xa[None, :], cond.humans, cond.human_answered, exclude)  # (h, n, 4)
            sums = np.tensordot(w, terms, axes=([1], [1]))  # (B, h, 4)
            kappa, observed, diff, degen = _cell_values(sums, rule)
            own = cells.self_index.get(label)
            degenerate["observers"] += int(sum(degen[0][j] for j in range(h) if j != own))
            weight = np.ones(d.shape) if own is None else (d != own).astype(np.float64)
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
    samples = {label: stacked[:, :, 0] for label, stacked in
               ((label, np.stack(found, axis=0)) for label, found in per_cond.items() if found)}  # fmt: skip
    return CellValues(result, degenerate, kappas, samples)


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
    rng = np.random.default_rng(check_seed(seed))
    datasets = list(cells)
    band = TableUncertainty(n_bootstrap, seed, permutations, {}, {}, [])
    samples = _bootstrap(cells, band, rng, rule=rule, na_handling=na_handling) if n_bootstrap > 0 else {}
    for label, per in samples.items():
        band.intervals[label] = {
            d: {m: _interval(rows[:, k]) for k, m in enumerate(MEASURES)} for d, rows in per.items()
        }
        band.used[label] = {d: {m: _defined(rows[:, k]) for k, m in enumerate(MEASURES)} for d, rows in per.items()}
        if all(d in per for d in datasets):
            aggregate = np.mean(np.stack([per[d] for d in datasets]), axis=0)
            band.intervals[label]["aggregate"] = {m: _interval(aggregate[:, k]) for k, m in enumerate(MEASURES)}
            band.used[label]["aggregate"] = {m: _defined(aggregate[:, k]) for k, m in enumerate(MEASURES)}
    if n_bootstrap > 0 and ranked:
        aggregates = np.stack([np.mean(np.stack([samples[label][d] for d in datasets]), axis=0) for label in ranked],
                              axis=1)  # (B, m, 4)  # fmt: skip
        ranks = rank_table(aggregates, higher_first, human_likeness)
        for i, label in enumerate(ranked):
            band.rank_intervals[label] = {m: _interval(found[:, i]) for m, found in ranks.items()}
    if permutations > 0 and len(ranked) > 1:
        point, _, _ = table_values(cells, rule=rule, na_handling=na_handling)
        band.pairs = pair_tests(dict(cells), ranked, point, measures=MEASURES, permutations=permutations, rng=rng,
                                rule=rule, na_handling=na_handling)  # fmt: skip
    return band


def _defined(samples: np.ndarray) -> int:
    return int(np.count_nonzero(~np.isnan(samples)))


def _bootstrap(
    cells: Mapping[str, DatasetCells], band: TableUncertainty, rng: np.random.Generator, *, rule: str, na_handling: str
) -> dict[str, dict[str, np.ndarray]]:
    """label -> dataset -> (B, 4) resampled values; fills the band's per-condition intervals and human draws."""
    samples: dict[str, dict[str, np.ndarray]] = {}
    for dataset, found in cells.items():
        weights = [rng.multinomial(c.humans.shape[1], np.full(c.humans.shape[1], 1 / c.humans.shape[1]),
                                   size=band.n_bootstrap).astype(np.float64) for c in found.conditions]  # fmt: skip
        h = len(found.human_names)
        draws, pairs = human_draws(rng, h, band.n_bootstrap), human_draws(rng, h, band.n_bootstrap, pairs=True)
        band.human_draws[dataset] = (h, draws.shape[1])
        result = _dataset_values(found, weights=weights, draws=draws, pair_draws=pairs, rule=rule,
                                 na_handling=na_handling)  # fmt: skip
        for label, rows in result.values.items():
            samples.setdefault(label, {})[dataset] = rows
        for label, per_condition in result.condition_samples.items():
            band.condition_intervals.setdefault(label, {})[dataset] = {
                cond.condition: _interval(per_condition[c]) for c, cond in enumerate(found.conditions)
            }
    return samples
