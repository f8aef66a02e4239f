"""Regression baselines compared: after any preprocessing (or model-loading) change, re-run a baseline
(:mod:`modelval.judgement.baseline_file`) and compare: which images flipped (from what to what, counted by
transition), how far the shape bias moved, which probabilities shifted most, and what differs in the effective
preprocessing. Thresholds turn the comparison into a pass/fail check.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from modelval.behaviour.categories import CATEGORIES
from modelval.errors import DataError
from modelval.evaluation import Evaluation
from modelval.judgement.verdict import Flips, Verdict, answer_kind
from modelval.records.run_diff import RunDiff
from modelval.records.run_store import RunStore


@dataclass(frozen=True)
class Flip:
    name: str
    before: str
    after: str
    #: ``shape -> texture``: what kind of answer the baseline's was, and what kind it is now.
    transition: str = ""


@dataclass(frozen=True)
class ProbabilityShift:
    name: str
    category: str
    before: float
    after: float

    @property
    def delta(self) -> float:
        return self.after - self.before


@dataclass
class BaselineComparison:
    model: str
    images: int
    flips: list[Flip]
    shape_bias_before: float
    shape_bias_after: float
    largest_shifts: list[ProbabilityShift]
    failures: list[str] = field(default_factory=list)
    #: The flips allowed (``--max-flips``).
    max_flips: int | None = None
    #: This comparison's id in the run store, and what differs from the previous comparison of the model
    #: (a nightly's "since last night"); ``None`` when not recorded or the first.
    run_id: int | None = None
    since_last_run: RunDiff | None = None
    #: The effective preprocessing's fields that differ from the baseline's: name -> (baseline's, now).
    preprocessing_changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    #: The recorded settings given again with another value: name -> (baseline's, given).
    overrides: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    @property
    def shape_bias_delta(self) -> float:
        return self.shape_bias_after - self.shape_bias_before

    @property
    def max_shift(self) -> float:
        return max((abs(s.delta) for s in self.largest_shifts), default=0.0)

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def verdict(self) -> Verdict:
        """The comparison's verdict as data: passed, its status and reason, the flips counted by transition."""
        from collections import Counter

        counts = Counter(flip.transition for flip in self.flips)
        flips = Flips(len(self.flips), self.images, self.max_flips,
                      dict(sorted(counts.items(), key=lambda item: (-item[1], item[0]))),
                      tuple(f"{f.name}: {f.before} -> {f.after}" for f in self.flips))  # fmt: skip
        if self.passed:
            return Verdict("pass", True, "PASS", flips=flips)
        reason = "; ".join(self.failures)
        if self.preprocessing_changes:
            reason += f"; the preprocessing differs from the baseline's: {self.describe_changes()}"
        return Verdict("fail", False, "FAIL", reason=reason, message=reason, flips=flips)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "images": self.images,
            **self.verdict.to_dict(),
            "flipped": len(self.flips),
            "flipped_images": [vars(f) for f in self.flips],
            "shape_bias_before": self.shape_bias_before,
            "shape_bias_after": self.shape_bias_after,
            "shape_bias_delta": self.shape_bias_delta,
            "max_probability_shift": self.max_shift,
            "largest_shifts": [{**vars(s), "delta": s.delta} for s in self.largest_shifts],
            "failures": self.failures,
            "preprocessing_changes": {name: list(pair) for name, pair in self.preprocessing_changes.items()},
            "overrides": {name: list(pair) for name, pair in self.overrides.items()},
            "run_id": self.run_id,
            "since_last_run": None if self.since_last_run is None else self.since_last_run.to_dict(),
        }

    def format(self, *, limit: int = 20) -> str:
        """The comparison as text: the headline, the flipped decisions, the largest shifts and the verdict.

        Parameters
        ----------
        limit
            At most this many flipped images and shifts are listed.
        """
        lines = [
            f"Baseline comparison for {self.model}: {len(self.flips)} of {self.images} decisions flipped; "
            f"shape bias {self.shape_bias_before:.4f} -> {self.shape_bias_after:.4f} "
            f"({self.shape_bias_delta * 100:+.2f} pp); largest probability shift {self.max_shift:.4f}",
            "preprocessing against the baseline: " + (self.describe_changes() or "the same"),
        ]
        if self.overrides:
            lines.append("settings given instead of the baseline's: " + describe_changes(self.overrides))
        flips = self.verdict.flips
        if self.flips and flips is not None:
            counted, *listed = flips.lines(limit)
            lines += [f"Flipped decisions (image: baseline -> now), counted {counted}", *listed]
        if self.largest_shifts:
            lines.append("Largest probability shifts (image, category: baseline -> now):")
            lines += [
                f"  {s.name}, {s.category}: {s.before:.4f} -> {s.after:.4f} ({s.delta:+.4f})"
                for s in self.largest_shifts[:limit]
            ]
        if self.since_last_run is not None:
            lines.append("Since the last comparison (" + self.since_last_run.format() + ")")
        lines.append("PASS" if self.passed else "FAIL: " + self.verdict.reason)
        return "\n".join(lines)


    def describe_changes(self) -> str:
        """``input_size 240 -> 224, interpolation bicubic -> bilinear`` (empty when nothing differs)."""
        return describe_changes(self.preprocessing_changes)


def describe_changes(changes: Mapping[str, tuple[Any, Any]]) -> str:
    """``input_size 240 -> 224, interpolation bicubic -> bilinear``: each field, the baseline's, now.

    Parameters
    ----------
    changes
        Name -> (baseline's, now), as :func:`preprocessing_changes` returns them.
    """
    return ", ".join(f"{name} {_shown(before)} -> {_shown(after)}" for name, (before, after) in changes.items())


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return "(" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) + ")"
    return "none" if value is None else str(value)


