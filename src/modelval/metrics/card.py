"""The calibration card: every calibration number of one set of predictions, and how each was computed.

``calibration_card(labels, logits=...)`` (or ``probs=...``) returns one JSON-ready dict, the output of
``modelval calibration card FILE --json``: the task and how it was decided (:func:`modelval.metrics.tasks.detect_task`),
the task's numbers (multiclass: top-label; binary: positive-class, with the top-label ECE beside them; multilabel:
per label and macro / micro / weighted), their bootstrap intervals, and how they were computed: ``convention``,
``n_bins`` (``n_bins_rule`` for ``auto``), ``input``, ``bootstrap``, ``definitions`` (what each number is and
which library it matches) and ``versions``. The fields of each task's card are listed in ``docs/binary.md``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Literal

import numpy as np

from modelval import jsonio
from modelval.errors import InputValidationError
from modelval.metrics.binary import (
    binary_brier_score,
    binary_calibration_intervals,
    binary_negative_log_likelihood,
    binary_reliability_bins,
    binary_top_label,
)
from modelval.metrics.bootstrap import (
    METHOD,
    BootstrapInterval,
    bootstrap_json,
    calibration_intervals,
    interval_notes,
    intervals_json,
)
from modelval.metrics.calibration import Convention, ReliabilityBins, reliability_bins, top1_confidences
from modelval.metrics.estimators import (
    debiased_l2_calibration_error,
    ece_at_bin_counts,
    ece_sweep,
    resolve_n_bins,
    smooth_ece,
)
from modelval.metrics.multilabel import METRICS as MULTILABEL_METRICS
from modelval.metrics.multilabel import multilabel_calibration
from modelval.metrics.scoring import brier_score, classwise_calibration_error, negative_log_likelihood
from modelval.metrics.tasks import TaskInput, detect_task
from modelval.metrics.temperature import softmax
from modelval.metrics.validation import validate_binary, validate_logits

#: Packages whose definitions the card's numbers match (see ``DEFINITIONS``); their versions are reported.
REFERENCE_PACKAGES = ("torchmetrics", "scikit-learn", "uncertainty-calibration", "relplot", "netcal")

#: Largest bin count the card's ECE sweep tries (one binning pass per count).
SWEEP_MAX_BINS = 100

_CI95 = (
    "percentile bootstrap 95% interval of the resampled estimator over multinomial cell counts "
    "(modelval.metrics.bootstrap); a binned ECE is biased upward, so for a well calibrated model the interval can "
    "lie above the point estimate: interval_notes then says so"
)

DEFINITIONS: dict[str, str] = {
    "ece": "top-1 ECE, sum_m |B_m|/N |acc - conf| (Guo et al. 2017); convention 'default' = (lo, hi] bins as "
    "scikit-learn's calibration_curve, 'torchmetrics' = torchmetrics 1.x binning (float64 sums)",
    "mce": "largest |acc - conf| over non-empty bins",
    "rms": "sqrt(sum_m |B_m|/N (acc - conf)^2), torchmetrics norm='l2' without debiasing",
    "brier": "multiclass Brier score (1/N) sum_i sum_k (p_ik - y_ik)^2 = scikit-learn brier_score_loss "
    "(scale_by_half=False)",
    "nll": "mean -log p_y: exact log-softmax from logits; from probabilities as scikit-learn log_loss",
    "classwise_ece": "mean over classes of the one-vs-rest ECE = uncertainty-calibration get_ece(mode='marginal')",
    "debiased_l2": "debiased top-label L2 calibration error, equal-mass bins (Kumar et al. 2019) = "
    "uncertainty-calibration get_calibration_error(debias=True)",
    "smece": "smooth ECE with the fixed-point bandwidth (Blasiok & Nakkiran 2023) = relplot.smECE",
    "ece_sweep": "ECE at the largest equal-mass bin count with monotone bin accuracies (Roelofs et al. 2022)",
    "ci95": _CI95,
}

BINARY_DEFINITIONS: dict[str, str] = {
    "ece": "positive-class ECE: sum_m |B_m|/N |fraction of positives - mean p| over bins of p = P(y = 1) "
    "(convention 'default' = (lo, hi] as scikit-learn calibration_curve and netcal ECE on 1-D input; "
    "'torchmetrics' = torchmetrics binary_calibration_error)",
    "mce": "largest |fraction of positives - mean p| over non-empty bins (torchmetrics norm='max')",
    "rms": "sqrt(sum_m |B_m|/N (fraction of positives - mean p)^2) (torchmetrics norm='l2')",
    "top_label_ece": "top-label ECE of the binary classifier: confidence max(p, 1 - p) against whether the "
    "predicted class (positive iff p > 0.5) is right = multiclass top-1 ECE of [1 - p, p]; NOT the positive-class ECE",
    "accuracy": "fraction of examples whose predicted class (positive iff p > 0.5) equals the label",
    "positive_rate": "fraction of examples with label 1",
    "brier": "binary Brier score mean((p - y)^2) = scikit-learn brier_score_loss (binary)",
    "nll": "binary cross-entropy: from logits exact (torch binary_cross_entropy_with_logits); from probabilities "
    "clipped to [eps, 1 - eps] as scikit-learn log_loss",
    "debiased_l2": "debiased L2 calibration error of p, equal-mass bins (Kumar et al. 2019) = "
    "uncertainty-calibration get_calibration_error(p, y, debias=True) on 1-D input",
    "smece": "smooth ECE of p (Blasiok & Nakkiran 2023) = relplot.smECE(p, y)",
    "ece_sweep": "positive-class ECE at the largest equal-mass bin count with monotone fractions of positives "
    "(Roelofs et al. 2022)",
    "ci95": _CI95,
}

MULTILABEL_DEFINITIONS: dict[str, str] = {
    "labels": "per label k: the binary (positive-class) numbers of column k against label k present (1) or not",
    "macro": "unweighted mean over labels of each per-label number",
    "weighted": "mean over labels weighted by each label's number of positives (scikit-learn average='weighted'); "
    "null when no label has a positive",
    "micro": "each number computed on the N * L pooled (score, label) pairs; equals macro for brier and nll",
    **{name: BINARY_DEFINITIONS[name] for name in ("ece", "brier", "nll", "debiased_l2", "smece")},
    "ece_ci95": "per label: percentile bootstrap 95% interval of that label's ECE (examples resampled); the "
    "summaries have none (resampling an example moves its L label decisions together)",
}


def _package_versions() -> dict[str, str | None]:
    """Versions of modelval, numpy, Python and the reference packages (``None``: not installed)."""
    versions: dict[str, str | None] = {"python": sys.version.split()[0], "numpy": np.__version__}
    for name in ("modelval", *REFERENCE_PACKAGES):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def calibration_card(
    labels: Any,
    *,
    logits: Any = None,
    probs: Any = None,
    task: str | None = None,
    n_bins: int | Literal["auto"] = 15,
    convention: Convention = "default",
    n_bootstrap: int = 1000,
    seed: int = 0,
    stratify: bool = False,
    label_names: Any = None,
) -> dict[str, Any]:
    """All calibration numbers of ``logits`` or ``probs`` against ``labels`` (see the module docstring).

    Parameters
    ----------
    labels
        Class indices (multiclass), 0/1 labels (binary) or an ``(N, L)`` 0/1 matrix (multilabel).
    logits, probs
        The scores: exactly one of them.
    task
        ``None``/``"auto"`` (detect it: :func:`~modelval.metrics.tasks.detect_task`; an ambiguous input is
        refused with the reason), ``"binary"``, ``"multiclass"`` or ``"multilabel"``.
    n_bins, convention
        The bins of the binned numbers (``"auto"``: the cube-root rule).
    n_bootstrap, seed, stratify
        The bootstrap intervals (:mod:`modelval.metrics.bootstrap`); 0 resamples leave them out.
    label_names
        Names of the label columns in the per-label table (multilabel only).
    """
    chosen = detect_task(labels, logits=logits, probs=probs, task=task)
    if label_names is not None and chosen.task != "multilabel":
        raise InputValidationError(f"label_names apply to multilabel input only; this is {chosen.task}")
    how = _How(n_bins, convention, n_bootstrap, seed, stratify, chosen.from_logits)
    if chosen.task == "multilabel":
        body = _multilabel_card(chosen, label_names, how)
    else:
        body = (_binary_card if chosen.task == "binary" else _multiclass_card)(chosen, how)
    return {"task": chosen.task, "task_detection": chosen.detection, **body, "versions": _package_versions()}


@dataclass
class _How:
    """How the card's numbers are computed: the bins (resolved on the validated input) and the bootstrap."""

    n_bins: Any
    convention: Convention
    n_bootstrap: int
    seed: int
    stratify: bool
    from_logits: bool
    fields: dict[str, Any] = field(default_factory=dict)

    def resolve(self, n: int) -> int:
        """The bin count for ``n`` examples; ``fields`` then says how the numbers were binned."""
        self.n_bins, rule = resolve_n_bins(self.n_bins, n)
        self.fields = {"convention": self.convention, "n_bins": self.n_bins}
        self.fields["input"] = "logits" if self.from_logits else "probs"
        self.fields.update({} if rule is None else {"n_bins_rule": rule})
        return int(self.n_bins)

    def intervals(self, conf: np.ndarray, correct: np.ndarray, labels: np.ndarray) -> dict[str, BootstrapInterval]:
        """Bootstrap intervals of the top-1 ECE, MCE, RMS and accuracy, stratified by ``labels``."""
        return calibration_intervals(
            conf, correct, self.n_bins, labels=labels, convention=self.convention, n_resamples=self.n_bootstrap,
            seed=self.seed, stratify=self.stratify,
        )  # fmt: skip


