"""The verdict of one validation case: a measured shape bias against what was published, recorded or expected.

Each function takes what was measured (an :class:`~modelval.evaluation.Evaluation`) and what it is held
against, and returns a :class:`Judgement`: passed or not, the verdict of the table, and the message a failing
case prints (with the diagnosis: calculation, preprocessing or model source). The validation runner
(:mod:`modelval.runner.matrix`) decides which applies to a case, after the sanity gate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.decisions import by_stimulus, read_decisions
from modelval.judgement.diagnosis import check_calculation, check_preprocessing, check_sources, diagnose
from modelval.judgement.expected import ExpectedShapeBias
from modelval.judgement.rows import ReportRow, format_per_category

if TYPE_CHECKING:
    from modelval.evaluation import Evaluation
    from modelval.preprocessing import PreprocessConfig

#: Decisions allowed to flip against a committed baseline. Float differences between CPUs/BLAS builds
#: can flip a near-tie or two; a preprocessing change flips hundreds (ImageNet instead of 0.5/0.5
#: normalization flips 405 for the bundled model).
MAX_BASELINE_FLIPS = 3
#: A "wrong" normalization must flip at least this many decisions to count as detected.
MIN_FLIPS_DETECTED = 1


@dataclass
class Judgement:
    """A case's verdict: ``passed``, the table's ``verdict`` and the ``message`` a failure prints."""

    passed: bool
    verdict: str
    message: str
    #: The report row of the case (a model that could not be loaded or run has an ``ERROR`` row).
    row: ReportRow | None = None


def against_published(
    model: str,
    display_name: str,
    source: str,
    evaluation: Evaluation,
    expected: ExpectedShapeBias,
    *,
    reference: PreprocessConfig,
    reference_csv: Path | None,
    other_sources: Mapping[str, float],
    source_equivalence: Callable[[], tuple[bool, str]] | None = None,
) -> Judgement:
    """Within the published value's tolerance, else FAIL with the diagnosis (``reference``: the model's own
    preprocessing; ``other_sources``: the same weights' shape bias from other sources, already measured)."""
    assert expected.value is not None and expected.tolerance is not None
    measured = evaluation.result.shape_bias
    difference = measured - expected.value
    if abs(difference) <= expected.tolerance:
        return Judgement(True, "PASS", "")
    checks = [
        check_calculation(reference_csv),
        check_preprocessing(evaluation.config, reference),
        check_sources(
            model, measured, dict(other_sources), tolerance=expected.tolerance, equivalence=source_equivalence
        ),
    ]
    message = (
        f"{display_name} from {source}: shape bias {measured * 100:.2f}% vs expected "
        f"{expected.value * 100:.2f}% +- {expected.tolerance * 100:.1f} pp ({expected.source}); "
        f"difference {difference * 100:+.2f} pp\n{diagnose(checks)}\n\n{format_per_category(evaluation.result)}"
    )
    return Judgement(False, "FAIL", message)


def against_expected(
    label: str, spec: str, evaluation: Evaluation, expected: float, tolerance: float, source: str
) -> Judgement:
    """A models file's own expected value (``expected`` +- ``tolerance``, cited as ``source``)."""
    measured = evaluation.result.shape_bias
    difference = measured - expected
    if abs(difference) <= tolerance:
        return Judgement(True, "PASS", "")
    return Judgement(
        False,
        "FAIL",
        f"{label} ({spec}): shape bias {measured * 100:.2f}% vs expected {expected * 100:.2f}% +- "
        f"{tolerance * 100:.1f} pp ({source}); difference {difference * 100:+.2f} pp\n"
        f"preprocessing: {evaluation.config.describe()}\n\n{format_per_category(evaluation.result)}",
    )


def against_baseline(evaluation: Evaluation, baseline_csv: Path, reference: PreprocessConfig) -> Judgement:
    """At most :data:`MAX_BASELINE_FLIPS` decisions flipped against committed per-image decisions."""
    baseline = by_stimulus(read_decisions(baseline_csv))
    current = by_stimulus(evaluation.decisions)
    if current.keys() != baseline.keys():
        return Judgement(False, "FAIL", f"{baseline_csv} covers other stimuli than this evaluation")
    flips = sorted(n for n in current if current[n].response != baseline[n].response)
    verdict = f"BASELINE ({len(flips)} flips)"
    if len(flips) <= MAX_BASELINE_FLIPS:
        return Judgement(True, verdict, "")
    listing = "\n".join(f"  {n}: {baseline[n].response} -> {current[n].response}" for n in flips[:30])
    return Judgement(
        False,
        verdict,
        f"{len(flips)} decisions flipped against {baseline_csv} (allowed {MAX_BASELINE_FLIPS}):\n{listing}\n"
        + diagnose([check_preprocessing(evaluation.config, reference)]),
    )


def wrong_normalization(
    model: str, source: str, normalization: str, correct: Evaluation, evaluation: Evaluation
) -> Judgement:
    """The change a wrong ``normalization`` makes must be *detected* (decisions differ from ``correct``'s);
    the shape-bias and cue-conflict-accuracy deltas are reported, no invented target."""
    from modelval.evaluation.flips import decision_flips

    flips = decision_flips(correct.decisions, evaluation.decisions, warn_rate=None).count
    d_bias = evaluation.result.shape_bias - correct.result.shape_bias
    d_acc = evaluation.result.cue_accuracy - correct.result.cue_accuracy
    summary = f"{flips} flips, shape bias {d_bias * 100:+.2f} pp, cue acc. {d_acc * 100:+.2f} pp"
    if source == "huggingface" and normalization == "half":
        # The non-distilled facebook/deit-* checkpoints ship exactly this (mean/std 0.5): a finding.
        summary = f"{summary}; = the checkpoint's shipped preprocessor config"
    if flips >= MIN_FLIPS_DETECTED:
        return Judgement(True, f"DETECTED ({summary})", summary)
    return Judgement(
        False,
        "NOT DETECTED",
        f"{model}: {normalization} normalization gave the same decisions as the model's own; "
        "is the normalization applied at all?",
    )


def finding(model: str, evaluation: Evaluation) -> Judgement:
    """Nothing published: recorded as a finding, unless the accuracy is near 16-way chance."""
    result = evaluation.result
    chance = 1 / len(CATEGORIES)
    if math.isnan(result.cue_accuracy) or result.cue_accuracy < 3 * chance:
        return Judgement(
            False,
            "FAIL",
            f"{model}: cue-conflict accuracy {result.cue_accuracy:.3f} is near 16-way chance "
            f"({chance:.3f}); the model or its weights are not a working ImageNet classifier",
        )
    return Judgement(True, "FINDING (no published value)", "")
