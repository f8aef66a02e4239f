"""The benchmark's values of one observer (or the humans) on one dataset, its metadata, Brain-Score and ranks.

:mod:`modelval.behaviour.benchmark` puts them together in a table; the measures are defined there.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from modelval.behaviour.conditions import (
    ConditionComparison,
    HumanCondition,
    compare_by_condition,
    humans_by_condition,
    trials_by_condition,
)
from modelval.behaviour.decisions import Decision
from modelval.behaviour.experiments import experiment
from modelval.behaviour.humans import HumanPanel

METRICS: tuple[str, ...] = ("ood_accuracy", "accuracy_difference", "observed_consistency", "error_consistency")
HIGHER_FIRST = {
    "ood_accuracy": True,
    "accuracy_difference": False,
    "observed_consistency": True,
    "error_consistency": True,
}
#: The measures the human-likeness mean rank averages (upstream's "mean rank" column).
HUMAN_LIKENESS = ("accuracy_difference", "observed_consistency", "error_consistency")
METRIC_MEANINGS = {
    "ood_accuracy": "16-class accuracy over the trials of the kept conditions pooled (higher is better); the "
    "humans': over all the human observers' trials in the kept conditions, pooled",
    "accuracy_difference": "mean over the kept conditions and the human observers of (accuracy - the human's "
    "accuracy)^2 in the condition (lower is more human-like)",
    "observed_consistency": "mean over the kept conditions and the humans of the fraction of trials both "
    "answered correctly or both wrongly (higher is more human-like)",
    "error_consistency": "mean over the kept conditions and the humans of Cohen's kappa on trial-wise "
    "correctness (higher is more human-like)",
}
RANK_RULE = (
    "ranks among the observers given (the humans are a reference, not ranked): OOD accuracy highest first; "
    "accuracy difference lowest first, observed and error consistency highest first; mean rank = the mean "
    "of those three; ties share the mean of their ranks"
)
BRAIN_SCORE_DEFINITION = (
    "Brain-Score Geirhos2021<dataset>-error_consistency: raw = |mean over the kept conditions and the human "
    "subjects of kappa(model, subject)|, ceiling = |mean over the kept conditions and pairs of subjects of "
    "kappa(subject_i, subject_j)|, score = raw / ceiling clipped to [0, 1]; overall = mean over the datasets"
)


@dataclass(frozen=True)
class DatasetScores:
    """One observer (or the humans) on one dataset: the four benchmark values and where they come from."""

    dataset: str
    conditions: tuple[str, ...]  # the conditions averaged over (the kept ones)
    n_trials: int  # trials in those conditions
    ood_accuracy: float
    accuracy_difference: float
    observed_consistency: float
    error_consistency: float
    per_condition: tuple[ConditionComparison | HumanCondition, ...] = ()

    def value(self, metric: str) -> float:
        """The value of ``metric``.

        Parameters
        ----------
        metric
            One of :data:`METRICS`.
        """
        return float(getattr(self, metric))

    def to_dict(self) -> dict[str, object]:
        return {
            "dataset": self.dataset,
            "conditions": list(self.conditions),
            "n_trials": self.n_trials,
            **{metric: self.value(metric) for metric in METRICS},
            "per_condition": [row.to_dict() for row in self.per_condition],
        }


#: The fields of a model's metadata, as the JSON and CSV of ``--metadata`` and the table's outputs name them.
METADATA_FIELDS: tuple[str, ...] = ("parameters", "training_images", "training_data", "training_kind")
#: Where the scale axis of :func:`modelval.figures.plot_benchmark_scale` can come from.
SCALES: tuple[str, ...] = ("parameters", "training_images")


METADATA_MEANING = (
    "per observer, null when nothing is known: parameters (counted from the loaded module for an evaluated model, "
    "else as its registry entry or the --metadata file states), training_images (images or image-text pairs of the "
    "first training stage: the pre-training of a fine-tuned model), training_data (the stages), training_kind (how "
    "it learned), source (where each was read)"
)


@dataclass(frozen=True)
class ModelMetadata:
    """What an observer is beside what it answers: its size and what it learned from, with where that was read.

    ``training_images`` counts the images (or image-text pairs) of the first training stage (the pre-training
    set of a fine-tuned model); ``training_data`` names the stages (``"LAION-2B, then ImageNet-12k, ImageNet-1k"``);
    ``training_kind`` how it learned (``"supervised"``, ``"self-supervised"``, ``"image-text contrastive"``, ...).
    """

    parameters: int | None = None
    training_images: int | None = None
    training_data: str = ""
    training_kind: str = ""
    source: str = ""

    def value(self, name: str) -> int | str | None:
        """The field ``name``.

        Parameters
        ----------
        name
            One of :data:`METADATA_FIELDS`.
        """
        found: int | str | None = getattr(self, name)
        return found

    def filled_from(self, other: ModelMetadata) -> ModelMetadata:
        """This metadata, each missing field taken from ``other`` (and ``other``'s source added when it gave one).

        Parameters
        ----------
        other
            Metadata to fill the gaps from.
        """
        taken = {
            name: other.value(name) for name in METADATA_FIELDS if self.value(name) in (None, "") and other.value(name)
        }
        if not taken:
            return self
        source = "; ".join(part for part in (self.source, other.source) if part)
        return dataclasses.replace(self, **taken, source=source)  # type: ignore[arg-type]

    @property
    def empty(self) -> bool:
        return all(self.value(name) in (None, "") for name in METADATA_FIELDS)

    def to_dict(self) -> dict[str, object]:
        return {**{name: self.value(name) or None for name in METADATA_FIELDS}, "source": self.source}

    @classmethod
    def from_mapping(cls, values: Mapping[str, object], *, source: str, where: str) -> ModelMetadata:
        """Metadata from ``{"parameters": ..., "training_images": ..., "training_data": ..., "training_kind": ...}``
        (each optional; empty strings are missing); a bad key or value is an error naming ``where``.

        Parameters
        ----------
        values
            The fields (each optional; empty strings are missing).
        source
            Where they came from.
        where
            What an error names.
        """
        from modelval.errors import DataError

        unknown = sorted(set(values) - set(METADATA_FIELDS) - {"label", "source"})
        if unknown:
            raise DataError(f"{where}: unknown field(s) {', '.join(unknown)}; the fields: {', '.join(METADATA_FIELDS)}")
        found: dict[str, object] = {}
        for name in ("parameters", "training_images"):
            raw = values.get(name)
            if raw is None or raw == "":
                continue
            try:
                number = float(raw)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                number = math.nan
            if isinstance(raw, bool) or not math.isfinite(number) or number <= 0 or number != int(number):
                raise DataError(f"{where}: {name} is a positive whole number (1.28e6 is fine), got {raw!r}")
            found[name] = int(number)
        for name in ("training_data", "training_kind"):
            raw = values.get(name)
            if raw is not None and not isinstance(raw, str):
                raise DataError(f"{where}: {name} is text, got {raw!r}")
            found[name] = (raw or "").strip()
        own = values.get("source")
        return cls(**found, source=str(own).strip() if own else source)  # type: ignore[arg-type]


def kept_conditions(dataset: str, all_conditions: bool = False) -> tuple[str, ...]:
    """The conditions of ``dataset`` the benchmark averages (every one with ``all_conditions``).

    Parameters
    ----------
    dataset
        One of :data:`~modelval.behaviour.experiments.DATASET_NAMES`.
    all_conditions
        Keep every condition (not only the benchmark's).
    """
    entry = experiment(dataset)
    return entry.values if all_conditions else entry.benchmark_conditions


def mean(values: Sequence[float]) -> float:
    """The mean of values (NaN when there are none).

    Parameters
    ----------
    values
        The values.
    """
    return float(np.mean(values)) if len(values) else math.nan


def _pooled_accuracy(observers: Sequence[Sequence[Decision]], dataset: str, conditions: Sequence[str]) -> float:
    """Correct / trials over ``conditions`` of ``dataset``, all the observers' trials pooled ('na' is wrong)."""
    kept = set(conditions)
    correct = total = 0
    for trials in observers:
        for condition, found in trials_by_condition(trials, dataset).items():
            if condition in kept:
                correct += sum(t.correct for t in found)
                total += len(found)
    return correct / total if total else math.nan


def score_observer(
    trials: Sequence[Decision],
    panel: HumanPanel,
    *,
    subject: str | None = None,
    all_conditions: bool = False,
    na_handling: str = "wrong",
    rows: Sequence[ConditionComparison] | None = None,
) -> DatasetScores:
    """The benchmark values of one observer on ``panel``'s dataset (see the module doc); ``rows`` are its per-
    condition comparisons when already computed (:func:`~modelval.behaviour.conditions.compare_by_condition`).

    Parameters
    ----------
    trials
        An observer's decisions, one per image.
    panel
        The human observers of one dataset.
    subject
        The observer's name (a human of that name is left out); default: the trials' ``subj``.
    all_conditions
        Keep every condition (not only the benchmark's).
    na_handling
        How a "na" answer counts: ``"wrong"`` or ``"exclude"``.
    rows
        Its per-condition comparisons when already computed
        (:func:`~modelval.behaviour.conditions.compare_by_condition`).
    """
    if rows is None:
        rows = compare_by_condition(trials, panel, subject=subject, na_handling=na_handling)
    kept = [row for row in rows if row.condition in kept_conditions(panel.dataset, all_conditions)]
    conditions = tuple(row.condition for row in kept)
    return DatasetScores(
        dataset=panel.dataset,
        conditions=conditions,
        n_trials=sum(row.n_trials for row in kept),
        ood_accuracy=_pooled_accuracy([trials], panel.dataset, conditions),
        accuracy_difference=mean([row.accuracy_difference for row in kept]),
        observed_consistency=mean([row.observed_consistency for row in kept]),
        error_consistency=mean([row.error_consistency for row in kept]),
        per_condition=tuple(rows),
    )


def score_humans(panel: HumanPanel, *, all_conditions: bool = False, na_handling: str = "wrong") -> DatasetScores:
    """The humans' row on ``panel``'s dataset: each pair of distinct humans, averaged (see the module doc).

    Parameters
    ----------
    panel
        The human observers of one dataset.
    all_conditions
        Keep every condition (not only the benchmark's).
    na_handling
        How a "na" answer counts: ``"wrong"`` or ``"exclude"``.
    """
    rows = humans_by_condition(panel, na_handling=na_handling)
    kept = [row for row in rows if row.condition in kept_conditions(panel.dataset, all_conditions)]
    conditions = tuple(row.condition for row in kept)
    return DatasetScores(
        dataset=panel.dataset,
        conditions=conditions,
        n_trials=sum(row.n_trials for row in kept),
        ood_accuracy=_pooled_accuracy(list(panel.observers.values()), panel.dataset, conditions),
        accuracy_difference=mean([row.accuracy_difference for row in kept]),
        observed_consistency=mean([row.observed_consistency for row in kept]),
        error_consistency=mean([row.error_consistency for row in kept]),
        per_condition=tuple(rows),
    )


@dataclass(frozen=True)
class BrainScore:
    """Brain-Score's ceiled error consistency of one observer on one dataset (see the module doc)."""

    raw: float
    ceiling: float

    @property
    def ceiled(self) -> float:
        if math.isnan(self.raw) or math.isnan(self.ceiling) or self.ceiling == 0:
            return math.nan
        return min(max(self.raw / self.ceiling, 0.0), 1.0)

    def to_dict(self) -> dict[str, float]:
        return {"raw": self.raw, "ceiling": self.ceiling, "ceiled": self.ceiled}


def brain_score(observer: DatasetScores, humans: DatasetScores) -> BrainScore:
    """Brain-Score's error consistency of ``observer``: raw, the humans' ceiling, and raw over ceiling.

    Parameters
    ----------
    observer
        The observer's values on a dataset.
    humans
        The humans' values on it.
    """
    return BrainScore(abs(observer.error_consistency), abs(humans.error_consistency))


def average_ranks(values: Mapping[str, float], *, higher_first: bool) -> dict[str, float]:
    """Rank 1 for the best value; ties share the mean of their ranks; NaN values get no rank.

    Parameters
    ----------
    values
        Observer -> value.
    higher_first
        True when a higher value is better.
    """
    items = sorted(
        ((name, value) for name, value in values.items() if not math.isnan(value)),
        key=lambda item: -item[1] if higher_first else item[1],
    )
    ranks: dict[str, float] = {}
    start = 0
    while start < len(items):
        end = start
        while end + 1 < len(items) and items[end + 1][1] == items[start][1]:
            end += 1
        for name, _ in items[start : end + 1]:
            ranks[name] = (start + end) / 2 + 1
        start = end + 1
    return ranks