def _multiclass_card(chosen: TaskInput, how: _How) -> dict[str, Any]:
    """The top-label card of ``(N, C)`` logits or probabilities against class indices."""
    if chosen.from_logits:
        scores, y = validate_logits(chosen.scores, chosen.labels)
        p = softmax(scores)
    else:
        p = scores = np.asarray(chosen.scores)
        y = np.asarray(chosen.labels)
    conf, correct = top1_confidences(p, y)
    bins = reliability_bins(conf, correct, how.resolve(len(conf)), convention=how.convention)
    card: dict[str, Any] = {
        "n": len(conf),
        "num_classes": int(p.shape[1]),
        "accuracy": float(correct.mean()),
        "ece": bins.ece,
        "mce": bins.mce,
        "rms": bins.rms,
        "brier": brier_score(scores, y, logits=chosen.from_logits),
        "nll": negative_log_likelihood(scores, y, logits=chosen.from_logits),
        "classwise_ece": classwise_calibration_error(p, y, how.n_bins),
        "debiased_l2": debiased_l2_calibration_error(conf, correct, how.n_bins),
        "smece": smooth_ece(conf, correct),
        **_how_binned(bins, conf, correct),
        **how.fields,
    }
    if how.n_bootstrap:
        intervals = how.intervals(conf, correct, y)
        card.update(intervals_json(intervals), bootstrap=bootstrap_json(intervals))
        _add_notes(card, interval_notes(intervals))
    card["definitions"] = DEFINITIONS
    return card


