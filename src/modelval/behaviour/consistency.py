"""Trial-by-trial agreement of two observers: error consistency, its maximum, and the matrix of all pairs.

Error consistency (Geirhos, Meding & Wichmann, NeurIPS 2020) is Cohen's kappa on two trial-wise
correctness vectors, exactly as model-vs-human (``modelvshuman/plotting/analyses.py``,
``ErrorConsistency``) computes it:

    correct_i  = response_i == category_i     (cue-conflict: category = shape)
    c_obs      = fraction of trials where both are correct or both are wrong
    c_exp      = p1 * p2 + (1 - p1) * (1 - p2)            (p = accuracy of each observer)
    kappa      = (c_obs - c_exp) / (1 - c_exp),  and kappa = 1 when c_obs == 1

The last rule is model-vs-human's: two observers that agree on every trial have kappa 1, also when
both are always right (c_exp == 1, where the formula is 0/0).

**kappa is bounded by the two accuracies.** Two observers with accuracies p1 and p2 agree on at most
``c_max = 1 - |p1 - p2|`` of the trials (the more accurate one is right wherever the other is, and
wrong nowhere else), so

    kappa_max = (c_max - c_exp) / (1 - c_exp)                (1 when p1 == p2)

is the most any observer of accuracy p1 can reach against one of accuracy p2. A cue-conflict model
right on 21% of the trials can reach at most about 0.15 against humans right on 78%: the humans'
mutual kappa (0.33) is not a level such a model could reach, and ``kappa / kappa_max`` is not
reported because it is not what the papers report; ``kappa_max`` is printed beside kappa instead.

**No answer** (``na``: a human who did not answer in time) is wrong by default, as in model-vs-human
(``na_handling="wrong"``). With ``"exclude"``, a trial on which either observer of a pair gave no
answer is left out *of that pair* (pairwise deletion), and both accuracies of the pair are taken over
the trials left.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from modelval.behaviour.decisions import NO_RESPONSE, Decision
from modelval.behaviour.trials import aligned

NA_HANDLING: tuple[str, ...] = ("wrong", "exclude")
NA_DESCRIPTIONS = {
    "wrong": "a trial without an answer ('na') counts as wrong (model-vs-human)",
    "exclude": "a trial on which either observer of a pair gave no answer ('na') is left out of that pair",
}


@dataclass(frozen=True)
class Consistency:
    """Trial-wise agreement of two observers (on the trials the pair kept)."""

    observed: float  # c_obs
    expected: float  # c_exp
    kappa: float  # error consistency
    trials: int
    accuracy_a: float = float("nan")
    accuracy_b: float = float("nan")
    kappa_max: float = float("nan")  # the largest kappa these two accuracies allow


def kappa_from_consistency(observed: float, expected: float) -> float:
    """Cohen's kappa from observed and expected consistency, with model-vs-human's ``c_obs == 1 -> 1``.

    Parameters
    ----------
    observed
        Observed consistency.
    expected
        Expected consistency.
    """
    if not (0.0 <= observed <= 1.0 and 0.0 <= expected <= 1.0):
        raise ValueError(f"consistencies must lie in [0, 1], got observed={observed}, expected={expected}")
    if observed == 1.0:
        return 1.0
    return (observed - expected) / (1.0 - expected)


def kappa_max(p1: float, p2: float) -> float:
    """The largest kappa two observers of accuracies ``p1`` and ``p2`` can reach (see the module doc).

    Parameters
    ----------
    p1
        Accuracy of the first observer.
    p2
        Accuracy of the second observer.
    """
    if not (0.0 <= p1 <= 1.0 and 0.0 <= p2 <= 1.0):
        raise ValueError(f"accuracies must lie in [0, 1], got {p1} and {p2}")
    expected = p1 * p2 + (1 - p1) * (1 - p2)
    return kappa_from_consistency(1.0 - abs(p1 - p2), expected)


def error_consistency(
    correct_a: Sequence[bool] | np.ndarray,
    correct_b: Sequence[bool] | np.ndarray,
    *,
    keep: Sequence[bool] | np.ndarray | None = None,
) -> Consistency:
    """Error consistency of two trial-wise correctness vectors (same trials, same order).

    ``keep`` (optional) marks the trials the pair keeps (``na_handling="exclude"``).

    Parameters
    ----------
    correct_a
        Correctness of observer A per trial.
    correct_b
        Correctness of observer B on the same trials.
    keep
        The trials the pair keeps (``None``: all).
    """
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"need two 1-D correctness vectors of equal length, got shapes {a.shape} and {b.shape}")
    if keep is not None:
        mask = np.asarray(keep, dtype=bool)
        if mask.shape != a.shape:
            raise ValueError(f"keep has shape {mask.shape}, the vectors {a.shape}")
        a, b = a[mask], b[mask]
    if a.size == 0:
        raise ValueError("error consistency needs at least one trial")
    p1, p2 = float(a.mean()), float(b.mean())
    expected = p1 * p2 + (1 - p1) * (1 - p2)
    observed = float((a == b).mean())
    return Consistency(
        observed, expected, kappa_from_consistency(observed, expected), int(a.size), p1, p2, kappa_max(p1, p2)
    )


def weighted_kappa(
    weights: np.ndarray, correct_a: np.ndarray, correct_b: np.ndarray, keep: np.ndarray | None = None
) -> np.ndarray:
    """Kappa on each resample (a row of ``weights``: how often each trial is drawn), same convention.

    Parameters
    ----------
    weights
        Resample weights, ``(resamples, trials)``.
    correct_a
        Correctness of observer A per trial.
    correct_b
        Correctness of observer B on the same trials.
    keep
        The trials the pair keeps (``None``: all).
    """
    a = np.asarray(correct_a, dtype=np.float64)
    b = np.asarray(correct_b, dtype=np.float64)
    k = np.ones_like(a) if keep is None else np.asarray(keep, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = weights @ k
        p1, p2 = (weights @ (k * a)) / total, (weights @ (k * b)) / total
        observed = (weights @ (k * (a == b))) / total
        expected = p1 * p2 + (1 - p1) * (1 - p2)
        kappa = (observed - expected) / (1 - expected)
    return np.where(observed == 1.0, 1.0, kappa)


@dataclass(frozen=True)
class ObserverVectors:
    """One observer's trials as vectors over a fixed list of images: correct, and answered (not ``na``)."""

    correct: np.ndarray
    answered: np.ndarray

    @classmethod
    def of(cls, trials: Sequence[Decision], images: Sequence[str]) -> ObserverVectors:
        """The vectors of ``trials`` over ``images``.

        Parameters
        ----------
        trials
            An observer's decisions, one per image.
        images
            The image names, in order.
        """
        index = {t.image: t for t in trials}
        chosen = [index[image] for image in images]
        return cls(
            np.array([t.correct for t in chosen], dtype=bool),
            np.array([t.response != NO_RESPONSE for t in chosen], dtype=bool),
        )

    def accuracy(self, na_handling: str = "wrong") -> float:
        """The accuracy over the answered trials.

        Parameters
        ----------
        na_handling
            How a "na" answer counts: ``"wrong"`` or ``"exclude"``.
        """
        if na_handling == "exclude":
            return float(self.correct[self.answered].mean()) if self.answered.any() else float("nan")
        return float(self.correct.mean())


