"""The protocol-sensitivity card (``modelval sensitivity``): how much each documented protocol choice moves a
model's shape bias, each varied alone against the reference protocol.

The card's meaning (variants, paired changes, the ranking) is :mod:`modelval.behaviour.sensitivity`; here the
model runs **one forward per distinct input** on stimuli decoded once, the three aggregations sharing the
softmax of their input, and the front door's :func:`sensitivity` loads the model and records the card.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from modelval.api.options import EvaluationOptions, ModelOptions, resolve_options
from modelval.api.recording import protocol_label
from modelval.behaviour.categories import Aggregation, CategoryMapper, LabelMap
from modelval.behaviour.permutation import DEFAULT_PERMUTATIONS, permutation_test
from modelval.behaviour.resampling import resolve_unit
from modelval.behaviour.sensitivity import (
    NOT_DISTINGUISHABLE,
    REFERENCE,
    SensitivityCard,
    Variant,
    VariantResult,
    format_p,
    input_key,
    paired_intervals,
    protocol_variants,
    shape_bias_terms,
)
from modelval.behaviour.shape_bias import compute_shape_bias
from modelval.evaluation import (
    DEFAULT_BATCH_SIZE,
    Model,
    StimulusSet,
    decisions_from_probabilities,
    model_outputs,
    output_key,
    probabilities_from_outputs,
)
from modelval.records.output_cache import OutputCache
from modelval.records.run_store import record_run

if TYPE_CHECKING:
    import torch

    from modelval.behaviour.decisions import Decision
    from modelval.behaviour.shape_bias import ShapeBiasResult
    from modelval.preprocessing import PreprocessConfig
    from modelval.records.run_store import RunStore


def sensitivity_card(
    model: Model,
    source_config: PreprocessConfig,
    stimuli: StimulusSet,
    *,
    model_name: str = "model",
    batch_size: int = DEFAULT_BATCH_SIZE,
    device: str | torch.device = "auto",
    progress: bool = True,
    n_bootstrap: int = 1000,
    seed: int = 0,
    resample: str | None = None,
    permutations: int = DEFAULT_PERMUTATIONS,
    label_map: LabelMap | None = None,
    output_cache: OutputCache | None = None,
) -> SensitivityCard:
    """Run every variant with one forward per distinct input, and give each its paired change.

    Parameters
    ----------
    model
        The classifier.
    source_config
        The model's own preprocessing (the reference protocol's).
    stimuli
        The cue-conflict stimuli.
    model_name
        Its name, stored beside cached outputs.
    batch_size
        Images per forward.
    device
        Where it runs.
    progress
        A progress bar on stderr.
    n_bootstrap
        Paired bootstrap resamples of each change.
    seed
        The bootstrap's and the permutation test's seed.
    resample
        The bootstrap's unit (``None``: texture images).
    permutations
        The paired permutation test's permutations.
    label_map
        A head that is not ImageNet-1k (:class:`~modelval.behaviour.categories.LabelMap`).
    output_cache
        Where outputs are stored: an input whose outputs are stored needs no forward.
    """
    from modelval.runtime import resolve_device

    start = time.perf_counter()
    device = resolve_device(device)  # once: every distinct input runs on it (model_outputs places the model)
    unit = resolve_unit(resample, cue_conflict=True)
    reference, variants = protocol_variants(source_config)
    every = (reference, *variants)
    configs = list(dict.fromkeys(input_key(v.config) for v in every))
    probabilities: dict[PreprocessConfig, dict[Aggregation, np.ndarray]] = {}
    cache_status: dict[str, str] = {}
    for config in configs:
        wanted = tuple(dict.fromkeys(v.aggregation for v in every if input_key(v.config) == config))
        mappers = {aggregation: CategoryMapper(aggregation, label_map) for aggregation in wanted}
        key = output_key(model, config, stimuli, device=device)[0] if output_cache is not None else None
        outputs, status = model_outputs(
            model, stimuli.images, config, batch_size=batch_size, device=device, progress=progress,
            check_width=next(iter(mappers.values())).label_map.check_outputs,
            cache=output_cache if key is not None else None, cache_key=key, cache_meta={"model": model_name},
        )  # fmt: skip
        cache_status[config.describe()] = status if key is not None else "off"
        probabilities[config] = probabilities_from_outputs(outputs, mappers)
    decisions = {
        v.label: decisions_from_probabilities(stimuli.stimuli, probabilities[input_key(v.config)][v.aggregation])
        for v in every
    }
    results = {
        label: compute_shape_bias(found, n_bootstrap=n_bootstrap, seed=seed, resample=unit)
        for label, found in decisions.items()
    }
    terms = {label: shape_bias_terms(found) for label, found in decisions.items()}
    card = SensitivityCard(
        model=model_name,
        reference=VariantResult(reference, results[REFERENCE], 0),
        variants=_variant_rows(reference, variants, decisions, results, terms, permutations, seed),
        forwards=sum(status != "hit" for status in cache_status.values()),
        output_cache=cache_status,
        seconds=0.0,
        resampling=unit,
        n_bootstrap=n_bootstrap,
        permutations=permutations,
        seed=seed,
    )
    names = [d.stimulus_name for d in decisions[REFERENCE] if d.is_conflict]
    paired_intervals(card, terms, names, unit, n_bootstrap=n_bootstrap, seed=seed)
    card.seconds = time.perf_counter() - start
    return card


def _variant_rows(
    reference: Variant,
    variants: Sequence[Variant],
    decisions: Mapping[str, list[Decision]],
    results: Mapping[str, ShapeBiasResult],
    terms: Mapping[str, Any],
    permutations: int,
    seed: int,
) -> list[VariantResult]:
    """Each variant against its baseline: flips, the change, the input it shares, a paired test where it moves."""
    first_with_key: dict[tuple[PreprocessConfig, str], str] = {reference.key: REFERENCE}
    rows = []
    for variant in variants:
        base = variant.baseline
        flips = sum(a.response != b.response for a, b in zip(decisions[base], decisions[variant.label], strict=True))
        same_as = first_with_key.setdefault(variant.key, variant.label)
        row = VariantResult(
            variant,
            results[variant.label],
            flips,
            delta=results[variant.label].shape_bias - results[base].shape_bias,
            same_as=None if same_as == variant.label else same_as,
            baseline_value=results[base].shape_bias,
        )
        if row.is_effect:
            row.test = permutation_test(
                *terms[variant.label], *terms[base], statistic="shape_bias_difference",
                permutations=permutations, seed=seed,
            )  # fmt: skip
        rows.append(row)
    return rows


def format_card(card: SensitivityCard) -> str:
    """The sensitivity card as a table: each factor's variant against the reference protocol.

    Parameters
    ----------
    card
        The card.
    """
    reference = card.reference.result
    lines = [
        f"Protocol sensitivity of {card.model}: reference shape bias {reference.shape_bias:.2%} "
        f"[{reference.ci_low:.2%}, {reference.ci_high:.2%}], cue-conflict accuracy {reference.cue_accuracy:.2%}",
        f"reference protocol: {card.reference.variant.config.describe()}, {card.reference.variant.aggregation}",
        f"Δ = variant - baseline on the same stimuli; 95% CI: paired bootstrap over {card.resampling} "
        f"({card.n_bootstrap} resamples); p: paired permutation test ({card.permutations} permutations, "
        f"seed {card.seed})",
        "",
        f"{'factor':<14} {'value':<32} {'shape bias':>10} {'Δ (pp)':>8} {'95% CI of Δ':>18} {'p':>8} "
        f"{'cue acc':>8} {'flips':>6}",
    ]
    same = []
    for row in card.variants:
        if not row.is_effect:
            same.append(
                f"{row.variant.label} (= {row.same_as})" + (f" [{row.variant.note}]" if row.variant.note else "")
            )
            continue
        low, high = row.delta_ci95
        base = "" if row.variant.baseline == REFERENCE else f"  (vs {row.variant.baseline})"
        lines.append(
            f"{row.variant.factor:<14} {row.variant.value:<32} {row.result.shape_bias:>10.2%} "
            f"{_signed(row.delta):>8} [{_signed(low):>6}, {_signed(high):>6}] {format_p(row.p):>8} "
            f"{row.result.cue_accuracy:>8.2%} {row.flips:>6}{base}"
        )
    if same:
        lines += ["", "equal to an earlier row (same input and aggregation; not effects):"]
        lines += [f"  {item}" for item in same]
    lines += ["", "factors by effect (largest |Δ| of their values):"]
    for i, effect in enumerate(card.effects(), start=1):
        lines.append(f"  {i}. {effect.factor}: {effect.size * 100:.2f} pp")
    for separation in card.separations:
        low, high = separation.ci95
        verdict = "separated" if separation.distinguishable else NOT_DISTINGUISHABLE
        lines.append(
            f"  {separation.first} vs {separation.second}: difference {_signed(separation.difference)} pp, "
            f"95% CI [{_signed(low)}, {_signed(high)}]: {verdict}"
        )
    lines.append(f"\nranking: {card.ranking_text()}")
    lines.append(f"the factor that moves the number most: {card.top_factor}")
    lines.append(f"{card.forwards} forward passes (distinct inputs) in {card.seconds:.1f} s")
    return "\n".join(lines)


def _signed(fraction: float) -> str:
    """A change in percentage points, signed, without a unit: ``+3.26``; ``0.00`` (never ``-0.00``)."""
    from modelval.judgement.rows import signed_pp

    return signed_pp(fraction).removesuffix(" pp")



def sensitivity(
    model: Any,
    *,
    preprocess: PreprocessConfig | None = None,
    options: EvaluationOptions | None = None,
    model_options: ModelOptions | None = None,
    run_store: RunStore | None = None,
    **settings: Any,
) -> SensitivityCard:
    """The protocol-sensitivity card of a model (``modelval sensitivity``): each protocol choice varied alone.

    Each variant (resize, interpolation, normalization, aggregation) against the reference protocol (the
    model's own normalization, no resize, mean aggregation): its paired change of the shape bias on the same
    stimuli, Δ = variant − baseline, with a paired bootstrap 95% interval of Δ (texture images resampled) and a
    paired permutation p-value; variants with the same input are evaluated once (one forward per distinct
    input), and factors are ranked only where the data separate them.

    Parameters
    ----------
    model
        A registry name or spec, or an ``nn.Module`` with ``preprocess``.
    preprocess
        The preprocessing of an ``nn.Module`` (see :func:`shape_bias`).
    options
        The stimuli and statistics: ``bootstrap``, ``seed``, ``resample``, ``permutations``
        (:class:`~modelval.EvaluationOptions`).
    model_options
        How the model is loaded and where it runs (:class:`~modelval.ModelOptions`).
    run_store
        Record the card there; ``None`` records nothing.
    **settings
        Single fields of ``options`` or ``model_options``.

    Returns
    -------
    SensitivityCard
        ``.reference``, ``.variants`` (each with Δ, its interval and p), ``.ranking_text()``, ``.top_factor``;
        ``.to_dict()`` is ``modelval sensitivity --json``.

    Examples
    --------
    Here on ``SUBSET`` (two stimuli per category, so quick; the card of the published 1280 is in
    docs/sensitivity.md), without intervals:

    >>> import modelval
    >>> card = modelval.sensitivity("efficientnet_lite0", data_root=SUBSET, allow_modified_stimuli=True,
    ...                             bootstrap=0, permutations=0)
    >>> factors = [row.variant.factor for row in card.variants]
    >>> card.forwards, factors[:4]
    (4, ['resize', 'resize', 'resize', 'interpolation'])
    >>> round(card.reference.result.shape_bias, 4)
    0.1667
    """
    from modelval.api.pipeline import open_output_cache, prepared
    from modelval.records.digests import state_dict_digest
    from modelval.records.provenance import device_record, environment

    options, model_options = resolve_options(options, model_options, settings)
    # The card varies the protocol itself: the model loads under its own normalization, through the one prologue.
    options = dataclasses.replace(options, normalization="model")
    with prepared(model, preprocess, options, model_options) as ready:
        loaded, label, stimuli, device, label_map, threads = ready
        card = sensitivity_card(
            loaded.model,
            loaded.config.preprocess,
            stimuli,
            model_name=label,
            batch_size=options.batch_size,
            device=device,
            progress=options.progress,
            n_bootstrap=options.bootstrap,
            seed=options.seed,
            resample=options.resample,
            permutations=options.permutations,
            label_map=label_map,
            output_cache=open_output_cache(options.cache),
        )
        card.provenance = {
            **environment(),
            "model": {"spec": label, "source": loaded.entry.source, "checkpoint": loaded.config.checkpoint},
            "weights_sha256": state_dict_digest(loaded.model),
            "stimuli": stimuli.provenance(),
            "device": device_record(device),
            "threads": threads,
            "bootstrap": {"resamples": options.bootstrap, "seed": options.seed, "unit": card.resampling},
        }
    payload = card.to_dict()
    summary = {"reference": payload["reference"]["shape_bias"], "top_factor": payload["top_factor"],
               **{f"delta {row['factor']}={row['value']}": row["delta"] for row in payload["variants"]}}  # fmt: skip
    protocol = protocol_label(options)
    record_run(run_store, "sensitivity", model=label, dataset=options.dataset, summary=summary,
               provenance=card.provenance, label=protocol)
    return card