def _binary_card(chosen: TaskInput, how: _How) -> dict[str, Any]:
    """The binary card: positive-class calibration of one score per example, and the top-label ECE."""
    p, y = validate_binary(chosen.scores, chosen.labels, logits=chosen.from_logits)
    bins = binary_reliability_bins(p, y, how.resolve(len(p)), convention=how.convention)
    conf, correct = binary_top_label(p, y)
    card: dict[str, Any] = {
        "n": len(p),
        "n_positive": int(y.sum()),
        "positive_rate": float(y.mean()),
        "accuracy": float(correct.mean()),
        "ece": bins.ece,
        "mce": bins.mce,
        "rms": bins.rms,
        "top_label_ece": reliability_bins(conf, correct, how.n_bins, convention=how.convention).ece,
        "brier": binary_brier_score(chosen.scores, y, logits=chosen.from_logits),
        "nll": binary_negative_log_likelihood(chosen.scores, y, logits=chosen.from_logits),
        "debiased_l2": debiased_l2_calibration_error(p, y, how.n_bins),
        "smece": smooth_ece(p, y),
        **_how_binned(bins, p, y),
        **how.fields,
    }
    if how.n_bootstrap:
        positive = binary_calibration_intervals(
            p, y, how.n_bins, convention=how.convention, n_resamples=how.n_bootstrap, seed=how.seed,
            stratify=how.stratify,
        )  # fmt: skip
        # Stratified by the true label, as the positive-class intervals: both keep N+ and N- fixed.
        top_label = how.intervals(conf, correct, y.astype(np.int64))
        top_intervals = {"top_label_ece": top_label["ece"], "accuracy": top_label["accuracy"]}
        card.update(intervals_json(positive), **intervals_json(top_intervals), bootstrap=bootstrap_json(positive))
        _add_notes(card, {**interval_notes(positive), **interval_notes(top_intervals)})
    card["definitions"] = BINARY_DEFINITIONS
    return card