def check_na_handling(na_handling: str) -> str:
    """Refuse an unknown ``na_handling``.

    Parameters
    ----------
    na_handling
        The value to check.
    """
    if na_handling not in NA_HANDLING:
        raise ValueError(f"unknown na handling {na_handling!r}; expected one of: {', '.join(NA_HANDLING)}")
    return na_handling


def pair_keep(a: ObserverVectors, b: ObserverVectors, na_handling: str) -> np.ndarray | None:
    """The trials a pair keeps: all (``wrong``), or those both answered (``exclude``).

    Parameters
    ----------
    a
        Observer A's vectors.
    b
        Observer B's vectors.
    na_handling
        How a "na" answer counts: ``"wrong"`` or ``"exclude"``.
    """
    return (a.answered & b.answered) if check_na_handling(na_handling) == "exclude" else None


def pair_consistency(a: ObserverVectors, b: ObserverVectors, na_handling: str = "wrong") -> Consistency:
    """Error consistency, kappa_max and observed consistency of a pair.

    Parameters
    ----------
    a
        Observer A's vectors.
    b
        Observer B's vectors.
    na_handling
        How a "na" answer counts: ``"wrong"`` or ``"exclude"``.
    """
    return error_consistency(a.correct, b.correct, keep=pair_keep(a, b, na_handling))


