"""The protocol-sensitivity card: how much each documented protocol choice moves a model's shape bias.

"Why does my number differ from the paper's?" Each factor is varied alone against the reference
protocol (the model's own normalization, no resize, the model's own interpolation, mean aggregation).
For every variant the card reports the **paired change** of the shape bias, Δ = variant − baseline, on
the same stimuli, with

- a paired bootstrap 95% interval of Δ (one set of resample weights for both protocols; texture images
  resampled by default, :mod:`modelval.behaviour.resampling`), and
- a paired permutation p-value of Δ (:mod:`modelval.behaviour.permutation`: the two protocols' answers
  swapped per stimulus, a stated number of permutations and seed).

The baseline of a variant is the reference, except for **interpolation**: without a resize the
stimuli are fed as they are and interpolation cannot act, so the card varies it *under each resize
variant* (resize 256 / crop 224 with bilinear against the same with the model's own interpolation).
Variants whose input and aggregation equal the reference's (or an earlier row's) are **marked**
(``same_as``), not listed as effects of size 0.

Factors are ranked by their largest |Δ|, and a factor is put above the next only where the data
separate them: the paired bootstrap interval of the difference of the two effects (each signed in its
own direction) must exclude 0; otherwise the card says "not distinguishable".

The card is computed by :func:`modelval.api.protocol.sensitivity_card` (one forward per distinct input);
this module is what it means: the variants, their paired changes and the ranking.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, cast

import numpy as np

from modelval import jsonio
from modelval.behaviour.categories import AGGREGATIONS, Aggregation
from modelval.behaviour.decisions import Decision
from modelval.behaviour.permutation import DEFAULT_PERMUTATIONS, PermutationTest
from modelval.behaviour.resampling import (
    RESAMPLING_DESCRIPTIONS,
    bootstrap_weights,
    percentile_interval,
    resampling_for,
    weighted_ratio,
)
from modelval.behaviour.shape_bias import ShapeBiasResult
from modelval.preprocessing import NORMALIZATION_CHOICES, STANDARD_CROP, STANDARD_RESIZE, PreprocessConfig

FACTORS = ("resize", "interpolation", "normalization", "aggregation")
#: The published stimuli are square images of this size: fed at it, they are not resampled at all.
STIMULUS_SIZE = 224
REFERENCE = "reference"
NOT_DISTINGUISHABLE = "not distinguishable"


@dataclass(frozen=True)
class Variant:
    """One protocol choice: ``factor`` set to ``value``, compared with the row named ``baseline``."""

    factor: str
    value: str
    config: PreprocessConfig
    aggregation: Aggregation
    note: str = ""
    baseline: str = REFERENCE

    @property
    def label(self) -> str:
        return REFERENCE if self.factor == REFERENCE else f"{self.factor}: {self.value}"

    @property
    def key(self) -> tuple[PreprocessConfig, str]:
        """What determines the decisions: the model input and the aggregation."""
        return input_key(self.config), self.aggregation


@dataclass
class VariantResult:
    """A variant's shape bias and its paired change against its baseline."""

    variant: Variant
    result: ShapeBiasResult
    flips: int  # decisions that differ from the baseline's
    delta: float = 0.0
    delta_ci95: tuple[float, float] = (math.nan, math.nan)
    test: PermutationTest | None = None
    same_as: str | None = None  # the label of an earlier row with the same input and aggregation
    baseline_value: float = math.nan

    @property
    def is_effect(self) -> bool:
        return self.same_as is None

    @property
    def p(self) -> float:
        return self.test.p if self.test is not None else math.nan

    def to_dict(self) -> dict[str, Any]:
        same = jsonio.Undefined(f"same input and aggregation as {self.same_as}: not an effect")
        return {
            "factor": self.variant.factor,
            "value": self.variant.value,
            "baseline": self.variant.baseline,
            "same_as": self.same_as,
            "shape_bias": self.result.shape_bias,
            "ci95": [self.result.ci_low, self.result.ci_high],
            "delta": self.delta,
            "delta_ci95": list(self.delta_ci95) if self.is_effect else same,
            "p": self.p if self.is_effect else same,
            "cue_accuracy": self.result.cue_accuracy,
            "flips": self.flips,
            "preprocessing": self.variant.config.describe(),
            "note": self.variant.note,
        }


@dataclass(frozen=True)
class FactorEffect:
    """A factor's effect: its variant with the largest |Δ|."""

    factor: str
    row: VariantResult | None  # None: no variant of the factor changes the input

    @property
    def size(self) -> float:
        return abs(self.row.delta) if self.row is not None else 0.0


@dataclass(frozen=True)
class Separation:
    """Are two factors' effects told apart by the data? The difference of their signed effects, with its CI."""

    first: str
    second: str
    difference: float
    ci95: tuple[float, float]

    @property
    def distinguishable(self) -> bool:
        low, high = self.ci95
        return bool(low > 0 or high < 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "factors": [self.first, self.second],
            "difference": self.difference,
            "ci95": list(self.ci95),
            "distinguishable": self.distinguishable,
        }


