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
from modelval.records.run_store import RunDiff, RunStore

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
    from modelval.records.run_store import record_run, since_last_run

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


#: The protocol a committed baseline of the package was made under when its ``.json`` sibling does not say.
STANDARD_PROTOCOL = {"normalization": "model", "resize": "none", "aggregation": "mean"}


@dataclass(frozen=True)
class CommittedBaseline:
    """A registered model's committed per-image decisions (``src/modelval/data/baselines``) beside a run.

    Where no shape bias is published, this is what a run can be compared with. ``applies`` says whether the
    run used the baseline's protocol on the same stimuli; only then are ``flips`` and ``shape_bias`` compared
    (``why_not`` says why not otherwise).
    """

    path: str
    applies: bool
    shape_bias: float | None = None
    flips: int | None = None
    images: int = 0
    max_flips: int = 0
    why_not: str = ""
    #: The decision file itself (the package's data).
    csv: str = ""

    @property
    def passed(self) -> bool:
        """At most ``max_flips`` decisions differ from the baseline's (``False`` when it does not apply)."""
        return self.applies and self.flips is not None and self.flips <= self.max_flips

    def describe(self) -> str:
        """One line: what was compared, or why the baseline does not apply."""
        if not self.applies:
            return f"its committed baseline {self.path} does not apply: {self.why_not}"
        return (
            f"compared with its committed baseline {self.path} (same protocol and stimuli): {self.flips} of "
            f"{self.images} decisions differ (allowed {self.max_flips}), baseline shape bias "
            f"{(self.shape_bias or math.nan) * 100:.2f}%"
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "applies": self.applies}
        if self.applies:
            out.update(shape_bias=self.shape_bias, flips=self.flips, images=self.images, max_flips=self.max_flips,
                       passed=self.passed)  # fmt: skip
        else:
            out["why_not"] = self.why_not
        return out


def committed_baseline(
    relpath: str,
    decisions: list[Any],
    protocol: dict[str, str],
    *,
    max_flips: int = 3,
) -> CommittedBaseline:
    """Compare ``decisions`` with the committed baseline ``relpath`` (under the package's ``data/``) when the
    run's ``protocol`` (``normalization``, ``resize``, ``aggregation``, ``dataset``) is the baseline's; more than
    ``max_flips`` flipped decisions fail (the validation suite's ``verdicts.MAX_BASELINE_FLIPS``).

    Parameters
    ----------
    relpath
        The baseline's decision CSV under the package's ``data/``.
    decisions
        The run's decisions.
    protocol
        The run's ``normalization``, ``resize``, ``aggregation`` and ``dataset`` (those it states).
    max_flips
        Flipped decisions allowed.

    Examples
    --------
    >>> from modelval.behaviour.decisions import read_decisions
    >>> from modelval.paths import package_data
    >>> same = read_decisions(package_data("baselines/efficientnet_lite0.csv"))
    >>> check = committed_baseline("baselines/efficientnet_lite0.csv", same, {"normalization": "model"})
    >>> check.flips, check.passed, round(check.shape_bias, 4)
    (0, True, 0.2394)
    >>> committed_baseline("baselines/efficientnet_lite0.csv", same, {"normalization": "imagenet"}).why_not
    'it was made with normalization model, this run used imagenet'
    """
    from modelval.behaviour.decisions import by_stimulus, read_decisions
    from modelval.behaviour.shape_bias import compute_shape_bias
    from modelval.paths import package_data

    shown = f"src/modelval/data/{relpath}"
    csv_path = package_data(relpath)
    found = str(csv_path)
    made_with = dict(STANDARD_PROTOCOL, dataset="cue-conflict")
    sibling = csv_path.with_suffix(".json")
    if sibling.is_file():
        header = json.loads(sibling.read_text())  # the full baseline of the same run: its protocol is recorded
        made_with.update({key: str(header[key]) for key in STANDARD_PROTOCOL if key in header})
    for key, value in made_with.items():
        if key in protocol and protocol[key] != value:
            return CommittedBaseline(shown, False, why_not=f"it was made with {key} {value}, this run used "
                                                           f"{protocol[key]}", csv=found)  # fmt: skip
    baseline = by_stimulus(read_decisions(csv_path))
    current = by_stimulus(decisions)
    if current.keys() != baseline.keys():
        return CommittedBaseline(shown, False, why_not=f"it covers {len(baseline)} stimuli, this run "
                                                       f"{len(current)} others", csv=found)  # fmt: skip
    flips = sum(current[name].response != baseline[name].response for name in current)
    baseline_bias = compute_shape_bias(list(baseline.values()), n_bootstrap=0).shape_bias
    return CommittedBaseline(shown, True, baseline_bias, flips, len(baseline), max_flips, csv=found)
