"""Per-condition analyses: accuracy and agreement with the humans at each distortion level.

model-vs-human (Geirhos et al., NeurIPS 2021) analyses its 12 parametric datasets condition by condition
(``modelvshuman/plotting/analyses.py``: ``SixteenClassAccuracy``, ``ErrorConsistency.get_result_df``;
``plotting/plot.py``: ``get_raw_benchmark_df``). Here every measure of
:mod:`modelval.behaviour.humans` is taken within one condition at a time:

- the trials of a condition are those whose condition (the CSV column, or the image name) is that level,
  named as model-vs-human names it (:func:`modelval.behaviour.experiments.canonical_condition`);
- within a condition two observers' trials are matched by the short image name, and must cover the same
  images (as upstream asserts);
- **accuracy**: correct / trials of the condition; **error consistency**, **observed consistency** and the
  **accuracy difference** (squared): the mean over the human observers of the pairwise value in the
  condition (a human given as the observer is left out, never compared with itself);
- **the humans' mutual kappa** in the condition: the mean over pairs of distinct humans (the observer's
  own pairs left out when it is a human), and their mean accuracy.

Datasets without levels (cue-conflict, edges, filled silhouettes, sketch, stylized) have one condition,
so their per-condition values are the dataset's own. :func:`paired_by_condition` compares two observers
(``modelval compare``) within each condition: their accuracies, the exact McNemar test and their kappa.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from modelval.behaviour.decisions import Decision
from modelval.behaviour.experiments import canonical_condition, experiment
from modelval.behaviour.humans import DEFAULT_SEED, HumanPanel, compare_with_humans
from modelval.errors import DataError
from modelval.jsonio import Undefined

#: Why a per-condition interval is undefined when no bootstrap ran (not "no data": the data are there).
NO_BOOTSTRAP = "no interval: no bootstrap was run (n_bootstrap / --bootstrap 0)"

__all__ = [
    "ConditionAccuracy",
    "ConditionComparison",
    "ConditionPair",
    "HumanCondition",
    "accuracy_by_condition",
    "compare_by_condition",
    "humans_by_condition",
    "paired_by_condition",
    "trials_by_condition",
]


def trials_by_condition(trials: Sequence[Decision], dataset: str) -> dict[str, list[Decision]]:
    """``{condition: trials}`` in the dataset's condition order (model-vs-human's); absent levels left out.

    Parameters
    ----------
    trials
        An observer's decisions, one per image.
    dataset
        One of :data:`~modelval.behaviour.experiments.DATASET_NAMES`.
    """
    entry = experiment(dataset)
    groups: dict[str, list[Decision]] = {value: [] for value in entry.values}
    named: dict[str, str] = {}  # a panel writes a few conditions 100,000 times: read each once
    for trial in trials:
        if trial.condition not in named:
            try:
                named[trial.condition] = canonical_condition(trial.condition, dataset)
            except DataError as error:
                raise DataError(f"{trial.imagename}: {error}") from None
        groups[named[trial.condition]].append(trial)
    return {value: found for value, found in groups.items() if found}


@dataclass(frozen=True)
class ConditionAccuracy:
    """16-class accuracy of one observer in one condition."""

    condition: str
    label: str
    correct: int
    n_trials: int
    in_benchmark: bool  # False: model-vs-human's benchmark leaves this condition out

    @property
    def accuracy(self) -> float:
        return self.correct / self.n_trials if self.n_trials else math.nan

    def to_dict(self) -> dict[str, object]:
        return {
            "condition": self.condition,
            "label": self.label,
            "n_trials": self.n_trials,
            "correct": self.correct,
            "accuracy": self.accuracy,
            "in_benchmark": self.in_benchmark,
        }


def accuracy_by_condition(trials: Sequence[Decision], dataset: str) -> list[ConditionAccuracy]:
    """Accuracy in each condition of ``dataset`` the trials cover (``na`` is wrong, as upstream).

    Parameters
    ----------
    trials
        An observer's decisions, one per image.
    dataset
        One of :data:`~modelval.behaviour.experiments.DATASET_NAMES`.
    """
    entry = experiment(dataset)
    return [
        ConditionAccuracy(
            value, entry.condition_label(value), sum(t.correct for t in found), len(found), value not in entry.excluded
        )
        for value, found in trials_by_condition(trials, dataset).items()
    ]


@dataclass(frozen=True)
class ConditionComparison:
    """One observer against the human panel within one condition."""

    condition: str
    label: str
    n_trials: int
    accuracy: float
    error_consistency: float  # mean kappa over the human observers
    observed_consistency: float
    expected_consistency: float
    kappa_max: float
    accuracy_difference: float  # mean over the humans of (accuracy - the human's)^2
    human_accuracy_mean: float  # the human observers compared with (the observer left out)
    human_human_kappa_mean: float  # the humans' mutual kappa in this condition (the observer's pairs left out)
    humans: int  # human observers compared with
    in_benchmark: bool
    ci95: tuple[float, float] = (math.nan, math.nan)
    #: Why ``ci95`` is undefined, when the caller knows (the JSON's null reason then, not a generic "no data"; the
    #: benchmark sets it, :func:`compare_by_condition` leaves a NaN for its text output to print as n/a).
    ci95_reason: str = ""

    def to_dict(self) -> dict[str, object]:
        undefined = any(math.isnan(v) for v in self.ci95) and self.ci95_reason
        return {
            "condition": self.condition,
            "label": self.label,
            "n_trials": self.n_trials,
            "accuracy": self.accuracy,
            "error_consistency": self.error_consistency,
            "error_consistency_ci95": [Undefined(self.ci95_reason)] * 2 if undefined else list(self.ci95),
            "observed_consistency": self.observed_consistency,
            "expected_consistency": self.expected_consistency,
            "kappa_max": self.kappa_max,
            "accuracy_difference": self.accuracy_difference,
            "human_accuracy_mean": self.human_accuracy_mean,
            "human_human_kappa_mean": self.human_human_kappa_mean,
            "humans": self.humans,
            "in_benchmark": self.in_benchmark,
        }


def _panel_in_condition(panel: HumanPanel, condition: str) -> HumanPanel:
    """The human panel restricted to the trials of one condition."""
    observers = {
        name: trials_by_condition(trials, panel.dataset).get(condition, []) for name, trials in panel.observers.items()
    }
    return HumanPanel(panel.dataset, observers, panel.files)


def compare_by_condition(
    trials: Sequence[Decision],
    panel: HumanPanel,
    *,
    subject: str | None = None,
    na_handling: str = "wrong",
    n_bootstrap: int = 0,
    seed: int = DEFAULT_SEED,
    resample: str | None = None,
) -> list[ConditionComparison]:
    """The observer against the humans in each condition the humans were tested in (model-vs-human's order).

    ``subject`` (default: the trials' ``subj``) names the observer; a human of that name is left out.
    ``n_bootstrap`` > 0 adds a percentile interval of the mean kappa per condition, resampling ``resample``
    (:mod:`modelval.behaviour.resampling`; ``None``: texture images on cue-conflict, images elsewhere).
    An observer without trials in a condition the humans saw is an error naming it.

    Parameters
    ----------
    trials
        An observer's decisions, one per image.
    panel
        The human observers of one dataset.
    subject
        The observer's name (a human of that name is left out); default: the trials' ``subj``.
    na_handling
        How a "na" answer counts: ``"wrong"`` or ``"exclude"``.
    n_bootstrap
        Bootstrap resamples (0: no interval).
    seed
        Seed of the resamples.
    resample
        The bootstrap's unit (:data:`~modelval.behaviour.resampling.RESAMPLING_UNITS`; ``None``: the default).
    """
    entry = experiment(panel.dataset)
    subject = subject if subject is not None else (trials[0].subject if trials else "")
    mine = trials_by_condition(trials, panel.dataset)
    levels = [value for value in entry.values if any(_panel_in_condition(panel, value).observers.values())]
    missing = [value for value in levels if value not in mine]
    if missing:
        raise DataError(
            f"{subject or 'the decisions'} has no trials in condition(s) {', '.join(missing)} of {panel.dataset}; "
            "per-condition statistics need the observer's decisions on every condition the humans saw"
        )
    results = []
    for value in levels:
        result = compare_with_humans(
            mine[value],
            _panel_in_condition(panel, value),
            subject=subject,
            n_bootstrap=n_bootstrap,
            seed=seed,
            resample=resample,
            na_handling=na_handling,
        )
        results.append(
            ConditionComparison(
                condition=value,
                label=entry.condition_label(value),
                n_trials=result.images,
                accuracy=result.accuracy,
                error_consistency=result.error_consistency,
                observed_consistency=result.observed_consistency,
                expected_consistency=result.expected_consistency,
                kappa_max=result.kappa_max,
                accuracy_difference=result.accuracy_difference,
                human_accuracy_mean=result.human_accuracy["mean"],
                human_human_kappa_mean=result.agreement.mean,
                humans=len(result.observers),
                in_benchmark=value not in entry.excluded,
                ci95=result.ci95,
            )
        )
    return results


@dataclass(frozen=True)
class HumanCondition:
    """The humans as observers of each other in one condition: each human against the others, averaged."""

    condition: str
    label: str
    n_trials: int
    accuracy: float  # mean over the humans (= their pooled accuracy: every human saw the same trials)
    error_consistency: float  # mean over the humans of (kappa with the other humans) = the mutual kappa
    observed_consistency: float
    accuracy_difference: float
    in_benchmark: bool

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def humans_by_condition(panel: HumanPanel, *, na_handling: str = "wrong") -> list[HumanCondition]:
    """Each human against the other humans per condition, averaged over the humans (model-vs-human's "humans" row and
    reference line: its mean over ordered pairs equals the mean over pairs).

    Parameters
    ----------
    panel
        The human observers of one dataset.
    na_handling
        How a "na" answer counts: ``"wrong"`` or ``"exclude"``.
    """
    each: Mapping[str, list[ConditionComparison]] = {
        name: compare_by_condition(trials, panel, subject=name, na_handling=na_handling)
        for name, trials in sorted(panel.observers.items())
    }
    first = next(iter(each.values()))
    rows = []
    for index, reference in enumerate(first):
        values = [per[index] for per in each.values()]
        rows.append(
            HumanCondition(
                condition=reference.condition,
                label=reference.label,
                n_trials=reference.n_trials,
                accuracy=float(np.mean([v.accuracy for v in values])),
                error_consistency=float(np.mean([v.error_consistency for v in values])),
                observed_consistency=float(np.mean([v.observed_consistency for v in values])),
                accuracy_difference=float(np.mean([v.accuracy_difference for v in values])),
                in_benchmark=reference.in_benchmark,
            )
        )
    return rows


@dataclass(frozen=True)
class ConditionPair:
    """Two observers (A and B) within one condition: their accuracies, the exact McNemar test and their kappa."""

    condition: str
    label: str
    n_trials: int
    accuracy_a: float
    accuracy_b: float
    a_only: int  # images only A answered correctly
    b_only: int
    error_consistency: float  # kappa between A and B
    in_benchmark: bool

    @property
    def difference(self) -> float:
        return self.accuracy_a - self.accuracy_b

    @property
    def p(self) -> float:
        """Exact two-sided McNemar p-value of the accuracy difference (a binomial test on the discordant images)."""
        from modelval.behaviour.paired import mcnemar_exact

        return mcnemar_exact(self.a_only, self.b_only)

    def to_dict(self) -> dict[str, object]:
        return {
            "condition": self.condition,
            "label": self.label,
            "n_trials": self.n_trials,
            "accuracy_a": self.accuracy_a,
            "accuracy_b": self.accuracy_b,
            "difference": self.difference,
            "mcnemar_p": self.p,
            "discordant": {"a_only": self.a_only, "b_only": self.b_only},
            "error_consistency": self.error_consistency,
            "in_benchmark": self.in_benchmark,
        }


def paired_by_condition(
    trials_a: Sequence[Decision], trials_b: Sequence[Decision], dataset: str, *, names: tuple[str, str] = ("A", "B")
) -> list[ConditionPair]:
    """A against B in each condition: the trials matched by short image name within the condition.

    Parameters
    ----------
    trials_a
        Observer A's trials.
    trials_b
        Observer B's trials.
    dataset
        One of :data:`~modelval.behaviour.experiments.DATASET_NAMES`.
    names
        How A and B are named.
    """
    from modelval.behaviour.consistency import error_consistency
    from modelval.behaviour.trials import aligned, correctness

    entry = experiment(dataset)
    groups_a = trials_by_condition(trials_a, dataset)
    groups_b = trials_by_condition(trials_b, dataset)
    if list(groups_a) != list(groups_b):
        raise DataError(
            f"{names[0]} has conditions {', '.join(groups_a)} and {names[1]} {', '.join(groups_b)} on {dataset}; "
            "compare the same trials"
        )
    rows = []
    for value, found_a in groups_a.items():
        images = aligned(found_a, groups_b[value], names=names)
        a, b = correctness(found_a, images), correctness(groups_b[value], images)
        rows.append(
            ConditionPair(
                condition=value,
                label=entry.condition_label(value),
                n_trials=len(images),
                accuracy_a=float(a.mean()),
                accuracy_b=float(b.mean()),
                a_only=int((a & ~b).sum()),
                b_only=int((b & ~a).sum()),
                error_consistency=error_consistency(a, b).kappa,
                in_benchmark=value not in entry.excluded,
            )
        )
    return rows