@dataclass
class SensitivityCard:
    model: str
    reference: VariantResult
    variants: list[VariantResult]
    forwards: int
    seconds: float
    timings: dict[str, float] = field(default_factory=dict)
    separations: list[Separation] = field(default_factory=list)
    resampling: str = "texture"
    n_bootstrap: int = 1000
    permutations: int = DEFAULT_PERMUTATIONS
    seed: int = 0
    #: Each distinct input (preprocessing) and whether its outputs came from the output cache.
    output_cache: dict[str, str] = field(default_factory=dict)
    #: What produced the card (filled by the front door; docs/provenance.md).
    provenance: dict[str, Any] = field(default_factory=dict)

    def effects(self) -> list[FactorEffect]:
        """Each factor's largest paired change, largest first (ties: the order of FACTORS)."""
        best: dict[str, VariantResult | None] = dict.fromkeys(FACTORS)
        for row in self.variants:
            current = best[row.variant.factor]
            if row.is_effect and (current is None or abs(row.delta) > abs(current.delta)):
                best[row.variant.factor] = row
        effects = [FactorEffect(name, row) for name, row in best.items()]
        return sorted(effects, key=lambda e: (-e.size, FACTORS.index(e.factor)))

    def ranking(self) -> list[tuple[str, float]]:
        """Factors by the largest |change of shape bias| any of their values causes, largest first."""
        return [(effect.factor, effect.size) for effect in self.effects()]

    @property
    def top_factor(self) -> str:
        """The factor that moves the number most; "none" when nothing moves it, and "not distinguishable"
        when the data do not separate the first factor from the second."""
        effects = self.effects()
        if effects[0].size == 0:
            return "none"
        if self.separations and not self.separations[0].distinguishable:
            return NOT_DISTINGUISHABLE
        return effects[0].factor

    def ranking_text(self) -> str:
        """``interpolation ≈ aggregation > resize``: '>' only where the data separate the two factors."""
        effects = [e for e in self.effects() if e.size > 0]
        if not effects:
            return "no factor changes the decisions"
        parts = [effects[0].factor]
        for separation, effect in zip(self.separations, effects[1:], strict=False):
            parts.append(">" if separation.distinguishable else "≈")
            parts.append(effect.factor)
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        reference = self.reference.result
        top = self.top_factor
        return {
            "model": self.model,
            "reference": {
                "protocol": self.reference.variant.config.describe() + f", {self.reference.variant.aggregation}",
                "shape_bias": reference.shape_bias,
                "ci95": [reference.ci_low, reference.ci_high],
                "ci95_resampling": reference.ci_resampling,
                "cue_accuracy": reference.cue_accuracy,
                "shape_hits": reference.shape_hits,
                "texture_hits": reference.texture_hits,
            },
            "delta": "variant - baseline, on the same stimuli (paired); baseline: the reference, or for "
            "interpolation the resize variant with the model's own interpolation",
            "delta_ci95_method": f"paired percentile bootstrap, {self.n_bootstrap} resamples, seed {self.seed}: "
            f"{RESAMPLING_DESCRIPTIONS[self.resampling]}",
            "ci95_resampling": self.resampling,
            "test": {
                "statistic": "shape_bias_difference",
                "method": "paired permutation",
                "permutations": self.permutations,
                "seed": self.seed,
            },
            "variants": [row.to_dict() for row in self.variants],
            "ranking": [
                {
                    "factor": effect.factor,
                    "max_abs_delta": effect.size,
                    "variant": effect.row.variant.label if effect.row else None,
                    "delta_ci95": list(effect.row.delta_ci95) if effect.row else None,
                    "p": effect.row.p if effect.row else None,
                }
                for effect in self.effects()
            ],
            "separations": [s.to_dict() for s in self.separations],
            "ranking_text": self.ranking_text(),
            "top_factor": top,
            "forwards": self.forwards,
            "output_cache": self.output_cache,
            "seconds": self.seconds,
            "provenance": self.provenance,
        }