def _add_notes(card: dict[str, Any], notes: dict[str, str]) -> None:
    """``interval_notes``: why a point estimate lies outside its own bootstrap interval (only when one does)."""
    if notes:
        card["interval_notes"] = notes


def _names(label_names: Any) -> list[str]:
    """Label names as text; byte strings (``numpy.savez`` of an ``S`` array) are decoded as UTF-8."""
    return [
        name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
        for name in np.asarray(label_names).reshape(-1).tolist()
    ]


def _multilabel_card(chosen: TaskInput, label_names: Any, how: _How) -> dict[str, Any]:
    """The multilabel card: per-label binary calibration with macro / micro / weighted summaries."""
    result = multilabel_calibration(
        chosen.scores, chosen.labels, how.resolve(len(chosen.scores)), logits=chosen.from_logits,
        convention=how.convention, label_names=None if label_names is None else _names(label_names),
        n_bootstrap=how.n_bootstrap, seed=how.seed, stratify=how.stratify,
    )  # fmt: skip
    summaries = {metric: result.summary(metric) for metric in MULTILABEL_METRICS}
    no_weight = jsonio.Undefined("no label has a positive example: the positive-weighted mean is 0/0")
    card: dict[str, Any] = {
        "n": result.n,
        "num_labels": result.n_labels,
        "n_positive": int(sum(label.n_positive for label in result.labels)),
    }
    for average in ("macro", "micro", "weighted"):
        card[average] = {
            metric: (no_weight if values[average] is None else values[average]) for metric, values in summaries.items()
        }
    card["labels"] = result.table()
    card.update(how.fields)
    if how.n_bootstrap:
        card["bootstrap"] = {
            "method": METHOD,
            "n_resamples": how.n_bootstrap,
            "seed": how.seed,
            "level": 0.95,
            "stratified": how.stratify,
            "scope": "per label (the labels[*].ece_ci95); none for the summaries",
        }
    card["definitions"] = MULTILABEL_DEFINITIONS
    return card


def _how_binned(bins: ReliabilityBins, conf: np.ndarray, correct: np.ndarray) -> dict[str, Any]:
    """The fields that say how the binned numbers came out: their bins, other bin counts and the ECE sweep."""
    # Capped: on data that stay monotone the sweep would otherwise try every bin count up to n.
    sweep = ece_sweep(conf, correct, max_bins=min(len(conf), SWEEP_MAX_BINS))
    return {
        "effective_bins": bins.effective_bins,
        "min_bin_count": bins.min_bin_count,
        "ece_by_bins": {str(k): v for k, v in ece_at_bin_counts(conf, correct).items()},
        "ece_sweep": {"ece": sweep.ece, "n_bins": sweep.n_bins},
    }
