"""The preprocessing self-check: the declared preprocessing against its near alternatives, with no reference.

A model fed wrong still answers, often well enough to pass a sanity gate: the bundled EfficientNet-Lite0 answers
55.5% of the conflict stimuli by shape or texture fed BGR and 68.6% fed RGB; declared with ImageNet's mean/std
(its weights want 0.5/0.5) it loses 6 points. Without an expected value nothing else can tell. So the run's own
preprocessing (the one its factory, spec or registry entry declared) is held against each near alternative on
the same conflict stimuli:

- **channel order**: BGR (the images' channels reversed before the normalization);
- **normalization**: ImageNet's mean/std and 0.5/0.5, each where the declared one is another;
- **value range**: pixels in [0, 255] rather than [0, 1] (mean and std divided by 255: the same arithmetic).

An answer is a *hit* when it names the stimulus's shape or its texture (the cue-conflict accuracy). The declared
preprocessing's answers are the run's own (no forward); each alternative answers a growing random sample of the
conflict stimuli (96, 480, then all). The paired answers are compared by the exact one-sided McNemar test
(a binomial test on the stimuli that only one of the two hits; H1: the alternative hits more). An alternative is
*suspect* when p < :data:`ALPHA` / (looks x alternatives), a Bonferroni bound over every look at every
alternative, so a correctly fed model is flagged with probability below :data:`ALPHA`. An alternative that is
not ahead after a look (it hits no more stimuli than the declared one) stops there: a correctly fed model costs
96 stimuli per alternative, under a quarter of one full forward in all.

A run whose outputs the output cache served (its probe showed the same model) reads the check stored beside them
(``preprocessing_check.json`` in the entry's folder), when it was made by this check's version under the same
aggregation and label map: the alternatives are then not forwarded again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from modelval.preprocessing import NORMALIZATIONS, PreprocessConfig
from modelval.proportions import wilson_interval

if TYPE_CHECKING:
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.evaluation import Evaluation
    from modelval.records.output_cache import OutputCache

#: The chance of flagging a correctly fed model, at most (over every look at every alternative).
ALPHA = 1e-3
#: The sample sizes at which an alternative is looked at (then every conflict stimulus).
LOOKS = (96, 480)
SEED = 0
#: Bumped whenever what the check computes changes: a stored check of another version is never read.
VERSION = 1
STORED = "preprocessing_check.json"


@dataclass(frozen=True)
class Alternative:
    """One alternative's paired comparison with the declared preprocessing on the same conflict stimuli."""

    factor: str  # "channel order", "normalization" or "value range"
    name: str  # "BGR", "imagenet", "half", "[0, 255]"
    stimuli: int
    declared_hits: int
    hits: int
    #: Stimuli only the alternative hits, and only the declared one hits (McNemar's discordant pairs).
    better: int
    worse: int
    #: One-sided exact McNemar p (H1: the alternative hits more), and whether it is below the threshold.
    p_value: float
    suspect: bool

    def accuracies(self) -> dict[str, Any]:
        """Both cue-conflict accuracies on these stimuli, with their 95% Wilson intervals."""
        low, high = wilson_interval([self.hits, self.declared_hits], [self.stimuli, self.stimuli])
        return {
            "accuracy": self.hits / self.stimuli, "ci95": [float(low[0]), float(high[0])],
            "declared_accuracy": self.declared_hits / self.stimuli,
            "declared_ci95": [float(low[1]), float(high[1])],
        }  # fmt: skip

    def describe(self) -> str:
        """``channel order: BGR answers 68.6% [65.8%, 71.2%] of 1120 conflict stimuli, the declared 55.5% ...``."""
        a = self.accuracies()
        return (
            f"{self.factor}: {self.name} answers {a['accuracy']:.1%} [{a['ci95'][0]:.1%}, {a['ci95'][1]:.1%}] of "
            f"{self.stimuli} conflict stimuli by shape or texture, the declared preprocessing "
            f"{a['declared_accuracy']:.1%} [{a['declared_ci95'][0]:.1%}, {a['declared_ci95'][1]:.1%}] "
            f"(paired: {self.better} only {self.name}, {self.worse} only declared; one-sided p = {self.p_value:.1e})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), **self.accuracies()}


@dataclass(frozen=True)
class PreprocessingCheck:
    """The declared preprocessing against each near alternative (the module docstring says how)."""

    declared: str
    alternatives: tuple[Alternative, ...]
    #: The per-test threshold: ALPHA / (looks x alternatives).
    threshold: float
    #: Images the alternatives' forwards cost (the declared answers are the run's own), and their time.
    images_forwarded: int
    seconds: float = 0.0
    #: Read from beside the run's stored outputs (nothing forwarded).
    stored: bool = False

    @property
    def suspect(self) -> Alternative | None:
        """The alternative that answers better by the widest margin of evidence (``None``: the declared holds)."""
        flagged = [a for a in self.alternatives if a.suspect]
        return min(flagged, key=lambda a: a.p_value) if flagged else None

    def headline(self) -> str:
        """One line: what answers better than the declared preprocessing, or that none does."""
        worst = self.suspect
        if worst is None:
            tried = ", ".join(f"{a.name} ({a.factor})" for a in self.alternatives)
            return f"the declared preprocessing ({self.declared}) answers at least as well as {tried}"
        return f"SUSPECT PREPROCESSING: {worst.describe()}"

    def to_dict(self) -> dict[str, Any]:
        suspect = self.suspect
        return {
            "passed": suspect is None, "status": "pass" if suspect is None else "suspect",
            "reason": "" if suspect is None else self.headline(), "declared": self.declared, "alpha": ALPHA,
            "threshold": self.threshold, "images_forwarded": self.images_forwarded,
            "seconds": round(self.seconds, 2), "stored": self.stored,
            "alternatives": [a.to_dict() for a in self.alternatives],
        }  # fmt: skip


def alternatives_of(config: PreprocessConfig) -> list[tuple[str, str, PreprocessConfig, bool]]:
    """``(factor, name, config, channels reversed)`` of each near alternative of ``config``.

    Parameters
    ----------
    config
        The declared preprocessing.
    """
    found = [("channel order", "BGR", config, True)]
    for name, (mean, std) in NORMALIZATIONS.items():
        if not (np.allclose(config.mean, mean) and np.allclose(config.std, std)):
            found.append(("normalization", name, dataclasses.replace(config, mean=mean, std=std), False))
    (m1, m2, m3), (s1, s2, s3) = config.mean, config.std
    wide = dataclasses.replace(config, mean=(m1 / 255, m2 / 255, m3 / 255), std=(s1 / 255, s2 / 255, s3 / 255))
    found.append(("value range", "[0, 255]", wide, False))
    return found


def mcnemar_better(better: int, worse: int) -> float:
    """The exact one-sided McNemar p-value that the alternative hits more: P(X >= better), X ~ Bin(better + worse,
    1/2) (1.0 when no stimulus is discordant).

    Parameters
    ----------
    better, worse
        Stimuli only the alternative hits, and only the declared preprocessing hits.
    """
    from scipy.stats import binomtest

    if better + worse == 0:
        return 1.0
    return float(binomtest(better, better + worse, 0.5, alternative="greater").pvalue)


def preprocessing_check(
    model: Any,
    config: PreprocessConfig,
    stimuli: StimulusSet,
    evaluation: Evaluation,
    *,
    cache: OutputCache | None = None,
    **forward: Any,
) -> PreprocessingCheck | None:
    """Hold the declared preprocessing against its near alternatives (module docstring); ``None`` when the set
    has no conflict stimuli.

    Parameters
    ----------
    model
        The model, on its device.
    config
        The declared preprocessing the run used.
    stimuli
        The stimuli of the run.
    evaluation
        The run's evaluation under ``config`` (the declared answers).
    cache
        The output cache the run used: the check is stored beside its outputs, and read from there when they were
        served (``None``: neither).
    **forward
        The keyword arguments of :func:`~modelval.evaluation.category_probabilities` (batch size, device, ...).
    """
    import time

    start = time.perf_counter()
    identity = {"version": VERSION, "aggregation": forward.get("aggregation", "mean"),
                "label_map": _label_map_id(forward.get("label_map"))}  # fmt: skip
    stored = _stored_path(cache, evaluation)
    if stored is not None and evaluation.output_cache == "hit":
        found = _read(stored, identity)
        if found is not None:
            return found
    conflicts = np.array([i for i, s in enumerate(stimuli.stimuli) if s.shape != s.texture], dtype=np.int64)
    if not len(conflicts):
        return None
    order = conflicts[np.random.default_rng(SEED).permutation(len(conflicts))]
    declared = _hits(stimuli, order, [evaluation.decisions[i].response for i in order])
    looks = sorted({min(n, len(order)) for n in (*LOOKS, len(order))})
    candidates = alternatives_of(config)
    threshold = ALPHA / (len(looks) * len(candidates))
    results, forwarded = [], 0
    for factor, name, alternative, reverse in candidates:
        hits = np.zeros(0, dtype=bool)
        for size in looks:
            chunk = order[len(hits) : size]
            pixels = stimuli.pixels_of(chunk.tolist())
            answers = _answers(model, pixels.flip(1) if reverse else pixels, alternative, forward)
            hits, forwarded = np.concatenate([hits, _hits(stimuli, chunk, answers)]), forwarded + len(chunk)
            better = int(np.sum(hits & ~declared[:size]))
            worse = int(np.sum(~hits & declared[:size]))
            p = mcnemar_better(better, worse)
            if p < threshold or better <= worse:
                break
        results.append(Alternative(factor, name, size, int(declared[:size].sum()), int(hits.sum()), better, worse,
                                   p, p < threshold))  # fmt: skip
    check = PreprocessingCheck(_declared(config), tuple(results), threshold, forwarded, time.perf_counter() - start)
    if stored is not None:
        _write(stored, identity, check)
    return check


def _label_map_id(label_map: Any) -> object:
    return None if label_map is None else sorted((k, list(v)) for k, v in label_map.indices.items())


def _stored_path(cache: OutputCache | None, evaluation: Evaluation) -> Path | None:
    """Where the check is kept beside the run's stored outputs (``None``: they are not stored)."""
    key = evaluation.provenance.get("output_cache_key")
    if cache is None or not isinstance(key, str) or not cache.contains(key):
        return None
    return cache.entry_dir(key) / STORED


def _read(path: Path, identity: dict[str, Any]) -> PreprocessingCheck | None:
    """The stored check when it is this version's under the same aggregation and label map (else ``None``)."""
    import json

    try:
        record = json.loads(path.read_text())
        if record.get("identity") != json.loads(json.dumps(identity)):
            return None
        fields = {f.name for f in dataclasses.fields(Alternative)}
        alternatives = tuple(Alternative(**{k: v for k, v in a.items() if k in fields}) for a in record["alternatives"])
        return PreprocessingCheck(record["declared"], alternatives, record["threshold"], 0, 0.0, stored=True)
    except (OSError, ValueError, KeyError, TypeError):  # absent, or not a record this code wrote: check again
        return None


def _write(path: Path, identity: dict[str, Any], check: PreprocessingCheck) -> None:
    import contextlib
    import json

    from modelval.atomic import write_text

    with contextlib.suppress(OSError):  # a cache folder that cannot be written only costs the next run's forwards
        write_text(path, json.dumps({"identity": identity, **check.to_dict()}))


def _answers(model: Any, pixels: Any, config: PreprocessConfig, forward: dict[str, Any]) -> list[str]:
    from modelval.behaviour.categories import CATEGORIES
    from modelval.evaluation import category_probabilities

    probabilities = category_probabilities(model, pixels, config, progress=False, **forward)
    return [CATEGORIES[int(c)] for c in probabilities.argmax(axis=1)]


def _hits(stimuli: StimulusSet, positions: Sequence[int] | np.ndarray, answers: Sequence[str]) -> np.ndarray:
    chosen = [stimuli.stimuli[int(i)] for i in positions]
    return np.array([a in (s.shape, s.texture) for s, a in zip(chosen, answers, strict=True)], dtype=bool)


def _declared(config: PreprocessConfig) -> str:
    mean, std = (", ".join(f"{v:g}" for v in values) for values in (config.mean, config.std))
    return f"RGB, [0, 1], {config.normalization_name} mean ({mean}) std ({std})"
