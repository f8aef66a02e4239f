"""The one judge: a measured shape bias against what was published, recorded or expected.

:func:`judge` takes what one case measured and what it is held against (a :class:`Case`) and returns a
:class:`~modelval.judgement.verdict.Verdict`: the sanity gate first, then the preprocessing self-check (an
alternative that answers better than the declared preprocessing), then a wrong or forced normalization's
change (which must not answer better than the model's own), then a models-file expectation, a published value
(with the diagnosis: calculation, preprocessing or model source), a baseline of per-image decisions, else a
finding. ``modelval shape-bias``, ``modelval validate``, the pytest plugin and the nightly all judge through it;
their outputs carry the verdict as fields.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.decisions import read_decisions
from modelval.judgement.diagnosis import check_calculation, check_preprocessing, check_sources, diagnose, implicated
from modelval.judgement.expected import ExpectedShapeBias
from modelval.judgement.rows import format_per_category
from modelval.judgement.sanity import VERDICT as SANITY_VERDICT
from modelval.judgement.sanity import Sanity
from modelval.judgement.verdict import Verdict, flips_between

if TYPE_CHECKING:
    from modelval.behaviour.decisions import Decision
    from modelval.behaviour.shape_bias import ShapeBiasResult
    from modelval.judgement.committed import CommittedBaseline
    from modelval.judgement.preprocessing_check import PreprocessingCheck
    from modelval.preprocessing import PreprocessConfig

#: Decisions allowed to flip against a committed baseline. Float differences between CPUs/BLAS builds
#: can flip a near-tie or two; a preprocessing change flips hundreds (ImageNet instead of 0.5/0.5
#: normalization flips 405 for the bundled model).
MAX_BASELINE_FLIPS = 3
#: A "wrong" normalization must flip at least this many decisions to count as detected.
MIN_FLIPS_DETECTED = 1
#: What a run measured: its shape-bias result and its per-image decisions.
Measured = tuple["ShapeBiasResult", Sequence["Decision"]]


@dataclass
class Case:
    """What one case measured and what it is held against: the judge's input.

    ``role`` is ``model`` (the model's own normalization, or a ``shape-bias`` run), ``wrong`` (the other common
    normalization: its change must be detected) or ``forced`` (a normalization a models file forces: a finding).
    """

    name: str
    result: ShapeBiasResult
    decisions: Sequence[Decision]
    expected: ExpectedShapeBias | None = None
    #: The sanity gate's verdict; ``None``: not gated (``--no-sanity-gate``).
    sanity: Sanity | None = None
    role: str = "model"
    normalization: str = "model"
    source: str = ""
    #: The preprocessing used and the model's own (``None`` for a decision file).
    config: PreprocessConfig | None = None
    reference: PreprocessConfig | None = None
    #: The model's own normalization's run (the wrong and forced cases are held against it; a callable is asked
    #: only when the gate lets the case through) and its gate.
    correct: Measured | Callable[[], Measured] | None = None
    own_sanity: Sanity | None = None
    #: A models-file entry: held against its own expectation, not against the published values.
    user: bool = False
    #: Per-image decisions to hold the run against: a models file's baseline, or the registry's committed one.
    baseline: Path | CommittedBaseline | None = None
    reference_csv: Path | None = None
    other_sources: Mapping[str, float] = field(default_factory=dict)
    source_equivalence: Callable[[], tuple[bool, str]] | None = None
    #: The declared preprocessing against its near alternatives (``None``: not checked).
    preprocessing: PreprocessingCheck | None = None


def judge(case: Case) -> Verdict:
    """The verdict of ``case`` (see the module docstring for the order).

    Parameters
    ----------
    case
        What was measured and what it is held against.
    """
    gated = _gate(case)
    if gated is not None:
        return gated
    suspect = case.preprocessing.suspect if case.preprocessing is not None else None
    if suspect is not None:
        message = f"{case.name}: {case.preprocessing.headline()}"  # type: ignore[union-attr]
        return Verdict("suspect", False, f"SUSPECT PREPROCESSING ({suspect.factor})", reason=suspect.describe(),
                       message=message)  # fmt: skip
    expected = case.expected
    if case.role in ("wrong", "forced"):
        return _wrong_normalization(case)
    if case.user and expected is not None and expected.value is not None and expected.tolerance is not None:
        return against_expectation(case)
    if not case.user and expected is not None and expected.value is not None:
        return against_published(case)
    if case.baseline is not None:
        return against_baseline(case)
    if case.user and expected is not None:
        return Verdict("finding", True, expected.named("FINDING (no expected value)"), expectation=expected.entry)
    return finding(case)


def _gate(case: Case) -> Verdict | None:
    """The sanity gate: a model that is not a working classifier gets no verdict on its number."""
    sanity, own = case.sanity, case.own_sanity
    if sanity is None:
        return None
    if case.role == "model" or own is None:
        if sanity.passed:
            return None
        message = f"{case.name}: {sanity.message()}"
        return Verdict("withheld", False, SANITY_VERDICT, reason=sanity.headline(), message=message)
    if not own.passed:  # not a working classifier under its own normalization: no case of it means anything
        return Verdict("withheld", False, f"{SANITY_VERDICT} (under its own normalization)", reason=own.headline(),
                       message=f"{case.name}: {own.message()}",
                       withholds=f"{SANITY_VERDICT} under its own normalization")  # fmt: skip
    if sanity.passed:
        return None
    # A working model that this normalization breaks: what a wrong case exists to detect.
    measured = (
        f"cue-conflict accuracy {sanity.early.sample_accuracy:.1%} on a random sample"
        if sanity.early is not None
        else f"cue-conflict accuracy {sanity.cue_accuracy:.1%}"
    )
    summary = f"it breaks the model: {measured}, below the {sanity.threshold:.0%} gate"
    word, status = ("DETECTED", "detected") if case.role == "wrong" else ("FINDING", "finding")
    return Verdict(status, True, f"{word} ({summary})", reason=summary, message=summary,
                   withholds=f"{SANITY_VERDICT} under this normalization ({measured})")  # fmt: skip


def against_published(case: Case) -> Verdict:
    """Within the published value's tolerance, else FAIL with the diagnosis (the model's own preprocessing against
    the one used, the calculation on the published ResNet-50 decisions, the same weights from other sources).

    An expectation keyed by device and dtype is the entry of the run's own setting, and the verdict names it
    (``PASS [cuda/bf16]``).

    Parameters
    ----------
    case
        The case; ``case.expected`` holds a published value.
    """
    expected = case.expected
    assert expected is not None and expected.value is not None and expected.tolerance is not None
    measured = case.result.shape_bias
    difference = measured - expected.value
    if math.isnan(measured):
        return Verdict("n/a", True, "n/a", reason="no shape or texture hits: the shape bias is 0/0")
    if abs(difference) <= expected.tolerance:
        return Verdict("pass", True, expected.named("PASS"), expectation=expected.entry)
    checks = [check_calculation(case.reference_csv)]
    if case.config is not None and case.reference is not None:
        checks.append(check_preprocessing(case.config, case.reference))
    checks.append(check_sources(case.name, measured, dict(case.other_sources), tolerance=expected.tolerance,
                                equivalence=case.source_equivalence))  # fmt: skip
    head = _missed(measured, expected)
    source = f" from {case.source}" if case.source else ""
    message = f"{case.name}{source}: {head}\n{diagnose(checks)}\n\n{format_per_category(case.result)}"
    return Verdict("fail", False, expected.named("FAIL"), reason=f"{head}; {implicated(checks)}", message=message,
                   expectation=expected.entry, diagnosis=tuple(checks))  # fmt: skip


def against_expectation(case: Case) -> Verdict:
    """A models file's expectation, resolved for the run's device and dtype; the verdict names the keyed entry.

    Parameters
    ----------
    case
        The case; ``case.expected`` is the entry's expectation, with a value.
    """
    expected = case.expected
    assert expected is not None and expected.value is not None and expected.tolerance is not None
    measured = case.result.shape_bias
    difference = measured - expected.value
    if abs(difference) <= expected.tolerance:
        return Verdict("pass", True, expected.named("PASS"), expectation=expected.entry)
    head = _missed(measured, expected)
    used = f"\npreprocessing: {case.config.describe()}" if case.config is not None else ""
    # The preprocessing used against the model's own: the one stage a models-file entry can get wrong unseen.
    checks = [check_preprocessing(case.config, case.reference)] if case.config and case.reference else []
    found = f"\n{diagnose(checks)}" if checks else ""
    message = f"{case.name}: {head}{used}{found}\n\n{format_per_category(case.result)}"
    reason = f"{head}; {implicated(checks)}" if checks else head
    return Verdict("fail", False, expected.named("FAIL"), reason=reason, message=message,
                   expectation=expected.entry, diagnosis=tuple(checks))  # fmt: skip


def _missed(measured: float, expected: ExpectedShapeBias) -> str:
    """``shape bias 25.10% vs expected 21.39% +- 1.5 pp (source); difference +3.71 pp``."""
    return (f"shape bias {measured * 100:.2f}% vs {expected.describe()} ({expected.source}); difference "
            f"{(measured - expected.value) * 100:+.2f} pp")  # type: ignore[operator]  # fmt: skip


def against_baseline(case: Case) -> Verdict:
    """At most :data:`MAX_BASELINE_FLIPS` decisions flipped against per-image decisions recorded earlier (the fp32
    CPU reference); with the expectation stating a flip budget for the run's device and dtype, at most that many,
    and the verdict names the budget and its entry (``BASELINE (9 flips, budget 32 [*/bf16])``). A committed
    baseline made under another protocol or on other stimuli is not compared (``n/a``, saying why).

    Parameters
    ----------
    case
        The case; ``case.baseline`` is a decision CSV, or the registry's committed baseline beside the run.
    """
    from modelval.judgement.committed import CommittedBaseline

    baseline = case.baseline
    committed = baseline if isinstance(baseline, CommittedBaseline) else None
    if committed is not None and not committed.applies:
        return Verdict("n/a", True, "n/a", reason=committed.describe())
    path = Path(committed.csv if committed is not None else baseline)  # type: ignore[arg-type]
    recorded = read_decisions(path)
    if {d.imagename for d in recorded} != {d.imagename for d in case.decisions}:
        reason = f"{path} covers other stimuli than this evaluation"
        return Verdict("fail", False, "FAIL", reason=reason, message=reason)
    expected = case.expected
    allowed, entry, budget = (committed.max_flips if committed is not None else MAX_BASELINE_FLIPS), None, ""
    if committed is None and expected is not None and expected.flip_budget is not None:
        # The model's flip budget for this device and dtype, named with its entry (``budget 32 [*/bf16]``).
        allowed, entry = expected.flip_budget, expected.entry
        budget = f", {expected.named(f'budget {allowed}')}"
    flips = flips_between(recorded, case.decisions, allowed=allowed, budget_entry=entry)
    if flips.within:
        return Verdict("pass", True, f"BASELINE ({flips.count} flips{budget})", flips=flips, expectation=entry)
    reason = f"{flips.count} decisions flipped against {path} (allowed {allowed})"
    checks = [check_preprocessing(case.config, case.reference)] if case.config and case.reference else []
    message = "\n".join([f"{reason}:", *flips.lines(), *([diagnose(checks)] if checks else [])])
    return Verdict("fail", False, f"BASELINE FAIL ({flips.count} flips > {allowed}{budget})", reason=reason,
                   message=message, expectation=entry, flips=flips, diagnosis=tuple(checks))  # fmt: skip


def _wrong_normalization(case: Case) -> Verdict:
    """The change a wrong (or forced) normalization makes must be *detected* (decisions differ from the model's
    own normalization's); the shape-bias and cue-conflict-accuracy deltas are reported, no invented target."""
    assert case.correct is not None, "a wrong or forced normalization is judged against the model's own run"
    correct, correct_decisions = case.correct() if callable(case.correct) else case.correct
    flips = flips_between(correct_decisions, case.decisions)
    d_bias = case.result.shape_bias - correct.shape_bias
    d_acc = case.result.cue_accuracy - correct.cue_accuracy
    summary = f"{flips.count} flips, shape bias {d_bias * 100:+.2f} pp, cue acc. {d_acc * 100:+.2f} pp"
    if case.source == "huggingface" and case.normalization == "half":
        # The non-distilled facebook/deit-* checkpoints ship exactly this (mean/std 0.5): a finding.
        summary = f"{summary}; = the checkpoint's shipped preprocessor config"
    if case.role == "forced":
        return Verdict("finding", True, f"FINDING ({summary})", reason=summary, message=summary, flips=flips)
    better = _answers_better(case.decisions, correct_decisions)
    if better is not None:  # the "wrong" normalization is the one the weights want: the declared one is suspect
        reason = f"the {case.normalization} normalization answers better than the model's own ({better})"
        return Verdict("suspect", False, f"SUSPECT PREPROCESSING ({summary})", reason=reason,
                       message=f"{case.name}: {reason}", flips=flips)  # fmt: skip
    if flips.count >= MIN_FLIPS_DETECTED:
        return Verdict("detected", True, f"DETECTED ({summary})", reason=summary, message=summary, flips=flips)
    reason = (f"{case.normalization} normalization gave the same decisions as the model's own; is the "
              "normalization applied at all?")  # fmt: skip
    return Verdict("not-detected", False, "NOT DETECTED", reason=reason, message=f"{case.name}: {reason}",
                   flips=flips)  # fmt: skip


def _answers_better(decisions: Sequence[Decision], reference: Sequence[Decision]) -> str | None:
    """How much more often ``decisions`` hit the shape or the texture than ``reference`` on the same conflict
    stimuli, when beyond chance (the self-check's exact one-sided McNemar test at its ALPHA); else ``None``."""
    from modelval.judgement.preprocessing_check import ALPHA, mcnemar_better

    theirs = {d.imagename: d.response in (d.shape, d.texture) for d in reference if d.shape != d.texture}
    ours = {d.imagename: d.response in (d.shape, d.texture) for d in decisions if d.imagename in theirs}
    better = sum(hit and not theirs[name] for name, hit in ours.items())
    worse = sum(theirs[name] and not hit for name, hit in ours.items())
    p = mcnemar_better(better, worse)
    if p >= ALPHA:
        return None
    n = len(ours)
    mine, other = sum(ours.values()) / n, sum(theirs[name] for name in ours) / n
    return f"cue-conflict accuracy {mine:.1%} against {other:.1%} on {n} conflict stimuli, one-sided p = {p:.1e}"


def finding(case: Case) -> Verdict:
    """Nothing published: recorded as a finding, unless the accuracy is near 16-way chance.

    Parameters
    ----------
    case
        The case.
    """
    result = case.result
    chance = 1 / len(CATEGORIES)
    if math.isnan(result.cue_accuracy) or result.cue_accuracy < 3 * chance:
        reason = (f"cue-conflict accuracy {result.cue_accuracy:.3f} is near 16-way chance ({chance:.3f}); the model "
                  "or its weights are not a working ImageNet classifier")  # fmt: skip
        return Verdict("fail", False, "FAIL", reason=reason, message=f"{case.name}: {reason}")
    return Verdict("finding", True, "FINDING (no published value)", reason="no published value")
