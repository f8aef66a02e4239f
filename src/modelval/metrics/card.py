"""The calibration card: every calibration number of one set of predictions, and how each was computed.

``calibration_card(labels, logits=...)`` (or ``probs=...``) returns one JSON-ready dict, the output of
``modelval calibration FILE --json``:

* the numbers: ``n``, ``accuracy``, ``accuracy_ci95``, ``ece``, ``ece_ci95``, ``mce``, ``rms``, ``brier``,
  ``nll``, ``classwise_ece``, ``debiased_l2``, ``smece``, ``effective_bins``, ``min_bin_count``, the
  ECE at several bin counts (``ece_by_bins``) and the ECE sweep (``ece_sweep``);
* how they were computed: ``convention``, ``n_bins`` (and ``n_bins_rule`` for ``auto``),
  ``bootstrap``, ``definitions`` (what each number is and which library it matches) and
  ``versions`` (this package, numpy, and the installed reference packages).
"""

from __future__ import annotations

import sys
from importlib import metadata
from typing import Any, Literal

import numpy as np

from modelval.errors import InputValidationError
from modelval.metrics.calibration import Convention, reliability_bins, top1_confidences
from modelval.metrics.estimators import (
    brier_score,
    classwise_calibration_error,
    debiased_l2_calibration_error,
    ece_at_bin_counts,
    ece_sweep,
    negative_log_likelihood,
    resolve_n_bins,
    smooth_ece,
)
from modelval.metrics.temperature import softmax

#: Packages whose definitions the card's numbers match (see ``DEFINITIONS``); their versions are reported.
REFERENCE_PACKAGES = ("torchmetrics", "scikit-learn", "uncertainty-calibration", "relplot", "netcal")

#: Largest bin count the card's ECE sweep tries (one binning pass per count).
SWEEP_MAX_BINS = 100

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
    "ci95": "percentile bootstrap 95% interval over multinomial cell counts (modelval.metrics.bootstrap)",
}


def package_versions() -> dict[str, str | None]:
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
    n_bins: int | Literal["auto"] = 15,
    convention: Convention = "default",
    n_bootstrap: int = 1000,
    seed: int = 0,
    stratify: bool = False,
) -> dict[str, Any]:
    """All calibration numbers of ``(N, C)`` logits or probabilities against ``labels`` (see the module docstring).

    Exactly one of ``logits`` and ``probs`` is given. ``n_bootstrap=0`` leaves the intervals out.
    """
    if (logits is None) == (probs is None):
        raise InputValidationError("give exactly one of logits and probs (an (N, C) array each)")
    from_logits = logits is not None
    if from_logits:
        from modelval.metrics.temperature import validate_logits

        z, y = validate_logits(logits, labels)
        p = softmax(z)
        scores: Any = z
    else:
        p = np.asarray(probs)
        y = np.asarray(labels)
        scores = p
    conf, correct = top1_confidences(p, y)
    n = int(conf.shape[0])
    bins_used, rule = resolve_n_bins(n_bins, n)
    bins = reliability_bins(conf, correct, bins_used, convention=convention)
    # Capped: on data that stay monotone the sweep would otherwise try every bin count up to n.
    sweep = ece_sweep(conf, correct, max_bins=min(n, SWEEP_MAX_BINS))
    card: dict[str, Any] = {
        "n": n,
        "num_classes": int(p.shape[1]),
        "accuracy": float(correct.mean()),
        "ece": bins.ece,
        "mce": bins.mce,
        "rms": bins.rms,
        "brier": brier_score(scores, y, logits=from_logits),
        "nll": negative_log_likelihood(scores, y, logits=from_logits),
        "classwise_ece": classwise_calibration_error(p, y, bins_used),
        "debiased_l2": debiased_l2_calibration_error(conf, correct, bins_used),
        "smece": smooth_ece(conf, correct),
        "effective_bins": bins.effective_bins,
        "min_bin_count": bins.min_bin_count,
        "ece_by_bins": {str(k): v for k, v in ece_at_bin_counts(conf, correct).items()},
        "ece_sweep": {"ece": sweep.ece, "n_bins": sweep.n_bins},
        "convention": convention,
        "n_bins": bins_used,
        "input": "logits" if from_logits else "probs",
    }
    if rule is not None:
        card["n_bins_rule"] = rule
    if n_bootstrap:
        from modelval.metrics.bootstrap import bootstrap_json, calibration_intervals, intervals_json

        intervals = calibration_intervals(
            conf,
            correct,
            bins_used,
            labels=y,
            convention=convention,
            n_resamples=n_bootstrap,
            seed=seed,
            stratify=stratify,
        )
        card.update(intervals_json(intervals))
        card["bootstrap"] = bootstrap_json(intervals)
    card["definitions"] = DEFINITIONS
    card["versions"] = package_versions()
    return card