def preprocessing_changes(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The fields of the effective preprocessing (:meth:`~modelval.preprocessing.PreprocessConfig.to_dict`) that
    differ between a baseline and now, mean and std compared to 6 decimals (the baseline's JSON rounds none).

    Parameters
    ----------
    before
        The baseline's ``"preprocessing"`` (``None``: not recorded, nothing to compare).
    after
        The fresh run's.
    """
    if not before:
        return {}

    def same(a: Any, b: Any) -> bool:
        if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            return all(isinstance(x, int | float) and isinstance(y, int | float) and round(x - y, 6) == 0
                       for x, y in zip(a, b, strict=True))  # fmt: skip
        return bool(a == b)

    return {name: (before.get(name), value) for name, value in after.items() if not same(before.get(name), value)}


def compare_to_baseline(
    baseline: dict[str, Any],
    evaluation: Evaluation,
    *,
    max_flips: int = 0,
    max_shape_bias_delta: float = 0.005,
    max_probability_shift: float | None = None,
    show_shifts: int = 10,
    overrides: Mapping[str, tuple[Any, Any]] | None = None,
) -> BaselineComparison:
    """Compare a fresh evaluation with a baseline, image by image.

    Probability shifts are measured on the baseline's top-5 categories of each image. Thresholds:
    more than ``max_flips`` flipped decisions, an absolute shape-bias change above
    ``max_shape_bias_delta``, or (if set) a probability shift above ``max_probability_shift`` fails.

    Parameters
    ----------
    baseline
        The loaded baseline.
    evaluation
        The fresh evaluation, on the same stimuli.
    max_flips
        Flipped decisions allowed.
    max_shape_bias_delta
        Shape-bias change allowed (a fraction: 0.005 is half a percentage point).
    max_probability_shift
        Largest change of one category probability allowed (``None``: not checked).
    show_shifts
        How many of the largest shifts the comparison keeps.
    overrides
        The recorded settings given again with another value (:func:`reapplied_settings`), to report.
    """
    records = {r["name"]: r for r in baseline["images"]}
    current = {s.name: i for i, s in enumerate(evaluation.stimuli)}
    if records.keys() != current.keys():
        missing, extra = sorted(records.keys() - current.keys()), sorted(current.keys() - records.keys())
        raise DataError(
            f"the baseline and this evaluation cover different stimuli ({len(missing)} only in the baseline, "
            f"e.g. {missing[:3]}; {len(extra)} only now, e.g. {extra[:3]})"
        )
    flips, shifts = [], []
    for name, record in records.items():
        index = current[name]
        now = evaluation.decisions[index].response
        if now != record["decision"]:
            shape, texture = evaluation.stimuli[index].shape, evaluation.stimuli[index].texture
            kinds = (answer_kind(shape, texture, record["decision"]), answer_kind(shape, texture, now))
            flips.append(Flip(name, record["decision"], now, f"{kinds[0]} -> {kinds[1]}"))
        for category, before in record["top5"]:
            after = float(evaluation.category_probabilities[index, CATEGORIES.index(category)])
            shifts.append(ProbabilityShift(name, category, float(before), after))
    shifts.sort(key=lambda s: (-abs(s.delta), s.name, s.category))
    before = float(baseline.get("summary", {}).get("shape_bias") or math.nan)
    comparison = BaselineComparison(
        model=str(baseline["model"]),
        images=len(records),
        flips=sorted(flips, key=lambda f: f.name),
        shape_bias_before=before,
        shape_bias_after=evaluation.result.shape_bias,
        largest_shifts=shifts[:show_shifts],
        max_flips=max_flips,
        preprocessing_changes=preprocessing_changes(baseline.get("preprocessing"), evaluation.config.to_dict()),
        overrides=dict(overrides or {}),
    )
    if len(flips) > max_flips:
        comparison.failures.append(f"{len(flips)} flipped decisions > --max-flips {max_flips}")
    if abs(comparison.shape_bias_delta) > max_shape_bias_delta:
        comparison.failures.append(
            f"shape bias moved {comparison.shape_bias_delta * 100:+.2f} pp > --max-shape-bias-delta "
            f"{max_shape_bias_delta * 100:.2f} pp"
        )
    if max_probability_shift is not None and comparison.max_shift > max_probability_shift:
        comparison.failures.append(
            f"a probability moved {comparison.max_shift:.4f} > --max-probability-shift {max_probability_shift}"
        )
    return comparison


def record_comparison(
    comparison: BaselineComparison,
    evaluation: Evaluation,
    provenance: dict[str, Any],
    *,
    label: str,
    run_store: RunStore | None,
) -> None:
    """Record a comparison in ``run_store`` and fill in what changed since the previous one (same label).

    Parameters
    ----------
    comparison
        The comparison; its ``run_id`` and ``since_last_run`` are filled in.
    evaluation
        The evaluation it compared.
    provenance
        What produced the evaluation.
    label
        The run store's label of the comparison (the protocol).
    run_store
        Where runs are recorded (``None``: nowhere).
    """
    from modelval.records.run_diff import since_last_run
    from modelval.records.run_store import record_run

    result = evaluation.result
    verdict = comparison.verdict.to_dict()
    summary = {"flipped": len(comparison.flips), "shape_bias": result.shape_bias,
               **{key: verdict[key] for key in ("passed", "status", "reason", "verdict")}}  # fmt: skip
    decisions = {d.imagename: [d.shape, d.response] for d in evaluation.decisions}
    comparison.run_id = record_run(
        run_store, "baseline", model=comparison.model, dataset="cue-conflict", summary=summary, provenance=provenance,
        decisions=decisions, label=label,
    )  # fmt: skip
    comparison.since_last_run = since_last_run(run_store, comparison.run_id)

