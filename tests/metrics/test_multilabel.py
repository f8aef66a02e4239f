"""Multilabel calibration: per label, macro / micro / weighted summaries, against torchmetrics, netcal,
scikit-learn, uncertainty-calibration and relplot (column by column), on random and real scores."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from modelval.errors import InputValidationError
from modelval.metrics.multilabel import (
    METRICS,
    multilabel_calibration,
    multilabel_calibration_error,
    validate_multilabel,
)
from reference_packages import reference, reference_names

# Reference packages (imported on first use: a missing one skips only the parity tests that use it)
brier_score_loss, log_loss = reference_names("sklearn.metrics", "brier_score_loss", "log_loss")

tm_classification = reference("torchmetrics.functional.classification")
netcal_metrics = reference("netcal.metrics")
calibration_ref = reference("calibration")
relplot = reference("relplot")

EXACT_TOL = 1e-12


def random_multilabel(n: int, labels: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Independent labels with different prevalences; scores over-confident (p ** 1.4 is the true rate)."""
    rng = np.random.default_rng(seed)
    p = rng.beta(0.6, rng.uniform(0.8, 4.0, size=labels), size=(n, labels))
    return p, (rng.uniform(size=(n, labels)) < p**1.4).astype(np.int64)


def real_multilabel(evaluation) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """EfficientNet-Lite0 on the 1280 cue-conflict stimuli: the 16 mean-aggregated category scores (rows do
    not sum to 1) against "the image shows category k as its shape or as its texture" (1 or 2 labels a row)."""
    from modelval.behaviour.categories import CATEGORIES

    scores = evaluation.category_probabilities.astype(np.float64)
    labels = np.zeros(scores.shape, dtype=np.int64)
    for i, stimulus in enumerate(evaluation.stimuli):
        labels[i, CATEGORIES.index(stimulus.shape)] = 1
        labels[i, CATEGORIES.index(stimulus.texture)] = 1
    return scores, labels, list(CATEGORIES)


def torchmetrics_ece(p: np.ndarray, y: np.ndarray, n_bins: int, norm: str = "l1") -> float:
    return float(tm_classification.binary_calibration_error(torch.tensor(p), torch.tensor(y), n_bins=n_bins, norm=norm))


def check_against_references(p: np.ndarray, y: np.ndarray, n_bins: int) -> float:
    """Every per-label and summary number of multilabel_calibration against a reference; the largest difference."""
    result = multilabel_calibration(p, y, n_bins)
    worst = 0.0
    for k, label in enumerate(result.labels):
        col_p, col_y = p[:, k], y[:, k]
        pairs = [
            (label.ece, netcal_metrics.ECE(n_bins).measure(col_p, col_y)),
            (label.mce, netcal_metrics.MCE(n_bins).measure(col_p, col_y)),
            (label.brier, brier_score_loss(col_y, col_p)),
            (label.nll, log_loss(col_y, col_p, labels=[0, 1])),
            (label.smece, relplot.smECE(col_p, col_y)),
            (
                label.debiased_l2,
                calibration_ref.lower_bound_scaling_ce(col_p, col_y, p=2, debias=True, num_bins=n_bins),
            ),
        ]
        worst = max(worst, *(abs(a - b) for a, b in pairs))
        assert label.n_positive == col_y.sum() and label.prevalence == pytest.approx(col_y.mean())
    pooled_p, pooled_y = p.reshape(-1), y.reshape(-1)
    summary = result.summary("ece")
    worst = max(
        worst,
        abs(summary["micro"] - netcal_metrics.ECE(n_bins).measure(pooled_p, pooled_y)),
        abs(
            summary["macro"]
            - np.mean([netcal_metrics.ECE(n_bins).measure(p[:, k], y[:, k]) for k in range(p.shape[1])])
        ),
        abs(result.summary("nll")["micro"] - log_loss(pooled_y, pooled_p, labels=[0, 1])),
        abs(result.summary("smece")["micro"] - relplot.smECE(pooled_p, pooled_y)),
    )
    return worst


@pytest.mark.parametrize("n_bins", [5, 15])
@pytest.mark.parametrize(("n", "labels", "seed"), [(300, 3, 0), (2000, 8, 1)])
def test_parity_multilabel_numbers_equal_the_references_column_by_column(n, labels, seed, n_bins):
    p, y = random_multilabel(n, labels, seed)
    assert check_against_references(p, y, n_bins) <= 1e-9  # debiased L2 is summed in Python by the package


@pytest.mark.parametrize("norm", ["l1", "l2", "max"])
def test_parity_macro_micro_weighted_against_torchmetrics(norm):
    p, y = random_multilabel(1500, 5, 2)
    per_label = [torchmetrics_ece(p[:, k], y[:, k], 15, norm) for k in range(5)]
    opts = {"norm": norm, "convention": "torchmetrics"}
    got = multilabel_calibration_error(p, y, 15, average=None, **opts)
    np.testing.assert_allclose(got, per_label, rtol=0, atol=EXACT_TOL)
    assert multilabel_calibration_error(p, y, 15, average="macro", **opts) == pytest.approx(
        np.mean(per_label), abs=EXACT_TOL
    )
    support = y.sum(axis=0)
    assert multilabel_calibration_error(p, y, 15, average="weighted", **opts) == pytest.approx(
        np.dot(support, per_label) / support.sum(), abs=EXACT_TOL
    )
    assert multilabel_calibration_error(p, y, 15, average="micro", **opts) == pytest.approx(
        torchmetrics_ece(p.reshape(-1), y.reshape(-1), 15, norm), abs=EXACT_TOL
    )


