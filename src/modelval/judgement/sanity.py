"""The sanity gate: no shape bias is reported for a model that does not behave like a working classifier.

Cue-conflict accuracy = (shape hits + texture hits) / conflict images: the fraction of images where
the model named *one* of the two categories present. In the published decision files models score
0.42-0.89 and the ten human observers 0.66-0.88; a model guessing among 16 categories scores about
2/16 = 0.125. Below :data:`SANITY_THRESHOLD` the shape bias is a ratio of two small numbers of
lucky hits and means nothing, so the verdict is ``NOT A WORKING CLASSIFIER`` and no shape bias is
reported.

**Deciding early.** A random network should not cost a full run to reject. :func:`probe_sanity`
evaluates a seeded random sample of the conflict stimuli, 32 at a time up to 256, on its own batches,
and after each look asks an exact question of the finite population: were the model's accuracy over
*all* conflict stimuli at the threshold (or, for a pass, one hit short of it), how likely is a sample
this poor (this good)? The hypergeometric tail is computed with integer binomial coefficients; the
verdict is taken when it is below :data:`EARLY_RISK` shared over the looks (Bonferroni). A failure stops
the run; anything else runs the full evaluation exactly as without the probe (same batches, same
decisions), and a probe that has seen enough hits to rule out an early failure stops looking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.shape_bias import ShapeBiasResult

if TYPE_CHECKING:
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.preprocessing import PreprocessConfig

SANITY_THRESHOLD = 0.30
VERDICT = "NOT A WORKING CLASSIFIER"
LIKELY_CAUSES = (
    "the weights were not loaded (a randomly initialised network)",
    "a wrong label map (the output indices are not ImageNet-1k's)",
    "a wrong normalization or input scaling (e.g. 0-255 instead of 0-1)",
)


#: Early decision: the accepted chance that a wrong verdict comes out of the random sample (over all looks).
EARLY_RISK = 1e-6
#: Conflict stimuli added to the random sample per look, and the most the sample grows to.
PROBE_STEP = 32
PROBE_LIMIT = 256
#: The sample is the same for every model (a seeded permutation of the conflict stimuli).
PROBE_SEED = 0


def _hits_needed(population: int, threshold: float = SANITY_THRESHOLD) -> int:
    """The fewest shape + texture hits among ``population`` conflict stimuli that pass the gate.

    Computed with the same float comparison as :func:`sanity_check` (``hits / n >= threshold``), so the
    early decision and the full run can never disagree about where the line is.
    """
    return next(k for k in range(population + 1) if k / population >= threshold) if population else 0


def _hypergeometric_cdf(hits: int, sampled: int, successes: int, population: int) -> Fraction:
    """P(X <= hits) for X ~ Hypergeometric: ``sampled`` drawn without replacement from ``population``
    items of which ``successes`` are hits. Exact (integer binomial coefficients)."""
    total = math.comb(population, sampled)
    low = max(0, sampled - (population - successes))
    favourable = sum(
        math.comb(successes, x) * math.comb(population - successes, sampled - x) for x in range(low, hits + 1)
    )
    return Fraction(favourable, total)


@dataclass(frozen=True)
class EarlyDecision:
    """The gate's verdict from a random sample of the conflict stimuli, when the sample already makes it certain.

    ``p_value`` is the exact hypergeometric probability of a sample at least this extreme if the verdict
    were wrong: for a failure, if the model's cue-conflict accuracy over all ``population`` conflict
    stimuli reached the threshold; for a pass, if it fell short by one hit. It is at most the per-look
    share of :data:`EARLY_RISK`.
    """

    passed: bool
    sampled: int
    hits: int
    population: int
    p_value: float
    risk: float = EARLY_RISK
    threshold: float = SANITY_THRESHOLD

    @property
    def sample_accuracy(self) -> float:
        return self.hits / self.sampled

    def describe(self) -> str:
        were = f"{self.threshold:.0%} or more" if not self.passed else f"below {self.threshold:.0%}"
        sample = "poor" if not self.passed else "good"
        return (
            f"decided after a random sample of {self.sampled} of the {self.population} conflict stimuli "
            f"({self.hits} shape or texture hits): were the accuracy over all of them {were}, a sample this "
            f"{sample} would occur with probability {self.p_value:.1e} (exact hypergeometric bound; accepted "
            f"risk {self.risk:.0e})"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "passed": self.passed,
            "sampled_conflict_stimuli": self.sampled,
            "hits": self.hits,
            "conflict_stimuli": self.population,
            "sample_cue_accuracy": self.sample_accuracy,
            "p_value": self.p_value,
            "risk": self.risk,
            "test": "exact hypergeometric bound on the cue-conflict accuracy of all conflict stimuli",
        }


def _early_decision(
    hits: int,
    sampled: int,
    population: int,
    *,
    threshold: float = SANITY_THRESHOLD,
    risk: float = EARLY_RISK,
    looks: int = PROBE_LIMIT // PROBE_STEP,
) -> EarlyDecision | None:
    """The verdict a random sample (without replacement) already makes certain, else ``None``.

    Fail: even a model with just enough hits to pass would give ``hits`` or fewer in a sample of this
    size with probability <= ``risk / looks`` (the probability falls as the true hit count rises, so
    every passing model is covered). Pass: the mirror image, with one hit short of passing. ``looks``
    splits the risk over the looks of a sequential probe (Bonferroni).
    """
    if not 0 < sampled <= population:
        return None
    needed = _hits_needed(population, threshold)
    alpha = risk / looks
    fail = _hypergeometric_cdf(hits, sampled, needed, population) if needed <= population else Fraction(0)
    if fail <= alpha:
        return EarlyDecision(False, sampled, hits, population, float(fail), risk, threshold)
    if needed >= 1:
        passing = 1 - _hypergeometric_cdf(hits - 1, sampled, needed - 1, population) if hits >= 1 else Fraction(1)
        if passing <= alpha:
            return EarlyDecision(True, sampled, hits, population, float(passing), risk, threshold)
    return None


def _can_still_fail(
    hits: int,
    limit: int,
    population: int,
    *,
    threshold: float = SANITY_THRESHOLD,
    risk: float = EARLY_RISK,
    looks: int = PROBE_LIMIT // PROBE_STEP,
) -> bool:
    """Whether a sample grown to ``limit`` stimuli could still reject a model that has ``hits`` already
    (no further hit is the best case for a rejection)."""
    decision = _early_decision(hits, limit, population, threshold=threshold, risk=risk, looks=looks)
    return decision is not None and not decision.passed


@dataclass(frozen=True)
class Sanity:
    passed: bool
    cue_accuracy: float
    threshold: float = SANITY_THRESHOLD
    #: Set when a random sample decided the gate before (or instead of) the full run.
    early: EarlyDecision | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "passed": self.passed,
            "cue_accuracy": self.cue_accuracy,
            "threshold": self.threshold,
            "decided_early": None if self.early is None else self.early.to_dict(),
        }

    def headline(self) -> str:
        """The verdict in one short line (the reasons are in :meth:`message`)."""
        if self.passed:
            return f"sanity: passed (cue-conflict accuracy {self.cue_accuracy:.2%} >= {self.threshold:.0%})"
        sample = " on a random sample" if self.early is not None and not self.early.passed else ""
        return f"{VERDICT}: cue-conflict accuracy {self.cue_accuracy:.2%}{sample} is below {self.threshold:.0%}"

    def message(self) -> str:
        if self.passed:
            early = "" if self.early is None else f"; certain early: {self.early.describe()}"
            return f"sanity: passed (cue-conflict accuracy {self.cue_accuracy:.2%} >= {self.threshold:.0%}{early})"
        if self.early is not None:
            measured = (
                f"cue-conflict accuracy {self.early.sample_accuracy:.2%} on a random sample, certainly below "
                f"{self.threshold:.0%} (chance is about 12.5%), so the run stopped there: {self.early.describe()}"
            )
        else:
            measured = (
                f"cue-conflict accuracy {self.cue_accuracy:.2%} is below {self.threshold:.0%} (chance is about 12.5%)"
            )
        return (
            f"{VERDICT}: {measured}. Likely causes: {'; '.join(LIKELY_CAUSES)}. No shape bias is reported; "
            "--no-sanity-gate reports it anyway"
        )


def sanity_check(result: ShapeBiasResult, threshold: float = SANITY_THRESHOLD) -> Sanity:
    """Whether the decisions behind ``result`` look like a working ImageNet classifier's.

    Parameters
    ----------
    result
        The shape-bias result of the run.
    threshold
        The cue-conflict accuracy a working classifier reaches at least.
    """
    accuracy = result.cue_accuracy
    return Sanity(passed=not math.isnan(accuracy) and accuracy >= threshold, cue_accuracy=accuracy, threshold=threshold)


def sanity_of(result: ShapeBiasResult, early: EarlyDecision | None) -> Sanity:
    """The gate's verdict on a run: the early sample's when it stopped the run (``result`` then covers the
    sample only), else the full result's (with the early decision, if any, attached).

    Parameters
    ----------
    result
        The run's result (the sample's, when the early decision stopped it).
    early
        The early sample's decision (``None``: no probe ran).
    """
    if early is not None and not early.passed:
        return Sanity(passed=False, cue_accuracy=early.sample_accuracy, early=early)
    check = sanity_check(result)
    return Sanity(check.passed, check.cue_accuracy, check.threshold, early)


@dataclass
class SanityProbe:
    """What :func:`probe_sanity` evaluated: the sample's positions in the stimulus set (sorted), their
    (n, 16) category probabilities, and the early decision (``None``: the sample did not settle it)."""

    positions: np.ndarray
    probabilities: np.ndarray
    decision: EarlyDecision | None


def probe_sanity(
    model: Any,
    config: PreprocessConfig,
    stimuli: StimulusSet,
    *,
    step: int = PROBE_STEP,
    limit: int = PROBE_LIMIT,
    seed: int = PROBE_SEED,
    **forward: Any,
) -> SanityProbe | None:
    """Evaluate a growing random sample of the conflict stimuli until the gate's verdict is certain.

    The sample is evaluated on its own (its own batches), so the full run that follows a pass is exactly
    the run without the probe: same batches, same decisions. ``forward`` are the keyword arguments of
    :func:`modelval.evaluation.category_probabilities` (batch size, device, aggregation, amp, label map).
    Returns ``None`` when the set is too small for a sample to save anything (a subset of the stimuli).

    Parameters
    ----------
    model
        The model.
    config
        Its preprocessing.
    stimuli
        The stimulus set.
    step
        Conflict stimuli added to the sample each round.
    limit
        The largest sample before the full run decides.
    seed
        The sample's random seed.
    **forward
        The keyword arguments of :func:`~modelval.evaluation.evaluate` (device, batch size, ...).
    """

    from modelval.evaluation import category_probabilities

    conflicts = np.array([i for i, s in enumerate(stimuli.stimuli) if s.shape != s.texture], dtype=np.int64)
    population = len(conflicts)
    limit = min(limit, population // 4)
    if limit < step:
        return None
    order = conflicts[np.random.default_rng(seed).permutation(population)][:limit]
    looks = -(-limit // step)
    shapes = [stimuli.stimuli[i].shape for i in order]
    textures = [stimuli.stimuli[i].texture for i in order]
    parts: list[np.ndarray] = []
    hits = 0
    decision = None
    for start in range(0, limit, step):
        chunk = order[start : start + step]
        probabilities = category_probabilities(
            model, stimuli.pixels_of(chunk.tolist()), config, progress=False, **forward
        )
        parts.append(probabilities)
        for offset, choice in enumerate(probabilities.argmax(axis=1)):
            answer = CATEGORIES[int(choice)]
            hits += answer in (shapes[start + offset], textures[start + offset])
        sampled = start + len(chunk)
        decision = _early_decision(hits, sampled, population, looks=looks)
        if decision is not None or not _can_still_fail(hits, limit, population, looks=looks):
            break  # settled, or so many hits already that even the whole sample could not reject the model
    sampled = sum(len(p) for p in parts)
    evaluated = order[:sampled]
    sort = np.argsort(evaluated, kind="stable")
    return SanityProbe(evaluated[sort], np.concatenate(parts)[sort], decision)
