"""model-vs-human's benchmark table: OOD accuracy and three human-likeness measures, per dataset and overall.

Following ``modelvshuman/plotting/plot.py`` of bethgelab/model-vs-human (``get_raw_benchmark_df``,
``format_benchmark_df``, ``get_mean_over_datasets``, ``print_benchmark_table_accuracy_to_latex`` and
``print_benchmark_table_humanlike_to_latex``):

- **Conditions.** On the 12 parametric datasets the benchmark leaves out the undistorted control and the
  levels where the humans' mean accuracy is below 0.2 (``EXCLUDE_CONDITIONS``,
  :attr:`modelval.behaviour.experiments.Experiment.excluded`); ``all_conditions=True`` keeps every level.
- **OOD accuracy** of a dataset: correct / trials over the kept conditions pooled (``na`` is wrong); the
  humans' over all the human observers' trials in the kept conditions, pooled (upstream's "humans" decision
  maker, on the same conditions as everyone else).
- **Accuracy difference** (squared), **observed consistency** and **error consistency** of a dataset: in
  each kept condition the value with each human observer (:mod:`modelval.behaviour.conditions`), averaged
  over the conditions and then over the humans (equal weights, so the order does not matter).
- **The humans' row**: every pair of distinct human observers, averaged over the conditions and then over
  the pairs: a reference, not ranked.
- **Aggregate**: the mean over the datasets of the table (an observer without one of them gets none).
- **Ranks** among the observers given, as upstream's tables: OOD accuracy (highest first); accuracy
  difference (lowest first), observed and error consistency (highest first) and their **mean rank**. Ties
  share the mean of their ranks (pandas' ``rank()``). The human-likeness ranks and the mean rank are among
  the observers with all three measures defined: an observer whose error consistency is undefined (with
  ``degenerate_kappa="nan"``, always right or always wrong in every kept condition of a dataset) gets none of
  them, with the reason in :meth:`BenchmarkTable.unranked`, rather than a mean rank over fewer measures or
  others' ranks among fewer observers.

**Brain-Score's Geirhos2021 ceiled score** (``brainscore_vision/benchmarks/geirhos2021/benchmark.py`` and
``metrics/error_consistency/metric.py`` of brain-score/vision), optional: per dataset, the raw score is
``|mean over the kept conditions and the human subjects of kappa(model, subject)|``, the ceiling the same
over pairs of subjects, ``|mean kappa(subject_i, subject_j)|``, and the score ``raw / ceiling`` clipped to
[0, 1]. Brain-Score takes the absolute value, so a mean kappa below 0 scores like one above; its own
kappa has no ``c_obs == 1`` rule (modelval keeps model-vs-human's, kappa = 1, which only matters for two
observers agreeing on every trial). Its excluded conditions are model-vs-human's (it names false-colour's
``true`` files "False-Colour" and leaves them out: the same trials).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from modelval.behaviour.benchmark_bands import HUMAN_RANKING, rank_table
from modelval.behaviour.benchmark_cells import (
    DEGENERATE_MEANINGS,
    TableUncertainty,
    check_degenerate_kappa,
    dataset_cells,
    table_uncertainty,
    table_values,
)
from modelval.behaviour.benchmark_scores import (
    BRAIN_SCORE_DEFINITION,
    HIGHER_FIRST,
    HUMAN_LIKENESS,
    METADATA_FIELDS,
    METADATA_MEANING,
    METRIC_MEANINGS,
    METRICS,
    RANK_RULE,
    SCALES,
    BrainScore,
    DatasetScores,
    ModelMetadata,
    average_ranks,
    brain_score,
    kept_conditions,
    mean,
    score_humans,
    score_observer,
)
from modelval.behaviour.conditions import (
    NO_BOOTSTRAP,
    ConditionComparison,
    HumanCondition,
    compare_by_condition,
    humans_by_condition,
)
from modelval.behaviour.decisions import Decision
from modelval.behaviour.experiments import BENCHMARK_DATASETS
from modelval.behaviour.humans import HumanPanel

__all__ = [
    "BRAIN_SCORE_DEFINITION",
    "HIGHER_FIRST",
    "HUMAN_LIKENESS",
    "METADATA_FIELDS",
    "METADATA_MEANING",
    "METRICS",
    "METRIC_MEANINGS",
    "RANK_RULE",
    "SCALES",
    "BenchmarkTable",
    "BrainScore",
    "DatasetScores",
    "ModelMetadata",
    "average_ranks",
    "benchmark_table",
    "brain_score",
    "kept_conditions",
    "score_humans",
    "score_observer",
]


@dataclass
class BenchmarkTable:
    """model-vs-human's benchmark for several observers: per dataset, aggregated, ranked."""

    datasets: tuple[str, ...]
    observers: dict[str, dict[str, DatasetScores]]
    humans: dict[str, DatasetScores]
    all_conditions: bool = False
    na_handling: str = "wrong"
    with_brain_score: bool = False
    sources: dict[str, dict[str, str]] = field(default_factory=dict)
    #: How a degenerate kappa cell counts (``"one"``: model-vs-human's rule; ``"nan"``: left out).
    degenerate_kappa: str = "one"
    #: dataset -> {"observers": cells, "human_pairs": cells} where an observer is always right or always wrong.
    degenerate_cells: dict[str, dict[str, int]] = field(default_factory=dict)
    #: The intervals, rank intervals and pairwise tests (``None`` when neither was asked for).
    uncertainty: TableUncertainty | None = None
    #: observer -> its parameters and training data (only observers with some; the humans have none).
    metadata: dict[str, ModelMetadata] = field(default_factory=dict)

    def aggregate(self, label: str) -> dict[str, float]:
        """The mean over the table's datasets of each measure (NaN when the observer lacks a dataset).

        Parameters
        ----------
        label
            The observer's label.
        """
        scores = self.observers[label]
        if any(d not in scores for d in self.datasets):
            return {metric: math.nan for metric in METRICS}
        return {metric: mean([scores[d].value(metric) for d in self.datasets]) for metric in METRICS}

    def human_aggregate(self) -> dict[str, float]:
        return {metric: mean([self.humans[d].value(metric) for d in self.datasets]) for metric in METRICS}

    def complete(self, label: str) -> bool:
        """True when the observer covers every dataset of the table.

        Parameters
        ----------
        label
            The observer's label.
        """
        return all(d in self.observers[label] for d in self.datasets)

    def ranks(self) -> dict[str, dict[str, float]]:
        """Per complete observer: its rank in each measure and the human-likeness mean rank (NaN: not ranked, see
        :meth:`unranked`)."""
        labels = [label for label in self.observers if self.complete(label)]
        values = np.array([[self.aggregate(label)[m] for m in METRICS] for label in labels]).reshape(len(labels), 4)
        found = rank_table(values, HIGHER_FIRST, HUMAN_LIKENESS)
        return {label: {m: float(found[m][i]) for m in [*METRICS, "mean_rank"]} for i, label in enumerate(labels)}

    def unranked(self) -> dict[str, str]:
        """Observer -> why it has no mean rank (missing datasets, or an undefined human-likeness measure)."""
        reasons: dict[str, str] = {}
        for label, scores in self.observers.items():
            if not self.complete(label):
                missing = [d for d in self.datasets if d not in scores]
                reasons[label] = f"not aggregated or ranked: no decisions on {', '.join(missing)}"
                continue
            undefined = {
                m: [d for d in self.datasets if math.isnan(scores[d].value(m))]
                for m in HUMAN_LIKENESS
                if math.isnan(self.aggregate(label)[m])
            }
            if undefined:
                what = "; ".join(f"{m.replace('_', ' ')} undefined on {', '.join(d)}" for m, d in undefined.items())
                why = (
                    " (every kappa cell there degenerate: always right or always wrong in each kept condition, "
                    "left out under degenerate_kappa 'nan')"
                    if "error_consistency" in undefined and self.degenerate_kappa == "nan"
                    else ""
                )
                reasons[label] = f"no human-likeness ranks or mean rank: {what}{why}"
        return reasons

    def _brain_scores(self, label: str) -> dict[str, BrainScore]:
        return {d: brain_score(s, self.humans[d]) for d, s in self.observers[label].items() if d in self.humans}

    def brain_score_mean(self, label: str) -> float:
        """The mean ceiled Brain-Score over the table's datasets.

        Parameters
        ----------
        label
            The observer's label.
        """
        if not self.complete(label):
            return math.nan
        scores = self._brain_scores(label)
        return mean([scores[d].ceiled for d in self.datasets])

    def conditions_rule(self) -> str:
        if self.all_conditions:
            return "every condition kept"
        return (
            "model-vs-human's benchmark conditions: the undistorted control and levels where the humans' mean "
            "accuracy is below 0.2 left out (plot.py EXCLUDE_CONDITIONS)"
        )

    def to_dict(self) -> dict[str, object]:
        ranks, unranked = self.ranks(), self.unranked()
        observers = []
        for label, scores in self.observers.items():
            entry: dict[str, object] = {
                "observer": label,
                "complete": self.complete(label),
                "aggregate": self.aggregate(label),
                "ranks": ranks.get(label),
                "unranked": unranked.get(label),
                "datasets": {d: scores[d].to_dict() for d in self.datasets if d in scores},
            }
            if self.sources.get(label):
                entry["sources"] = self.sources[label]
            entry["metadata"] = self.metadata[label].to_dict() if label in self.metadata else None
            if self.with_brain_score:
                entry["brain_score"] = {
                    "datasets": {d: s.to_dict() for d, s in self._brain_scores(label).items()},
                    "mean_ceiled": self.brain_score_mean(label),
                }
            observers.append(entry)
        payload: dict[str, object] = {
            "benchmark": "model-vs-human (Geirhos et al., NeurIPS 2021)",
            "datasets": list(self.datasets),
            "conditions": {
                "rule": self.conditions_rule(),
                "kept": {d: list(kept_conditions(d, self.all_conditions)) for d in self.datasets},
            },
            "na_handling": self.na_handling,
            "definitions": {
                **METRIC_MEANINGS,
                "aggregate": "mean over the datasets",
                "ranks": f"{RANK_RULE}; {HUMAN_RANKING}",
                "metadata": METADATA_MEANING,
            },
            "observers": observers,
            "humans": {
                "meaning": "every pair of distinct human observers, averaged over the conditions and the pairs; "
                "OOD accuracy over all the human observers' trials in the kept conditions, pooled",
                "aggregate": self.human_aggregate(),
                "datasets": {d: self.humans[d].to_dict() for d in self.datasets},
            },
        }
        if self.with_brain_score:
            payload["brain_score_definition"] = BRAIN_SCORE_DEFINITION
        payload["degenerate_kappa"] = self.degenerate_summary()
        if self.uncertainty is not None:
            payload["uncertainty"] = self.uncertainty.to_dict()
            for entry in observers:
                label = str(entry["observer"])
                entry["intervals"] = payload["uncertainty"]["intervals"].get(label)  # type: ignore[index]
                entry["rank_intervals"] = payload["uncertainty"]["rank_intervals"].get(label)  # type: ignore[index]
            payload["humans"]["intervals"] = payload["uncertainty"]["intervals"].get("humans")  # type: ignore[index]
        return payload

    def degenerate_summary(self) -> dict[str, object]:
        """Which rule counted the degenerate kappa cells, and how many cells it touched."""
        per = {d: dict(found) for d, found in self.degenerate_cells.items() if any(found.values())}
        return {
            "rule": self.degenerate_kappa,
            "meaning": DEGENERATE_MEANINGS[self.degenerate_kappa],
            "cells": sum(sum(found.values()) for found in self.degenerate_cells.values()),
            "cells_meaning": "kappa cells (an observer against one human, or a pair of humans, in one kept condition) "
            "where an observer is always right or always wrong; 'observers' counts the observers' cells, "
            "'human_pairs' the humans' row's",
            "datasets": per,
        }