@dataclass(frozen=True)
class KappaMatrix:
    """model-vs-human's matrix of every pair of observers (humans and models) on one experiment."""

    names: list[str]
    kappa: np.ndarray
    kappa_max: np.ndarray
    observed: np.ndarray
    accuracy: np.ndarray
    na_handling: str = "wrong"

    def to_dict(self) -> dict[str, object]:
        return {
            "observers": self.names,
            "accuracy": self.accuracy.tolist(),
            "kappa": self.kappa.tolist(),
            "kappa_max": self.kappa_max.tolist(),
            "observed_consistency": self.observed.tolist(),
            "na_handling": self.na_handling,
        }


def kappa_matrix(observers: Mapping[str, Sequence[Decision]], *, na_handling: str = "wrong") -> KappaMatrix:
    """Error consistency, kappa_max and observed consistency of every pair of ``observers`` (diagonal: 1).

    Parameters
    ----------
    observers
        Label -> that observer's vectors.
    na_handling
        How a "na" answer counts: ``"wrong"`` or ``"exclude"``.
    """
    names = list(observers)
    if not names:
        raise ValueError("a kappa matrix needs at least one observer")
    first = observers[names[0]]
    images = aligned(first, first)
    for name in names[1:]:
        aligned(first, observers[name], names=(names[0], name))
    vectors = [ObserverVectors.of(observers[name], images) for name in names]
    n = len(names)
    kappa, bound, observed = np.ones((n, n)), np.ones((n, n)), np.ones((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            pair = pair_consistency(vectors[i], vectors[j], na_handling)
            kappa[i, j] = kappa[j, i] = pair.kappa
            bound[i, j] = bound[j, i] = pair.kappa_max
            observed[i, j] = observed[j, i] = pair.observed
    accuracy = np.array([v.accuracy(na_handling) for v in vectors])
    return KappaMatrix(names, kappa, bound, observed, accuracy, na_handling)


def _kappa_of_cells(cells: np.ndarray) -> float:
    """kappa of a 2x2 table of proportions ``[both right, only 1 right, only 2 right, both wrong]``."""
    both, only_1, only_2, neither = cells
    p1, p2 = both + only_1, both + only_2
    expected = p1 * p2 + (1 - p1) * (1 - p2)
    return float((both + neither - expected) / (1 - expected))


def kappa_cells(p1: float, p2: float, kappa: float) -> np.ndarray:
    """The 2x2 table of two observers with accuracies ``p1``, ``p2`` and error consistency ``kappa``: ``[both right,
    only 1 right, only 2 right, both wrong]`` (an error when the three cannot go together).

    Parameters
    ----------
    p1
        Accuracy of the first observer.
    p2
        Accuracy of the second observer.
    kappa
        Their error consistency.
    """
    expected = p1 * p2 + (1 - p1) * (1 - p2)
    observed = kappa * (1 - expected) + expected
    both = (observed - 1 + p1 + p2) / 2
    cells = np.array([both, p1 - both, p2 - both, 1 - p1 - p2 + both])
    if (cells < -1e-12).any() or not 0 < expected < 1:
        raise ValueError(
            f"no two observers have accuracies {p1} and {p2} and kappa {kappa} (kappa_max {kappa_max(p1, p2):.3f})"
        )
    return np.clip(cells, 0.0, 1.0)


def kappa_range(p1: float, p2: float) -> tuple[float, float]:
    """The lowest and highest kappa two observers of accuracies ``p1`` and ``p2`` (both in (0, 1)) can have: the
    share both answer correctly runs from ``max(0, p1 + p2 - 1)`` to ``min(p1, p2)``, and kappa is linear in it.

    Parameters
    ----------
    p1
        Accuracy of the first observer.
    p2
        Accuracy of the second observer.
    """
    expected = p1 * p2 + (1 - p1) * (1 - p2)

    def kappa_at(both: float) -> float:
        return (2 * both + 1 - p1 - p2 - expected) / (1 - expected)

    return kappa_at(max(0.0, p1 + p2 - 1)), kappa_at(min(p1, p2))


def kappa_variance(p1: float, p2: float, kappa: float) -> float:
    """n times the large-sample variance of the estimated kappa over n independent trials (delta method on the 2x2
    multinomial: ``g' (diag(pi) - pi pi') g`` with ``g`` the gradient of kappa in the cell proportions).

    Parameters
    ----------
    p1
        Accuracy of the first observer.
    p2
        Accuracy of the second observer.
    kappa
        Their error consistency.
    """
    cells = kappa_cells(p1, p2, kappa)
    step = 1e-6
    gradient = np.array([(_kappa_of_cells(cells + step * e) - _kappa_of_cells(cells - step * e)) / (2 * step)
                         for e in np.eye(4)])  # fmt: skip
    covariance = np.diag(cells) - np.outer(cells, cells)
    return float(gradient @ covariance @ gradient)


@dataclass(frozen=True)
class TrialPlan:
    """How many trials tell kappa ``kappa`` from ``kappa + difference`` (accuracies fixed) at a power."""

    p1: float
    p2: float
    kappa: float
    difference: float
    power: float
    alpha: float
    design: str
    trials: int

    def to_dict(self) -> dict[str, object]:
        return dict(vars(self))


def trials_for_kappa_difference(
    p1: float,
    p2: float,
    kappa: float,
    difference: float,
    *,
    power: float = 0.8,
    alpha: float = 0.05,
    design: str = "two-sample",
) -> TrialPlan:
    """Trials a stimulus set needs so that a two-sided test at ``alpha`` tells kappa from kappa + ``difference`` with
    probability ``power`` (Klein et al., NeurIPS 2025: plan trial counts from the sampling distribution of kappa
    at the observers' accuracies; here its large-sample normal form).

    ``design="one-sample"``: one observer pair, kappa tested against the value ``kappa`` (e.g. 0:
    ``n = ((z_a sd_0 + z_b sd_1) / difference)^2``); ``"two-sample"``: two pairs (two models against the same
    human, say), each on ``n`` trials of its own, ``n = (z_a + z_b)^2 (var_0 + var_1) / difference^2``, where
    ``var`` is :func:`kappa_variance` at each kappa (the accuracies held at ``p1``, ``p2``).

    Parameters
    ----------
    p1
        Accuracy of the first observer.
    p2
        Accuracy of the second observer.
    kappa
        Their error consistency.
    difference
        The difference of kappa to tell apart.
    power
        The probability of telling it.
    alpha
        The test's level.
    design
        ``"paired"`` or ``"independent"``.
    """
    from statistics import NormalDist

    if not 0 < power < 1 or not 0 < alpha < 1 or difference == 0:
        raise ValueError("power and alpha lie in (0, 1) and the difference is not 0")
    z_a, z_b = NormalDist().inv_cdf(1 - alpha / 2), NormalDist().inv_cdf(power)
    var_0, var_1 = kappa_variance(p1, p2, kappa), kappa_variance(p1, p2, kappa + difference)
    if design == "one-sample":
        n = ((z_a * math.sqrt(var_0) + z_b * math.sqrt(var_1)) / difference) ** 2
    elif design == "two-sample":
        n = (z_a + z_b) ** 2 * (var_0 + var_1) / difference**2
    else:
        raise ValueError(f"design is 'one-sample' or 'two-sample', got {design!r}")
    return TrialPlan(p1, p2, kappa, difference, power, alpha, design, math.ceil(n))
