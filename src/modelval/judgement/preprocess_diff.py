"""What two preprocessing pipelines' difference does to a model's answers: the verdict of a preprocess diff.

Per stimulus copy (:data:`~modelval.evaluation.pipelines.VARIANTS`) the stage-by-stage comparison is joined by what
the model made of it: the logits' shift, the decisions that flipped (counted by transition: ``shape -> texture``,
...), and the change of the shape bias and of the cue-conflict accuracy from A to B, each with a paired 95% interval
and a p-value:

- **shape bias** (B - A): the paired percentile bootstrap of :func:`~modelval.behaviour.paired.compare_paired` (the
  texture images resampled, the same resamples for both) and its paired permutation test;
- **cue-conflict accuracy** (B - A; a hit names the shape or the texture): Newcombe's paired score interval and the
  McNemar mid-p test on the stimuli that only one pipeline hits (the pair Fagerland, Lydersen and Laake recommend,
  BMC Med Res Methodol 13:91, 2013: the exact McNemar test is conservative enough to call p = 0.08 what the
  interval excludes).

The verdict is ``same`` (passed) when no stage differs and no decision flips, else ``differs``, naming the first
stage that diverged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modelval.behaviour.decisions import Decision
from modelval.evaluation.preprocess_diff import LOGIT_TOLERANCE, PixelRun, StageDiff
from modelval.judgement.verdict import Flips, flips_between

VARIANT_TITLES = {"original": "the 224 px originals", "256": "256 px upscales", "288": "288 px upscales",
                  "jpeg": "288 px JPEG copies (quality 90, 4:2:0 chroma)"}  # fmt: skip


@dataclass(frozen=True)
class PairedChange:
    """A statistic under A and under B on the same stimuli, B - A with its 95% interval and a p-value."""

    statistic: str
    a: float
    b: float
    ci95: tuple[float, float]
    p_value: float
    method: str

    @property
    def difference(self) -> float:
        return self.b - self.a

    def describe(self) -> str:
        return (f"{self.statistic}: A {self.a:.2%}, B {self.b:.2%}; B - A {100 * self.difference:+.2f} pp "
                f"[{100 * self.ci95[0]:+.2f}, {100 * self.ci95[1]:+.2f}] (p = {self.p_value:.2g})")  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {"statistic": self.statistic, "a": self.a, "b": self.b, "difference": self.difference,
                "ci95": list(self.ci95), "p": self.p_value, "method": self.method}  # fmt: skip


@dataclass
class VariantDiff:
    """Both pipelines on one stimulus copy: each stage, the logits, the flips, the paired changes."""

    variant: str
    images: int
    stages: list[StageDiff]
    first_stage: str | None
    logit_shift: tuple[float, float]
    flips: Flips
    shape_bias: PairedChange | None
    accuracy: PairedChange | None
    steps_a: tuple[str, ...] = ()
    steps_b: tuple[str, ...] = ()

    @property
    def same(self) -> bool:
        return self.first_stage is None and self.flips.count == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": self.variant, "images": self.images, "same": self.same, "first_stage": self.first_stage,
            "stages": [s.to_dict() for s in self.stages],
            "logits": {"max_abs": self.logit_shift[0], "mean_abs": self.logit_shift[1], "tolerance": LOGIT_TOLERANCE},
            "flips": self.flips.to_dict(),
            "shape_bias": None if self.shape_bias is None else self.shape_bias.to_dict(),
            "cue_conflict_accuracy": None if self.accuracy is None else self.accuracy.to_dict(),
        }  # fmt: skip


@dataclass
class PreprocessDiff:
    """Pipeline A against pipeline B for one model, on each stimulus copy."""

    a: str
    b: str
    model: str
    variants: list[VariantDiff] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return all(v.same for v in self.variants)

    @property
    def status(self) -> str:
        return "same" if self.passed else "differs"

    @property
    def reason(self) -> str:
        """One line: where the pipelines first diverge and what it cost, or that they agree."""
        differing = [v for v in self.variants if not v.same]
        if not differing:
            return ""
        v = differing[0]
        where = f"first diverges at {v.first_stage}" if v.first_stage else "no stage differs, yet decisions flip"
        cost = f"{v.flips.count} of {v.images} decisions flipped"
        if v.shape_bias is not None:
            cost += f", shape bias {100 * v.shape_bias.difference:+.2f} pp"
        return f"{where} on {VARIANT_TITLES[v.variant]}: {cost}"

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "status": self.status, "reason": self.reason, "a": self.a, "b": self.b,
                "model": self.model, "seconds": round(self.seconds, 2),
                "variants": [v.to_dict() for v in self.variants]}  # fmt: skip

    def text(self) -> str:
        """The report: per stimulus copy, the stages table, the logits, the flips and the paired changes."""
        lines = [f"A = {self.a}", f"B = {self.b}", f"model: {self.model}"]
        for v in self.variants:
            lines += ["", f"{VARIANT_TITLES[v.variant]}: {v.images} stimuli", *_stage_table(v)]
            lines.append(f"logits: max |B - A| {v.logit_shift[0]:.3g}, mean {v.logit_shift[1]:.3g}")
            shown = " (image: A's answer -> B's)" if v.flips.count else ""
            lines.append(f"decisions flipped: {v.flips.count} of {v.images}{shown}")
            lines += v.flips.lines()
            lines += [change.describe() for change in (v.shape_bias, v.accuracy) if change is not None]
        verdict = "SAME: no stage differs and no decision flips" if self.passed else f"DIFFERS: {self.reason}"
        return "\n".join([*lines, "", verdict])


def _stage_table(v: VariantDiff) -> list[str]:
    rows = [f"  {'stage':<17} {'max |d|':>9} {'mean |d|':>9} {'pixels':>7}  steps that ran there"]
    for s in v.stages:
        mark = "  <- first difference" if v.first_stage and v.first_stage.startswith(s.stage) else ""
        numbers = (f"{s.max_abs:>9.3g} {s.mean_abs:>9.3g} {s.changed_share:>7.1%}" if s.values
                   else f"{'-':>9} {'-':>9} {'-':>7}")  # fmt: skip
        a, b = (", ".join(n.split(": ", 1)[1] for n in names) or "-" for names in (s.steps_a, s.steps_b))
        steps = f"both: {a}" if a == b and a != "-" else "" if a == b else f"A: {a} | B: {b}"
        rows.append(f"  {s.stage:<17} {numbers}  {_short(steps)}{mark}".rstrip())
        rows += [f"  {'':<17} {note}" for note in (s.note, s.rescaled) if note]
    rows.append("  (|d| in grey levels, 0-255; at device and batch in the model's input values)")
    return rows


def _short(text: str, width: int = 90) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def judge_variant(variant: str, run: PixelRun, decisions_a: list[Decision], decisions_b: list[Decision],
                  names: tuple[str, str], *, seed: int = 0) -> VariantDiff:  # fmt: skip
    """One stimulus copy's verdict from the pixel run and both pipelines' decisions.

    Parameters
    ----------
    variant
        The stimulus copy.
    run
        The stage-by-stage comparison and both forwards.
    decisions_a, decisions_b
        Both pipelines' decisions, in the same order.
    names
        A's and B's names.
    seed
        The seed of the bootstrap and the permutation test.
    """
    flips = flips_between(decisions_a, decisions_b)
    return VariantDiff(variant, len(decisions_a), run.stages, run.first_divergence(), run.logit_shift, flips,
                       _shape_bias(decisions_a, decisions_b, names, seed), _accuracy(decisions_a, decisions_b),
                       run.stages_a, run.stages_b)  # fmt: skip


def _shape_bias(a: list[Decision], b: list[Decision], names: tuple[str, str], seed: int) -> PairedChange | None:
    from modelval.behaviour.paired import compare_paired

    if not any(d.shape != d.texture for d in a):
        return None
    paired = compare_paired(b, a, dataset="cue-conflict", names=(names[1], names[0]), seed=seed, permutations=2000)
    low, high = paired.ci95
    return PairedChange("shape bias", paired.value_b, paired.value_a, (low, high), paired.test.p,
                        "paired percentile bootstrap over the texture images; paired permutation test")  # fmt: skip


def _accuracy(a: list[Decision], b: list[Decision]) -> PairedChange | None:
    from modelval.behaviour.paired import mcnemar_mid_p
    from modelval.proportions import paired_difference

    conflicts = [(x, y) for x, y in zip(a, b, strict=True) if x.shape != x.texture]
    if not conflicts:
        return None
    hit_a = np.array([x.response in (x.shape, x.texture) for x, _ in conflicts])
    hit_b = np.array([y.response in (y.shape, y.texture) for _, y in conflicts])
    both, only_a, only_b = int((hit_a & hit_b).sum()), int((hit_a & ~hit_b).sum()), int((~hit_a & hit_b).sum())
    neither = len(conflicts) - both - only_a - only_b
    low, high = paired_difference(both, only_b, only_a, neither)
    return PairedChange("cue-conflict accuracy", float(hit_a.mean()), float(hit_b.mean()), (low, high),
                        mcnemar_mid_p(only_a, only_b),
                        "Newcombe's paired score interval; McNemar mid-p test")  # fmt: skip

