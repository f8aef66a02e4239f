"""16-class accuracy of one observer on one experiment, overall and per category.

Correct means ``response == category`` on every trial; for cue-conflict the category is the
*shape* (model-vs-human's "cue-conflict shape accuracy", over all 1280 images). A human ``na``
(no answer in time) counts as wrong, as in model-vs-human.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.decisions import Decision
from modelval.errors import DataError


@dataclass(frozen=True)
class CategoryAccuracy:
    category: str
    correct: int
    images: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.images if self.images else float("nan")


@dataclass(frozen=True)
class AccuracyResult:
    dataset: str
    correct: int
    images: int
    per_category: dict[str, CategoryAccuracy]

    @property
    def accuracy(self) -> float:
        return self.correct / self.images

    def to_dict(self) -> dict[str, object]:
        return {
            "dataset": self.dataset,
            "accuracy": self.accuracy,
            "correct": self.correct,
            "images": self.images,
            "per_category": {
                name: {"accuracy": value.accuracy, "correct": value.correct, "images": value.images}
                for name, value in self.per_category.items()
            },
        }


def accuracy_of(trials: Sequence[Decision], dataset: str) -> AccuracyResult:
    """Accuracy over ``trials`` (one per image) and for each of the 16 categories.

    Parameters
    ----------
    trials
        An observer's decisions, one per image.
    dataset
        One of :data:`~modelval.behaviour.experiments.DATASET_NAMES`.
    """
    if not trials:
        raise DataError("no trials to score")
    per_category = {}
    for category in CATEGORIES:
        mine = [t for t in trials if t.category == category]
        per_category[category] = CategoryAccuracy(category, sum(t.correct for t in mine), len(mine))
    return AccuracyResult(dataset, sum(t.correct for t in trials), len(trials), per_category)


def wilson_interval(correct: int, images: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of ``correct`` of ``images`` (images taken as independent; NaN when none).

    :func:`modelval.proportions.wilson_interval` for one proportion (it stays inside [0, 1] and is sensible
    at 0 or all correct; ``scipy.stats.binomtest(...).proportion_ci("wilson")``).

    Parameters
    ----------
    correct
        Correct answers.
    images
        Answers in all.
    level
        Coverage of the interval (0.95: 95%).
    """
    from modelval.proportions import wilson_interval as wilson

    low, high = wilson(correct, images, level)
    return float(low), float(high)
