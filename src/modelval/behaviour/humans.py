"""Comparing one observer (a model or a human) with the published human observers, trial by trial.

The pairwise measures (error consistency, its bound kappa_max, observed consistency) are defined in
:mod:`modelval.behaviour.consistency`. Here they are taken against a *panel*: the 10 human observers of
one experiment, read from the published raw data.

- **Observer vs humans**: the mean over the human observers of each pairwise measure, never comparing
  an observer with itself (a human of the panel given as the observer is left out). Also the
  *accuracy difference* of model-vs-human's benchmark: the mean over humans of the squared accuracy
  difference.
- **The humans' mutual error consistency** (``human_error_consistency``): the mean kappa over pairs of
  distinct human observers. It says how much humans agree with each other; it is *not* a ceiling for
  a model, whose kappa is bounded by its accuracy (kappa_max). When the observer is itself one of the
  humans, its own pairs are left out of this reference too (36 pairs among the other nine).
- **Sessions**: all session files of one subject are pooled into one observer, as model-vs-human
  pools trials by ``subj``; two sessions answering the same image are an error.
- **Intervals**: a seeded percentile bootstrap of the mean kappa. The trials are resampled jointly
  for the observer and all humans, by the unit of :mod:`modelval.behaviour.resampling` (texture images
  on cue-conflict by default, images elsewhere); the human observers are held fixed unless
  ``resample_observers=True``, which also draws the humans with replacement (the interval then covers
  other observers like these, not only these ten).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from modelval.behaviour.agreement import HumanAgreement, HumanCeiling, human_agreement, human_ceiling
from modelval.behaviour.consistency import (
    NA_DESCRIPTIONS,
    Consistency,
    ObserverVectors,
    check_na_handling,
    error_consistency,
    kappa_from_consistency,
    kappa_max,
    pair_consistency,
    pair_keep,
    weighted_kappa,
)
from modelval.behaviour.decisions import NO_RESPONSE, Decision
from modelval.behaviour.experiments import get_dataset
from modelval.behaviour.resampling import (
    RESAMPLING_DESCRIPTIONS,
    bootstrap_weights,
    percentile_interval,
    resampling_for,
)
from modelval.behaviour.trials import aligned, read_trials
from modelval.errors import DataError
from modelval.parsing import check_seed

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "DEFAULT_SEED",
    "HUMAN_SHAPE_MAJORITY",
    "Consistency",
    "HumanAgreement",
    "HumanCeiling",
    "HumanComparison",
    "HumanPanel",
    "HumanShapeImage",
    "compare_with_humans",
    "error_consistency",
    "human_agreement",
    "human_ceiling",
    "human_files",
    "human_shape_fractions",
    "kappa_from_consistency",
    "kappa_max",
    "load_human_panel",
    "texture_despite_humans",
]

#: Bootstrap resamples and seed of the intervals unless the caller says otherwise.
DEFAULT_BOOTSTRAP = 1000
DEFAULT_SEED = 0
#: "Humans agree it is the shape": at least this many of the 10 observers chose the shape category.
HUMAN_SHAPE_MAJORITY = 9
HUMAN_AGREEMENT_MEANING = (
    "the humans' mutual error consistency: mean kappa over pairs of distinct human observers (the observer "
    "itself left out); how much humans agree with each other, not a ceiling for models (see kappa_max)"
)
KAPPA_MAX_MEANING = (
    "the largest kappa an observer with these two accuracies can reach: (c_max - c_exp) / (1 - c_exp), "
    "c_max = 1 - |p1 - p2|"
)


@dataclass
class HumanPanel:
    """The published human observers of one experiment: name -> trials (all sessions of a subject pooled)."""

    dataset: str
    observers: dict[str, list[Decision]]
    files: dict[str, list[Path]] = field(default_factory=dict)

    def images(self) -> list[str]:
        return sorted(t.image for t in next(iter(self.observers.values())))

    def vectors(self, images: Sequence[str] | None = None) -> dict[str, ObserverVectors]:
        """Each observer's vectors over ``images``.

        Parameters
        ----------
        images
            The images (default: those every observer saw).
        """
        images = self.images() if images is None else images
        return {name: ObserverVectors.of(trials, images) for name, trials in sorted(self.observers.items())}

    def accuracies(self, na_handling: str = "wrong") -> dict[str, float]:
        """Each observer's accuracy.

        Parameters
        ----------
        na_handling
            How a "na" answer counts: ``"wrong"`` or ``"exclude"``.
        """
        return {name: vector.accuracy(na_handling) for name, vector in self.vectors().items()}

    def no_response(self) -> dict[str, int]:
        """How many trials each observer left unanswered (``na``)."""
        return {name: sum(t.response == NO_RESPONSE for t in trials) for name, trials in sorted(self.observers.items())}


def human_files(reference_dir: str | os.PathLike[str], dataset: str) -> dict[str, list[Path]]:
    """``subject-NN -> [session files]`` of the human observers of ``dataset`` in a raw-data folder.

    The folder is texture-vs-shape's flat ``raw-data/`` (``<experiment>_subject-NN_session_K.csv``), or
    model-vs-human's ``raw-data/`` with one sub-folder per dataset (``colour/colour_subject-NN_session_1.csv``),
    or that sub-folder itself.

    Parameters
    ----------
    reference_dir
        The published raw-data folder.
    dataset
        One of :data:`~modelval.behaviour.experiments.DATASET_NAMES`.
    """
    folder, entry = Path(reference_dir), get_dataset(dataset)
    upstream = entry.upstream
    for where, prefix in ((folder, entry.file_prefix), (folder / upstream, upstream), (folder, upstream)):
        found: dict[str, list[Path]] = {}
        for path in sorted(where.glob(f"{prefix}_subject-*.csv")):
            subject = path.name[len(prefix) + 1 :].split("_session")[0]
            found.setdefault(subject, []).append(path)
        if found:
            return found
    return {}


def _pooled(subject: str, paths: Sequence[Path]) -> list[Decision]:
    """All sessions of one subject as one observer; an image answered in two sessions is an error."""
    trials: list[Decision] = []
    seen: dict[str, Path] = {}
    for path in paths:
        for trial in read_trials(path):
            if trial.image in seen:
                raise DataError(
                    f"{subject} answered {trial.image!r} in two session files ({seen[trial.image].name} and "
                    f"{path.name}); sessions of one subject are pooled, so each image may appear once"
                )
            seen[trial.image] = path
            trials.append(trial)
    return trials


def load_human_panel(reference_dir: str | os.PathLike[str], dataset: str) -> HumanPanel:
    """Read the human observers of ``dataset`` from the published raw-data folder (sessions pooled by subject).

    Parameters
    ----------
    reference_dir
        The published raw-data folder.
    dataset
        One of :data:`~modelval.behaviour.experiments.DATASET_NAMES`.
    """
    files = human_files(reference_dir, dataset)
    if len(files) < 2:
        entry = get_dataset(dataset)
        raise DataError(
            f"found {len(files)} human observer(s) of {dataset} ({entry.file_prefix}_subject-NN_*.csv) in "
            f"{reference_dir}; need the published raw data: run `{entry.humans_command}`, or name the folder that "
            "holds them (reference_dir= in Python, --reference-dir DIR on the command line)"
        )
    observers = {name: _pooled(name, paths) for name, paths in files.items()}
    first_name, first = next(iter(observers.items()))
    for name, trials in observers.items():
        aligned(first, trials, names=(first_name, name))
    return HumanPanel(dataset, observers, files)


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
    agreement: HumanAgreement  # the humans' mutual kappa (the subject left out)
    excluded_self: str | None = None
    resampling: str = "stimuli"
    resample_observers: bool = False
    n_bootstrap: int = DEFAULT_BOOTSTRAP
    seed: int = DEFAULT_SEED
    na_handling: str = "wrong"
    no_response: dict[str, int] = field(default_factory=dict)

    @property
    def ceiling(self) -> HumanAgreement:
        """The former name of :attr:`agreement` (the humans' mutual kappa is no ceiling for a model)."""
        return self.agreement

    @property
    def observed_consistency(self) -> float:
        return float(np.mean([c.observed for c in self.observers.values()]))

    @property
    def expected_consistency(self) -> float:
        return float(np.mean([c.expected for c in self.observers.values()]))

    @property
    def kappa_max(self) -> float:
        """Mean over the humans of the largest kappa the observer's and each human's accuracies allow."""
        return float(np.mean([c.kappa_max for c in self.observers.values()]))

    @property
    def accuracy_difference(self) -> float:
        """model-vs-human's accuracy difference: mean over humans of (accuracy - human's accuracy)^2."""
        return float(np.mean([(c.accuracy_a - c.accuracy_b) ** 2 for c in self.observers.values()]))

    def to_dict(self) -> dict[str, object]:
        observers_note = (
            "resampled with replacement (the interval covers other human observers like these)"
            if self.resample_observers
            else "held fixed (these human observers; the interval covers other trials only)"
        )
        return {
            "dataset": self.dataset,
            "subject": self.subject,
            "images": self.images,
            "accuracy": self.accuracy,
            "human_accuracy": self.human_accuracy,
            "error_consistency": self.error_consistency,
            "error_consistency_ci95": list(self.ci95),
            "error_consistency_ci95_resampling": self.resampling,
            "error_consistency_ci95_observers": observers_note,
            "error_consistency_ci95_method": f"percentile bootstrap, {self.n_bootstrap} resamples, seed {self.seed}: "
            f"{RESAMPLING_DESCRIPTIONS[self.resampling]}, jointly for the observer and the humans; "
            f"human observers {observers_note}",
            "kappa_max": {"mean": self.kappa_max, "meaning": KAPPA_MAX_MEANING},
            "human_error_consistency": self.agreement.mean,
            "human_error_consistency_range": list(self.agreement.range),
            "human_error_consistency_pairs": len(self.agreement.pairs),
            "human_error_consistency_meaning": HUMAN_AGREEMENT_MEANING,
            "human_kappa_max": self.agreement.mean_kappa_max,
            "observed_consistency": self.observed_consistency,
            "expected_consistency": self.expected_consistency,
            "accuracy_difference": {
                "mean_squared": self.accuracy_difference,
                "mean": float(np.mean([c.accuracy_a - c.accuracy_b for c in self.observers.values()])),
                "meaning": "model-vs-human's accuracy difference: mean over the humans of (accuracy - the "
                "human's accuracy)^2; 'mean' is the signed mean difference",
            },
            "observers": [
                {
                    "observer": name,
                    "error_consistency": c.kappa,
                    "kappa_max": c.kappa_max,
                    "observed_consistency": c.observed,
                    "expected_consistency": c.expected,
                    "accuracy": self.human_accuracies[name],
                    "trials": c.trials,
                    "no_response": self.no_response.get(name, 0),
                }
                for name, c in self.observers.items()
            ],
            "na_handling": {"mode": self.na_handling, "meaning": NA_DESCRIPTIONS[self.na_handling]},
            "excluded_self": self.excluded_self,
        }


def compare_with_humans(
    trials: Sequence[Decision],
    panel: HumanPanel,
    *,
    subject: str | None = None,
    n_bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
    resample: str | None = None,
    resample_observers: bool = False,
    na_handling: str = "wrong",
) -> HumanComparison:
    """Accuracy and error consistency of ``trials`` against every human of ``panel`` (see the module doc).

    ``subject`` (default: the trials' ``subj`` column) names the observer; a human of the panel with
    the same name is left out of the comparison and of the humans' mutual reference. ``resample`` is the
    bootstrap's unit (``None``: texture images on cue-conflict, images elsewhere).

    Parameters
    ----------
    trials
        An observer's decisions, one per image.
    panel
        The human observers of one dataset.
    subject
        The observer's name (a human of that name is left out); default: the trials' ``subj``.
    n_bootstrap
        Bootstrap resamples (0: no interval).
    seed
        Seed of the resamples.
    resample
        The bootstrap's unit (:data:`~modelval.behaviour.resampling.RESAMPLING_UNITS`; ``None``: the default).
    resample_observers
        Also resample the human observers.
    na_handling
        How a "na" answer counts: ``"wrong"`` or ``"exclude"``.
    """
    check_na_handling(na_handling)
    unit = get_dataset(panel.dataset).resampling(resample)
    subject = subject if subject is not None else (trials[0].subject if trials else "")
    names = [name for name in sorted(panel.observers) if name != subject]
    excluded = subject if subject in panel.observers else None
    if not names:
        raise DataError("no human observer left to compare with")
    images = aligned(trials, panel.observers[names[0]], names=(subject or "the decisions", f"human {names[0]}"))
    mine = ObserverVectors.of(trials, images)
    humans = {name: vector for name, vector in panel.vectors(images).items() if name in names}
    if na_handling == "exclude":
        unshared = [name for name, vector in humans.items() if not (mine.answered & vector.answered).any()]
        if not mine.answered.any() or unshared:
            observer = subject or "the decisions"
            who = (
                f"all {len(images)} of {observer}'s responses are 'na'" if not mine.answered.any()
                else f"{observer} and human {unshared[0]} answered no trial in common"
            )  # fmt: skip
            raise DataError(f"{who}: with --na exclude no trial is left to compare; use --na wrong to count a "
                            "missing answer as an error")  # fmt: skip
    per_observer = {name: pair_consistency(mine, vector, na_handling) for name, vector in humans.items()}
    accuracies = {name: vector.accuracy(na_handling) for name, vector in humans.items()}
    values = list(accuracies.values())
    interval = _bootstrap_error_consistency(
        mine.correct,
        [h.correct for h in humans.values()],
        n_bootstrap=n_bootstrap,
        seed=seed,
        images=images,
        resample=unit,
        resample_observers=resample_observers,
        keep=[pair_keep(mine, h, na_handling) for h in humans.values()],
    )
    no_response = panel.no_response()
    return HumanComparison(
        dataset=panel.dataset,
        subject=subject,
        images=len(images),
        accuracy=mine.accuracy(na_handling),
        human_accuracy={"mean": float(np.mean(values)), "min": min(values), "max": max(values)},
        human_accuracies=accuracies,
        observers=per_observer,
        error_consistency=float(np.mean([c.kappa for c in per_observer.values()])),
        ci95=interval,
        agreement=human_agreement(panel, leave_out=[excluded] if excluded else [], na_handling=na_handling),
        excluded_self=excluded,
        resampling=unit,
        resample_observers=resample_observers,
        n_bootstrap=n_bootstrap,
        seed=seed,
        na_handling=na_handling,
        no_response={name: no_response[name] for name in names},
    )


def _bootstrap_error_consistency(
    correct: np.ndarray,
    human_correct: Sequence[np.ndarray],
    *,
    n_bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
    images: Sequence[str] | None = None,
    resample: str = "stimuli",
    resample_observers: bool = False,
    keep: Sequence[np.ndarray | None] | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean kappa over humans.

    Trials are resampled jointly for the observer and every human, by ``resample`` (source units need
    the cue-conflict ``images`` names). With ``resample_observers`` each resample also draws the humans
    with replacement (from a second seeded stream, so the trial draws are the same either way).
    """
    n = len(correct)
    if n == 0 or n_bootstrap <= 0 or not human_correct:
        return math.nan, math.nan
    if resample != "stimuli" and images is None:
        raise ValueError(f"resampling by {resample!r} needs the image names")
    resampling = resampling_for(images if images is not None else [], resample)
    keeps = list(keep) if keep is not None else [None] * len(human_correct)
    observer_rng = np.random.default_rng([check_seed(seed), 1])
    chunks = []
    for weights in bootstrap_weights(n, resampling, n_bootstrap=n_bootstrap, seed=seed):
        kappas = np.stack([weighted_kappa(weights, correct, h, k) for h, k in zip(human_correct, keeps, strict=True)])
        if resample_observers:
            count = len(human_correct)
            drawn = observer_rng.integers(0, count, size=(weights.shape[0], count))
            chunks.append(np.take_along_axis(kappas.T, drawn, axis=1).mean(axis=1))
        else:
            chunks.append(kappas.mean(axis=0))
    return percentile_interval(np.concatenate(chunks), level)


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
    """Cue-conflict: per conflict image, (humans who chose the shape, humans) ("na" is not the shape).

    Parameters
    ----------
    panel
        The human observers of one dataset.
    """
    if not get_dataset(panel.dataset).has_conflicts:
        raise DataError(f"shape decisions exist only on cue-conflict images, not on {panel.dataset}")
    counts: dict[str, list[int]] = {}
    for trial in (trial for trials in panel.observers.values() for trial in trials if trial.is_conflict):
        entry = counts.setdefault(trial.image, [0, 0])
        entry[0] += trial.response == trial.shape
        entry[1] += 1
    return {image: (hits, total) for image, (hits, total) in sorted(counts.items())}


def texture_despite_humans(
    trials: Sequence[Decision],
    fractions: Mapping[str, tuple[int, int]],
    *,
    min_humans: int = HUMAN_SHAPE_MAJORITY,
) -> list[HumanShapeImage]:
    """Images where the observer chose the texture although at least ``min_humans`` humans chose the shape.

    Parameters
    ----------
    trials
        An observer's decisions, one per image.
    fractions
        Per image, (humans who chose the shape, humans) (:func:`human_shape_fractions`).
    min_humans
        The humans who must have chosen the shape.
    """
    found = []
    for trial in trials:
        if trial.image not in fractions:
            continue
        hits, total = fractions[trial.image]
        if trial.response == trial.texture and hits >= min_humans:
            found.append(HumanShapeImage(trial.image, trial.shape, trial.texture, trial.response, hits, total))
    return sorted(found, key=lambda item: (-item.humans_shape, item.image))