def benchmark_table(
    observers: Mapping[str, Mapping[str, Sequence[Decision]]],
    panels: Mapping[str, HumanPanel],
    *,
    all_conditions: bool = False,
    na_handling: str = "wrong",
    with_brain_score: bool = False,
    sources: Mapping[str, Mapping[str, str]] | None = None,
    degenerate_kappa: str = "one",
    n_bootstrap: int = 0,
    seed: int = 0,
    permutations: int = 0,
    metadata: Mapping[str, ModelMetadata] | None = None,
) -> BenchmarkTable:
    """The benchmark of ``observers[label][dataset] -> trials`` against the human ``panels`` of those datasets.

    The table's datasets are those any observer covers, in model-vs-human's order. The values are computed
    cell by cell (:mod:`modelval.behaviour.benchmark_cells`): ``degenerate_kappa`` says how a kappa cell
    where an observer is always right or always wrong counts; ``n_bootstrap`` > 0 adds intervals and rank
    intervals, ``permutations`` > 0 the pairwise tests of the complete observers. ``metadata`` (observer ->
    :class:`ModelMetadata`) is carried beside the results (Markdown, JSON, CSV) and drawn by
    :func:`modelval.figures.plot_benchmark_scale`.

    Parameters
    ----------
    observers
        Label -> dataset -> that observer's trials.
    panels
        Dataset -> its human observers.
    all_conditions
        Keep every condition (not only the benchmark's).
    na_handling
        How a "na" answer counts: ``"wrong"`` or ``"exclude"``.
    with_brain_score
        Add the Brain-Score columns.
    sources
        Where the data came from.
    degenerate_kappa
        The degenerate-kappa rule (:data:`DEGENERATE_KAPPA`).
    n_bootstrap
        Bootstrap resamples (0: no interval).
    seed
        Seed of the resamples.
    permutations
        Random sign flips of the pairwise tests (0: none).
    metadata
        Label -> the observer's :class:`ModelMetadata`.
    """
    check_degenerate_kappa(degenerate_kappa)
    covered = {dataset for per in observers.values() for dataset in per}
    datasets = tuple(d for d in BENCHMARK_DATASETS if d in covered)
    cells = {
        d: dataset_cells(
            {label: per[d] for label, per in observers.items() if d in per},
            panels[d].observers,
            d,
            [c for c in kept_conditions(d, all_conditions)],
        )
        for d in datasets
    }
    values, degenerate, kappas = table_values(cells, rule=degenerate_kappa, na_handling=na_handling)
    band = None
    if n_bootstrap > 0 or permutations > 0:
        ranked = [label for label, per in observers.items() if all(d in per for d in datasets)]
        band = table_uncertainty(
            cells,
            ranked,
            higher_first=HIGHER_FIRST,
            human_likeness=HUMAN_LIKENESS,
            rule=degenerate_kappa,
            na_handling=na_handling,
            n_bootstrap=n_bootstrap,
            seed=seed,
            permutations=permutations,
        )

    def scores(label: str, dataset: str, rows: Sequence[ConditionComparison | HumanCondition]) -> DatasetScores:
        kept = [row for row in rows if row.condition in kept_conditions(dataset, all_conditions)]
        if degenerate_kappa != "one":  # the per-condition kappa under the same rule as the table's
            rows = _with_kappas(rows, kept, kappas[label][dataset])
        found = values[label][dataset]
        return DatasetScores(
            dataset=dataset,
            conditions=tuple(row.condition for row in kept),
            n_trials=sum(row.n_trials for row in kept),
            **{metric: float(found[k]) for k, metric in enumerate(METRICS)},
            per_condition=tuple(_with_intervals(rows, band, label, dataset)),
        )

    table_scores = {
        label: {
            dataset: scores(label, dataset, compare_by_condition(trials, panels[dataset], na_handling=na_handling))
            for dataset, trials in per.items()
        }
        for label, per in observers.items()
    }
    humans = {d: scores("humans", d, humans_by_condition(panels[d], na_handling=na_handling)) for d in datasets}
    return BenchmarkTable(
        datasets,
        table_scores,
        humans,
        all_conditions,
        na_handling,
        with_brain_score,
        {label: dict(per) for label, per in (sources or {}).items()},
        degenerate_kappa,
        degenerate,
        uncertainty=band,
        metadata={label: found for label, found in (metadata or {}).items() if label in observers and not found.empty},
    )


