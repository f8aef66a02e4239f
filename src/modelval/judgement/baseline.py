"""Regression baselines: per-image decisions and top-5 category probabilities of one evaluation.

Save a baseline once; after any preprocessing (or model-loading) change, re-run and compare:
which images flipped (from what to what), how far the shape bias moved, and which probabilities
shifted most. Thresholds turn the comparison into a pass/fail check.

File format (JSON, ``"format": "modelval-baseline/1"``): the evaluation settings (model,
normalization, resize, aggregation, effective preprocessing), library versions, the stimulus
manifest digest, the shape-bias summary, and one record per image:
``{"name", "shape", "texture", "decision", "top5": [[category, probability], ...]}`` where the
probabilities are the 16 aggregated category probabilities (the quantities decisions come from).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from modelval import __version__
from modelval.atomic import write_text
from modelval.behaviour.categories import CATEGORIES
from modelval.errors import DataError
from modelval.evaluation import Evaluation
from modelval.judgement.verdict import Flips, Verdict, answer_kind
from modelval.records.run_diff import RunDiff
from modelval.records.run_store import RunStore

FORMAT = "modelval-baseline/1"
TOP_K = 5


def _manifest_digest(relpaths: list[str]) -> str:
    """A digest of the stimulus list, so a baseline made on other stimuli is recognised."""
    return hashlib.sha256("\n".join(sorted(relpaths)).encode()).hexdigest()[:16]


def baseline_from_evaluation(
    evaluation: Evaluation,
    *,
    normalization: str,
    resize: str = "none",
) -> dict[str, Any]:
    """The JSON-ready baseline of an evaluation.

    Parameters
    ----------
    evaluation
        The evaluation to keep (its decisions and 16 category probabilities per image).
    normalization
        The normalization it ran under (``model``, ``imagenet``, ...), recorded for the comparison.
    resize
        The resize protocol it ran under (``none``: the 224 px stimuli as they are).
    """
    import torch

    probabilities = evaluation.category_probabilities
    order = np.argsort(-probabilities, axis=1, kind="stable")[:, :TOP_K]
    images = []
    for index, (stimulus, decision) in enumerate(zip(evaluation.stimuli, evaluation.decisions, strict=True)):
        top = [[CATEGORIES[c], round(float(probabilities[index, c]), 7)] for c in order[index]]
        images.append(
            {
                "name": stimulus.name,
                "shape": stimulus.shape,
                "texture": stimulus.texture,
                "decision": decision.response,
                "top5": top,
            }
        )
    return {
        "format": FORMAT,
        "model": evaluation.model_name,
        "normalization": normalization,
        "resize": resize,
        "aggregation": evaluation.aggregation,
        "preprocessing": evaluation.config.to_dict(),
        "stimuli_digest": _manifest_digest([s.relpath for s in evaluation.stimuli]),
        "versions": {"modelval": __version__, "torch": torch.__version__},
        "summary": {
            k: v
            for k, v in evaluation.result.to_dict().items()
            if k not in ("per_category", "ci95", "ci95_resampling")  # the point estimate only
        },
        "images": images,
    }


def save_baseline(path: str | os.PathLike[str], baseline: dict[str, Any]) -> Path:
    """Write ``baseline`` to ``path`` atomically, one image per line (small files, readable diffs).

    Parameters
    ----------
    path
        The file to write (``.json``).
    baseline
        What :func:`baseline_from_evaluation` returned.
    """
    header = json.dumps({**baseline, "images": "@IMAGES@"}, indent=1)
    images = ",\n  ".join(json.dumps(record) for record in baseline["images"])
    # Atomic: a full disk leaves the previous baseline as it was, never a truncated one.
    return write_text(path, header.replace('"@IMAGES@"', "[\n  " + images + "\n ]") + "\n")


def load_baseline(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A baseline file, checked field by field; a bad one is one :class:`~modelval.errors.DataError` line.

    Parameters
    ----------
    path
        The file :func:`save_baseline` wrote.
    """
    path = Path(path)
    try:
        payload = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"baseline file not found: {path}") from None
    except json.JSONDecodeError as error:
        raise DataError(f"{path}: not a JSON baseline ({error})") from None
    except (OSError, UnicodeDecodeError) as error:
        raise DataError(f"{path}: cannot read the baseline ({error})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise DataError(f'{path}: not a modelval baseline (expected "format": "{FORMAT}")')
    for key in ("model", "normalization", "images"):
        if key not in payload:
            raise DataError(f"{path}: baseline lacks the {key!r} entry")
    _check_types(path, payload)
    return payload


def _check_types(path: Path, payload: dict[str, Any]) -> None:
    """Every field a comparison reads has the type it needs; a wrong one is one line naming the field."""

    def bad(field: str, expected: str, value: object) -> DataError:
        return DataError(f"{path}: {field} must be {expected}, got {type(value).__name__} {str(value)[:60]!r}")

    for key in ("model", "normalization", "resize", "aggregation"):
        value = payload.get(key, "none")
        if not isinstance(value, str) or not value.strip():
            raise bad(f'"{key}"', "a non-empty string", value)
    summary = payload.get("summary", {})
    if not isinstance(summary, dict):
        raise bad('"summary"', "an object", summary)
    shape_bias = summary.get("shape_bias")
    if shape_bias is not None and (isinstance(shape_bias, bool) or not isinstance(shape_bias, int | float)):
        raise bad('"summary.shape_bias"', "a number or null", shape_bias)
    images = payload["images"]
    if not isinstance(images, list) or not images:
        raise bad('"images"', "a non-empty list of per-image records", images)
    for number, record in enumerate(images):
        where = f'"images"[{number}]'
        if not isinstance(record, dict):
            raise bad(where, 'an object {"name", "decision", "top5"}', record)
        for key in ("name", "decision"):
            if not isinstance(record.get(key), str):
                raise bad(f"{where}.{key}", "a string", record.get(key))
        if record["decision"] not in CATEGORIES and record["decision"] != "na":
            raise DataError(f"{path}: {where}.decision {record['decision']!r} is not one of the 16 categories")
        top = record.get("top5")
        if not isinstance(top, list):
            raise bad(f"{where}.top5", "a list of [category, probability] pairs", top)
        for pair in top:
            if (
                not isinstance(pair, list)
                or len(pair) != 2
                or pair[0] not in CATEGORIES
                or isinstance(pair[1], bool)
                or not isinstance(pair[1], int | float)
                or not math.isfinite(pair[1])
            ):
                raise bad(f"{where}.top5", "a list of [category, probability] pairs", pair)
    names = [record["name"] for record in images]
    if len(set(names)) != len(names):
        duplicate = next(name for name in names if names.count(name) > 1)
        raise DataError(f'{path}: the image {duplicate!r} appears twice in "images"')


def baseline_model(
    baseline: dict[str, Any], path: str | os.PathLike[str], *, model: str | None = None, trust_code: bool = False
) -> str:
    """The model a comparison runs: ``model`` when given, else the baseline's own, which may not name code.

    A baseline is a shared, committed data file: a ``"model"`` that imports and runs Python code
    (``file.py:fn``, ``module:fn``, ``hub:``) runs only with the same explicit consent as a ``hub:`` spec
    (``trust_code``, the command line's ``--trust-repo``) or when the model is given again (``model``).

    Parameters
    ----------
    baseline
        The loaded baseline.
    path
        Its file (named in the refusal).
    model
        The model given again on the command line (``--model``), which then runs instead.
    trust_code
        Consent to run a baseline's model that names code (``--trust-repo``).
    """
    from modelval.models.specs import check_spec_consent

    return check_spec_consent(str(baseline["model"]), f"baseline {path}", given=model, trusted=trust_code)


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
        ]
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
        lines.append("PASS" if self.passed else "FAIL: " + "; ".join(self.failures))
        return "\n".join(lines)


def compare_to_baseline(
    baseline: dict[str, Any],
    evaluation: Evaluation,
    *,
    max_flips: int = 0,
    max_shape_bias_delta: float = 0.005,
    max_probability_shift: float | None = None,
    show_shifts: int = 10,
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