def protocol_variants(source: PreprocessConfig, aggregation: Aggregation = "mean") -> tuple[Variant, list[Variant]]:
    """The reference protocol and one variant per (factor, value), built from the model's own config.

    Parameters
    ----------
    source
        The model's own preprocessing config.
    aggregation
        ``"mean"`` or ``"sum"`` of the ImageNet scores of each category.
    """
    reference_config = source.for_stimuli("none")
    reference = Variant(REFERENCE, REFERENCE, reference_config, aggregation)
    own = reference_config.interpolation
    variants: list[Variant] = [Variant("resize", "none", reference_config, aggregation, "the official protocol")]
    resizes = [("256-crop-224", dataclasses.replace(reference_config, resize=STANDARD_RESIZE, crop=STANDARD_CROP))]
    if source.resize is not None or source.crop is not None:
        transform = dataclasses.replace(reference_config, resize=source.resize, crop=source.crop)
        resizes.append((f"source-{source.resize}-crop-{source.crop}", transform))
    for value, config in resizes:
        note = "the source's own eval transform (crop_pct)" if value.startswith("source") else ""
        variants.append(Variant("resize", value, config, aggregation, note))
    for interpolation in ("bilinear", "bicubic"):
        config = dataclasses.replace(reference_config, interpolation=interpolation)
        note = "" if _interpolation_acts(reference_config) else "no resize in the reference: interpolation cannot act"
        variants.append(Variant("interpolation", interpolation, config, aggregation, note))
    # Where interpolation can act: under each resize, the other interpolation against the model's own.
    seen = {input_key(reference_config)}
    for value, config in resizes:
        if input_key(config) in seen:
            continue
        seen.add(input_key(config))
        for interpolation in ("bilinear", "bicubic"):
            if interpolation != own:
                variants.append(
                    Variant(
                        "interpolation",
                        f"{interpolation} (resize {value})",
                        dataclasses.replace(config, interpolation=interpolation),
                        aggregation,
                        f"against resize {value} with the model's own {own}",
                        baseline=f"resize: {value}",
                    )
                )
    for normalization in NORMALIZATION_CHOICES:
        variants.append(
            Variant("normalization", normalization, reference_config.with_normalization(normalization), aggregation)
        )
    for other in AGGREGATIONS:
        variants.append(Variant("aggregation", other, reference_config, cast(Aggregation, other)))
    return reference, variants


def _interpolation_acts(config: PreprocessConfig) -> bool:
    """Whether the images are resampled at all (a resize, a crop, or an input size other than the stimuli's)."""
    return not (config.resize is None and config.crop is None and config.input_size in (None, STIMULUS_SIZE))


def input_key(config: PreprocessConfig) -> PreprocessConfig:
    """The config that determines the model input: where nothing is resampled, interpolation never acts.

    Parameters
    ----------
    config
        A preprocessing config.
    """
    if not _interpolation_acts(config):
        return dataclasses.replace(config, interpolation="bilinear")
    return config


def shape_bias_terms(decisions: Sequence[Decision]) -> tuple[np.ndarray, np.ndarray]:
    """Per conflict stimulus: (shape hit, shape or texture hit), the terms of the shape bias.

    Parameters
    ----------
    decisions
        The decisions.
    """
    conflicts = [d for d in decisions if d.is_conflict]
    shape = np.array([d.response == d.shape for d in conflicts], dtype=np.float64)
    texture = np.array([d.response == d.texture for d in conflicts], dtype=np.float64)
    return shape, shape + texture


def paired_intervals(
    card: SensitivityCard,
    terms: dict[str, tuple[np.ndarray, np.ndarray]],
    names: Sequence[str],
    unit: str,
    *,
    n_bootstrap: int,
    seed: int,
) -> None:
    """Each effect's Δ interval, and the separations of the ranked factors, from one set of resamples.

    Parameters
    ----------
    card
        The sensitivity card.
    terms
        Variant -> its :func:`shape_bias_terms`.
    names
        The stimuli's file names.
    unit
        The bootstrap's unit, or ``None``.
    n_bootstrap
        Bootstrap resamples (0: no interval).
    seed
        Seed of the resamples.
    """
    effective = [row for row in card.variants if row.is_effect]
    if not effective or n_bootstrap <= 0 or not names:
        return
    labels = {row.variant.label for row in effective} | {row.variant.baseline for row in effective}
    replicates: dict[str, list[np.ndarray]] = {label: [] for label in labels}
    for weights in bootstrap_weights(len(names), resampling_for(names, unit), n_bootstrap=n_bootstrap, seed=seed):
        for label in labels:
            replicates[label].append(weighted_ratio(weights, *terms[label]))
    values = {label: np.concatenate(chunks) for label, chunks in replicates.items()}
    deltas = {row.variant.label: values[row.variant.label] - values[row.variant.baseline] for row in effective}
    for row in effective:
        row.delta_ci95 = percentile_interval(deltas[row.variant.label])
    # Adjacent factors in the ranking: is the larger effect really larger? Each effect signed in its own
    # direction, so a small effect is not folded at 0 (|Δ*| would bias it upwards).
    ranked = [effect for effect in card.effects() if effect.row is not None]
    for first, second in pairwise(ranked):
        assert first.row is not None and second.row is not None
        signed = [np.sign(e.row.delta) * deltas[e.row.variant.label] for e in (first, second) if e.row is not None]
        card.separations.append(
            Separation(
                first.factor, second.factor, first.size - second.size, percentile_interval(signed[0] - signed[1])
            )
        )


def format_p(value: float) -> str:
    """A p-value in two significant digits (``n/a`` for NaN).

    Parameters
    ----------
    value
        The p-value.
    """
    if math.isnan(value):
        return "n/a"
    return f"{value:.2g}" if value >= 0.001 else f"{value:.1e}"


def forwards_needed(variants: Sequence[Variant]) -> int:
    """Distinct inputs among ``variants`` (what :func:`sensitivity_card` runs).

    Parameters
    ----------
    variants
        The variants.
    """
    return len({input_key(v.config) for v in variants})