def _with_intervals(
    rows: Sequence[ConditionComparison | HumanCondition], band: TableUncertainty | None, label: str, dataset: str
) -> list[ConditionComparison | HumanCondition]:
    """The rows with the table's own per-condition intervals of the mean kappa (the same resamples as the table's),
    or the reason a row has none."""
    found = band.condition_intervals.get(label, {}).get(dataset, {}) if band is not None else {}
    changed: list[ConditionComparison | HumanCondition] = []
    for row in rows:
        if isinstance(row, ConditionComparison):
            interval = found.get(row.condition, (math.nan, math.nan))
            if band is None or band.n_bootstrap == 0:
                reason = NO_BOOTSTRAP
            elif row.condition not in found:
                reason = "no interval: the benchmark leaves this condition out, so its bootstrap does not resample it"
            else:
                reason = "no interval: the mean kappa is undefined in every resample (degenerate kappa cells)"
            row = dataclasses.replace(row, ci95=interval, ci95_reason=reason)
        changed.append(row)
    return changed


def _with_kappas(
    rows: Sequence[ConditionComparison | HumanCondition],
    kept: Sequence[ConditionComparison | HumanCondition],
    kappas: Sequence[float],
) -> list[ConditionComparison | HumanCondition]:
    by_condition = {row.condition: kappa for row, kappa in zip(kept, kappas, strict=True)}
    return [
        dataclasses.replace(row, error_consistency=by_condition[row.condition])
        if row.condition in by_condition
        else row
        for row in rows
    ]