def test_hand_computed_macro_micro_weighted():
    # Label 0: p .25 .25 .75 .75, y 0 1 1 1 -> bins (0,.5]: frac .5 vs .25, (.5,1]: 1 vs .75 -> ECE .25.
    # Label 1: p .25 everywhere, y 0 0 0 0 -> one bin, frac 0 vs .25 -> ECE .25; no positives.
    # Micro: (0,.5] holds 6 pairs (1 positive, mean p .25) gap 1/6 - 1/4; (.5,1] 2 pairs gap .25.
    p = np.array([[0.25, 0.25], [0.25, 0.25], [0.75, 0.25], [0.75, 0.25]])
    y = np.array([[0, 0], [1, 0], [1, 0], [1, 0]])
    result = multilabel_calibration(p, y, 2)
    summary = result.summary("ece")
    assert summary["macro"] == pytest.approx(0.25, abs=1e-15)
    assert summary["weighted"] == pytest.approx(0.25, abs=1e-15)  # label 1 has weight 0
    assert summary["micro"] == pytest.approx(6 / 8 * abs(1 / 6 - 0.25) + 2 / 8 * 0.25, abs=1e-15)
    assert result.summary("brier")["micro"] == pytest.approx(result.summary("brier")["macro"], abs=1e-15)
    assert [row["n_positive"] for row in result.table()] == [3, 0]
    # No positives anywhere: the weighted mean is 0/0, said so, never NaN.
    none = multilabel_calibration(p, np.zeros_like(y), 2)
    assert none.summary("ece")["weighted"] is None
    with pytest.raises(InputValidationError, match=r"weighted.*undefined.*no label has a positive"):
        multilabel_calibration_error(p, np.zeros_like(y), 2, average="weighted")


def test_per_label_intervals_and_names():
    p, y = random_multilabel(800, 3, 4)
    result = multilabel_calibration(p, y, 10, label_names=["a", "b", "c"], n_bootstrap=300, seed=1)
    table = result.table()
    assert [row["label"] for row in table] == ["a", "b", "c"]
    for row in table:
        low, high = row["ece_ci95"]
        assert low < row["ece"] < high
        assert set(METRICS) <= set(row)
    json.dumps(table)


def test_parity_on_real_multilabel_scores(recorded_evaluations):
    # Real, uncalibrated scores: the mean of the ImageNet probabilities of each category's classes.
    p, y, names = real_multilabel(recorded_evaluations())
    assert (y.sum(axis=1) >= 1).all() and (y.sum(axis=1) == 2).any()  # genuinely multilabel rows
    assert check_against_references(p, y, 15) <= 1e-9
    result = multilabel_calibration(p, y, 15, label_names=names)
    per_label = [torchmetrics_ece(p[:, k], y[:, k], 15) for k in range(16)]
    got = multilabel_calibration_error(p, y, 15, average=None, convention="torchmetrics")
    np.testing.assert_allclose(got, per_label, rtol=0, atol=EXACT_TOL)
    # The scores are far below the label rates (mean-aggregated probabilities): badly calibrated per label.
    assert result.summary("ece")["macro"] > 0.05


@pytest.mark.parametrize(
    ("scores", "labels", "message"),
    [
        (np.full(4, 0.5), np.zeros(4), r"\(N, L\) matrix"),
        (np.full((4, 2), 0.5), np.zeros(4), "0/1 matrix of the scores' shape"),
        (np.full((4, 2), 1.5), np.zeros((4, 2)), "logits=True"),
        (np.full((4, 2), np.nan), np.zeros((4, 2)), "NaN"),
        (np.full((4, 2), 0.5), np.full((4, 2), 2), "0/1"),
        (np.zeros((0, 2)), np.zeros((0, 2)), "no examples"),
    ],
)
def test_bad_multilabel_input(scores, labels, message):
    with pytest.raises(InputValidationError, match=message):
        validate_multilabel(scores, labels)
    with pytest.raises(InputValidationError, match=message):
        multilabel_calibration(scores, labels)


def test_logits_and_options():
    p, y = random_multilabel(200, 2, 5)
    z = np.log(np.clip(p, 1e-12, 1)) - np.log1p(-np.clip(p, 0, 1 - 1e-12))
    assert multilabel_calibration_error(z, y, logits=True) == pytest.approx(
        multilabel_calibration_error(p, y), abs=1e-9
    )
    with pytest.raises(InputValidationError, match="NaN or infinite"):
        validate_multilabel(np.full((2, 2), np.inf), np.zeros((2, 2)), logits=True)
    with pytest.raises(InputValidationError, match="average must be one of"):
        multilabel_calibration_error(p, y, average="samples")  # type: ignore[arg-type]
    with pytest.raises(InputValidationError, match="label_names has 1 names for 2"):
        multilabel_calibration(p, y, label_names=["x"])
    with pytest.raises(InputValidationError, match="metric must be one of"):
        multilabel_calibration(p, y).summary("auc")
