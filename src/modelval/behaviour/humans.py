"""Comparing one observer (a model or a human) with the published human observers, trial by trial.

Error consistency (Geirhos, Meding & Wichmann, NeurIPS 2020) is Cohen's kappa on two trial-wise
correctness vectors, exactly as model-vs-human (``modelvshuman/plotting/analyses.py``,
``ErrorConsistency``) computes it:

    correct_i  = response_i == category_i     (a human "na" is wrong; cue-conflict: category = shape)
    c_obs      = fraction of trials where both are correct or both are wrong
    c_exp      = p1 * p2 + (1 - p1) * (1 - p2)            (p = accuracy of each observer)
    kappa      = (c_obs - c_exp) / (1 - c_exp),  and kappa = 1 when c_obs == 1

The last rule is model-vs-human's: two observers that agree on every trial have kappa 1, also when
both are always right (c_exp == 1, where the formula is 0/0). An observer's error consistency with
"humans" is the mean kappa over the human observers, never comparing an observer with itself; the
human-human ceiling is the mean kappa over all pairs of distinct human observers.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import numpy as np

from modelval.behaviour.cue_conflict import parse_stimulus_name
from modelval.behaviour.trials import FILE_PREFIXES, Trial, aligned, check_dataset, correctness, read_trials
from modelval.errors import DataError

#: Bootstrap resamples and seed of the intervals unless the caller says otherwise.
DEFAULT_BOOTSTRAP = 1000
DEFAULT_SEED = 0
#: "Humans agree it is the shape": at least this many of the 10 observers chose the shape category.
HUMAN_SHAPE_MAJORITY = 9


@dataclass(frozen=True)
class Consistency:
    """Trial-wise agreement of two observers."""

    observed: float  # c_obs
    expected: float  # c_exp
    kappa: float  # error consistency
    trials: int


def kappa_from_consistency(observed: float, expected: float) -> float:
    """Cohen's kappa from observed and expected consistency, with model-vs-human's ``c_obs == 1 -> 1``."""
    if not (0.0 <= observed <= 1.0 and 0.0 <= expected <= 1.0):
        raise ValueError(f"consistencies must lie in [0, 1], got observed={observed}, expected={expected}")
    if observed == 1.0:
        return 1.0
    return (observed - expected) / (1.0 - expected)


def error_consistency(correct_a: Sequence[bool] | np.ndarray, correct_b: Sequence[bool] | np.ndarray) -> Consistency:
    """Error consistency of two trial-wise correctness vectors (same trials, same order)."""
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"need two 1-D correctness vectors of equal length, got shapes {a.shape} and {b.shape}")
    if a.size == 0:
        raise ValueError("error consistency needs at least one trial")
    p1, p2 = float(a.mean()), float(b.mean())
    expected = p1 * p2 + (1 - p1) * (1 - p2)
    observed = float((a == b).mean())
    return Consistency(observed, expected, kappa_from_consistency(observed, expected), int(a.size))


def _kappa_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise kappa of two (B, n) boolean matrices (bootstrap samples), same convention."""
    p1, p2 = a.mean(axis=1), b.mean(axis=1)
    expected = p1 * p2 + (1 - p1) * (1 - p2)
    observed = (a == b).mean(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        kappa = (observed - expected) / (1 - expected)
    return np.where(observed == 1.0, 1.0, kappa)


@dataclass
class HumanPanel:
    """The published human observers of one experiment: name -> trials."""

    dataset: str
    observers: dict[str, list[Trial]]
    files: dict[str, Path] = field(default_factory=dict)

    def accuracies(self) -> dict[str, float]:
        return {name: float(np.mean([t.correct for t in trials])) for name, trials in self.observers.items()}


def human_files(reference_dir: str | os.PathLike[str], dataset: str) -> dict[str, Path]:
    """``subject-NN -> file`` of the human sessions of ``dataset`` in a raw-data folder."""
    prefix = FILE_PREFIXES[check_dataset(dataset)]
    folder = Path(reference_dir)
    files = sorted(folder.glob(f"{prefix}_subject-*.csv"))
    return {path.name[len(prefix) + 1 :].split("_session")[0]: path for path in files}


def load_human_panel(reference_dir: str | os.PathLike[str], dataset: str) -> HumanPanel:
    """Read the human observers of ``dataset`` from the published raw-data folder."""
    files = human_files(reference_dir, dataset)
    if len(files) < 2:
        raise DataError(
            f"found {len(files)} human session file(s) of {dataset} ({FILE_PREFIXES[dataset]}_subject-NN_*.csv) "
            f"in {reference_dir}; need the published raw data: run `modelval download-data --humans` "
            "or pass --reference-dir DIR"
        )
    observers = {name: read_trials(path) for name, path in files.items()}
    first_name, first = next(iter(observers.items()))
    for name, trials in observers.items():
        aligned(first, trials, names=(first_name, name))
    return HumanPanel(dataset, observers, files)


@dataclass(frozen=True)
class HumanCeiling:
    """Human-human error consistency: every pair of distinct observers."""

    mean: float
    pairs: dict[tuple[str, str], float]
    per_observer: dict[str, float]  # each observer's mean kappa with the others

    @property
    def range(self) -> tuple[float, float]:
        values = list(self.per_observer.values())
        return min(values), max(values)


def human_ceiling(panel: HumanPanel) -> HumanCeiling:
    """Mean kappa over all pairs of distinct human observers (the ceiling a model can reach)."""
    names = sorted(panel.observers)
    images = sorted(t.image for t in panel.observers[names[0]])
    vectors = {name: correctness(panel.observers[name], images) for name in names}
    pairs = {(a, b): error_consistency(vectors[a], vectors[b]).kappa for a, b in combinations(names, 2)}
    per_observer = {name: float(np.mean([k for pair, k in pairs.items() if name in pair])) for name in names}
    return HumanCeiling(float(np.mean(list(pairs.values()))), pairs, per_observer)


@dataclass
class HumanComparison:
    """One observer against the human panel of its experiment (the ``modelval humans`` result)."""

    dataset: str
    subject: str
    images: int
    accuracy: float
    human_accuracy: dict[str, float]  # mean, min, max over the human observers
    human_accuracies: dict[str, float]
    observers: dict[str, Consistency]  # per human observer (the subject itself left out)
    error_consistency: float
    ci95: tuple[float, float]
    ceiling: HumanCeiling
    excluded_self: str | None = None

    @property
    def observed_consistency(self) -> float:
        return float(np.mean([c.observed for c in self.observers.values()]))

    @property
    def expected_consistency(self) -> float:
        return float(np.mean([c.expected for c in self.observers.values()]))

    def to_dict(self) -> dict[str, object]:
        return {
            "dataset": self.dataset,
            "subject": self.subject,
            "images": self.images,
            "accuracy": self.accuracy,
            "human_accuracy": self.human_accuracy,
            "error_consistency": self.error_consistency,
            "error_consistency_ci95": list(self.ci95),
            "human_error_consistency": self.ceiling.mean,
            "human_error_consistency_range": list(self.ceiling.range),
            "observed_consistency": self.observed_consistency,
            "expected_consistency": self.expected_consistency,
            "observers": [
                {
                    "observer": name,
                    "error_consistency": c.kappa,
                    "observed_consistency": c.observed,
                    "expected_consistency": c.expected,
                    "accuracy": self.human_accuracies[name],
                }
                for name, c in self.observers.items()
            ],
            "excluded_self": self.excluded_self,
        }


def compare_with_humans(
    trials: Sequence[Trial],
    panel: HumanPanel,
    *,
    subject: str | None = None,
    n_bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
) -> HumanComparison:
    """Accuracy and error consistency of ``trials`` against every human of ``panel``.

    ``subject`` (default: the trials' ``subj`` column) names the observer; a human of the panel with
    the same name is left out, so a human is never compared with itself. The 95% interval is a
    seeded percentile bootstrap over trials: images are resampled jointly for the observer and all
    humans, and the mean kappa is recomputed on each resample.
    """
    subject = subject if subject is not None else (trials[0].subject if trials else "")
    names = [name for name in sorted(panel.observers) if name != subject]
    excluded = subject if subject in panel.observers else None
    if not names:
        raise DataError("no human observer left to compare with")
    images = aligned(trials, panel.observers[names[0]], names=(subject or "the decisions", f"human {names[0]}"))
    mine = correctness(trials, images)
    humans = {name: correctness(panel.observers[name], images) for name in names}
    per_observer = {name: error_consistency(mine, vector) for name, vector in humans.items()}
    mean_kappa = float(np.mean([c.kappa for c in per_observer.values()]))
    accuracies = {name: float(vector.mean()) for name, vector in humans.items()}
    values = list(accuracies.values())
    return HumanComparison(
        dataset=panel.dataset,
        subject=subject,
        images=len(images),
        accuracy=float(mine.mean()),
        human_accuracy={"mean": float(np.mean(values)), "min": min(values), "max": max(values)},
        human_accuracies=accuracies,
        observers=per_observer,
        error_consistency=mean_kappa,
        ci95=bootstrap_error_consistency(mine, list(humans.values()), n_bootstrap=n_bootstrap, seed=seed),
        ceiling=human_ceiling(panel),
        excluded_self=excluded,
    )


def bootstrap_error_consistency(
    correct: np.ndarray,
    human_correct: Sequence[np.ndarray],
    *,
    n_bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean kappa over humans, resampling trials jointly."""
    n = len(correct)
    if n == 0 or n_bootstrap <= 0 or not human_correct:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    samples = rng.integers(0, n, size=(n_bootstrap, n))
    mine = correct[samples]
    kappas = np.mean([_kappa_rows(mine, human[samples]) for human in human_correct], axis=0)
    kappas = kappas[np.isfinite(kappas)]
    if kappas.size == 0:
        return math.nan, math.nan
    tail = (1 - level) / 2 * 100
    return float(np.percentile(kappas, tail)), float(np.percentile(kappas, 100 - tail))


@dataclass(frozen=True)
class HumanShapeImage:
    """A cue-conflict image on which the observer chose the texture although most humans chose the shape."""

    image: str
    shape: str
    texture: str
    response: str
    humans_shape: int
    humans: int


def human_shape_fractions(panel: HumanPanel) -> dict[str, tuple[int, int]]:
    """Cue-conflict: per conflict image, (humans who chose the shape, humans) ("na" is not the shape)."""
    if panel.dataset != "cue-conflict":
        raise DataError(f"shape decisions exist only on cue-conflict images, not on {panel.dataset}")
    counts: dict[str, list[int]] = {}
    for trials in panel.observers.values():
        for trial in trials:
            shape, texture = parse_stimulus_name(trial.image)
            if shape == texture:
                continue
            entry = counts.setdefault(trial.image, [0, 0])
            entry[0] += trial.response == shape
            entry[1] += 1
    return {image: (hits, total) for image, (hits, total) in sorted(counts.items())}


def texture_despite_humans(
    trials: Sequence[Trial],
    fractions: Mapping[str, tuple[int, int]],
    *,
    min_humans: int = HUMAN_SHAPE_MAJORITY,
) -> list[HumanShapeImage]:
    """Images where the observer chose the texture although at least ``min_humans`` humans chose the shape."""
    found = []
    for trial in trials:
        if trial.image not in fractions:
            continue
        shape, texture = parse_stimulus_name(trial.image)
        hits, total = fractions[trial.image]
        if trial.response == texture and hits >= min_humans:
            found.append(HumanShapeImage(trial.image, shape, texture, trial.response, hits, total))
    return sorted(found, key=lambda item: (-item.humans_shape, item.image))
